//! The one place where a lockgate [`Error`] becomes a JavaScript value.
//!
//! `lib/errors.js` registers its factory at load time (`setErrorFactory`), so every error the
//! engine produces — thrown synchronously or carried in an event — arrives in JavaScript as an
//! instance of the `LockError` subclass for its code, with the core's `retryable` flag.

use std::cell::RefCell;

use js_sys::{Function, Reflect};
use lockgate_core::{Error, ErrorKind};
use wasm_bindgen::prelude::*;

thread_local! {
    static FACTORY: RefCell<Option<Function>> = const { RefCell::new(None) };
}

/// Registers `factory(code, message, retryable) -> Error`, called for every error.
#[wasm_bindgen(js_name = setErrorFactory)]
pub fn set_error_factory(factory: Function) {
    FACTORY.with(|f| *f.borrow_mut() = Some(factory));
}

/// The core's taxonomy as `[code, retryable]` pairs, so JavaScript never restates it.
#[wasm_bindgen(js_name = errorKinds)]
pub fn error_kinds() -> Vec<JsValue> {
    let pair = |k: &ErrorKind| JsValue::from(vec![JsValue::from_str(k.code()), JsValue::from_bool(k.retryable())]);
    ErrorKind::ALL.iter().map(pair).collect()
}

/// The kind whose code is `code`, if the core has one.
pub fn kind(code: &str) -> Option<ErrorKind> {
    ErrorKind::ALL.into_iter().find(|k| k.code() == code)
}

/// Converts an error for JavaScript: the registered factory's `LockError` subclass, or (before
/// registration) a plain `Error` carrying the same `code` and `retryable`.
pub fn to_js(e: &Error) -> JsValue {
    let code = JsValue::from_str(e.code());
    let message = JsValue::from_str(e.message());
    let retryable = JsValue::from_bool(e.retryable());
    let made = FACTORY.with(|f| f.borrow().as_ref().map(|f| f.call3(&JsValue::UNDEFINED, &code, &message, &retryable)));
    match made {
        Some(Ok(v)) => v,
        // A throwing factory is a bug in lib/errors.js; surface what it threw.
        Some(Err(thrown)) => thrown,
        None => {
            let err = js_sys::Error::new(e.message());
            let _ = Reflect::set(&err, &"code".into(), &code);
            let _ = Reflect::set(&err, &"retryable".into(), &retryable);
            err.into()
        }
    }
}

/// `Result` of a wasm export whose error is already a JavaScript `LockError`.
pub type JsResult<T> = Result<T, JsValue>;

/// Shorthand: a core result with its error converted by [`to_js`].
pub fn js<T>(r: lockgate_core::Result<T>) -> JsResult<T> {
    r.map_err(|e| to_js(&e))
}
