//! Plain conversions between JavaScript values and the engine's: options in, events out. No lock
//! logic lives here (and no backend: requests, replies and notices are `data.rs`'s).

use js_sys::{Array, Object, Reflect};
use lockgate_core::connect::OptionValue;
use lockgate_core::data::EventFields;
use lockgate_core::engine::Done;
use lockgate_core::time::Instant;
use lockgate_core::{Error, Event, Result};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::errors;
use crate::js::{describe, StrCache};

/// A driver timestamp (`performance.now()`, ms) as an engine instant.
pub fn instant(ms: f64) -> Instant {
    Instant::from_millis_f64(ms)
}

/// An engine instant as `performance.now()` milliseconds.
pub fn millis(i: Instant) -> f64 {
    i.since_origin().as_secs_f64() * 1000.0
}

/// An id the engine minted, as a JS number (ids count up from 1 and stay far below 2^53).
pub fn id_to_js(id: u64) -> f64 {
    id as f64
}

/// A JS number back to an id; anything that is not a non-negative integer maps to an id the
/// engine never issued (0), which every entry point ignores.
pub fn id_from_js(id: f64) -> u64 {
    if id.is_finite() && id >= 1.0 && id.fract() == 0.0 && id <= 9_007_199_254_740_991.0 {
        id as u64
    } else {
        0
    }
}

/// A lock name: a well-formed string (lone surrogates would collide after UTF-8 conversion).
pub fn name(v: &JsValue) -> Result<String> {
    let s = well_formed("lock name", v)?;
    lockgate_core::options::validate_name(&s)?;
    Ok(s)
}

/// A JS value as the core's [`OptionValue`] (`undefined` and `null` are `None`); the core checks
/// its type and range under its key.
pub fn value(v: &JsValue) -> OptionValue {
    if v.is_undefined() || v.is_null() {
        OptionValue::None
    } else if let Some(b) = v.as_bool() {
        OptionValue::Bool(b)
    } else if let Some(n) = v.as_f64() {
        OptionValue::Number(n)
    } else if let Some(s) = v.as_string() {
        OptionValue::Str(s)
    } else if let Some(b) = v.dyn_ref::<js_sys::Uint8Array>() {
        OptionValue::Bytes(b.to_vec())
    } else {
        OptionValue::Other(describe(v))
    }
}

/// A fencing token as the core's [`OptionValue`]: a `BigInt` within 64 bits is an `Int` (only a
/// token may be one).
pub fn token(v: &JsValue) -> OptionValue {
    match v.is_bigint() {
        true => i64::try_from(v.clone()).map_or_else(|_| OptionValue::Other("a BigInt beyond 64 bits".into()), OptionValue::Int),
        false => value(v),
    }
}

/// The own enumerable keys of an options object with their values, for the core to check.
pub fn given(what: &str, v: &JsValue) -> Result<Vec<(String, OptionValue)>> {
    Ok(option_entries(what, v, None)?.into_iter().map(|(k, v)| (k, value(&v))).collect())
}

/// `v` as a string, which must be well-formed Unicode (`what` names it in errors).
fn well_formed(what: &str, v: &JsValue) -> Result<String> {
    let Some(js) = v.dyn_ref::<js_sys::JsString>() else {
        return Err(Error::invalid(format!("{what} must be a string, got {}", describe(v))));
    };
    if !js.is_valid_utf16() {
        return Err(Error::invalid(format!("{what} must be well-formed Unicode (it has a lone surrogate)")));
    }
    Ok(js.into())
}

/// Reads the own enumerable keys of an options object, rejecting unknown ones (a misspelt option
/// silently falling back to a default would be worse than an error); `known: None` leaves that
/// to the caller (the core's setter knows the client options).
pub(crate) fn option_entries(what: &str, v: &JsValue, known: Option<&[&str]>) -> Result<Vec<(String, JsValue)>> {
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new());
    }
    if !v.is_object() || Array::is_array(v) || v.is_function() {
        return Err(Error::invalid(format!("{what} must be an object, got {}", describe(v))));
    }
    let obj: &Object = v.unchecked_ref();
    let mut out = Vec::new();
    for key in Object::keys(obj).iter() {
        let key = key.as_string().unwrap_or_default();
        if known.is_some_and(|known| !known.contains(&key.as_str())) {
            return Err(Error::invalid(format!(
                "unknown {what} key {key:?}; expected one of {}",
                known.unwrap_or_default().join(", ")
            )));
        }
        let value = Reflect::get(obj, &JsValue::from_str(&key)).unwrap_or(JsValue::UNDEFINED);
        if !value.is_undefined() {
            out.push((key, value));
        }
    }
    Ok(out)
}

/// The value a leader publishes: a well-formed string (the core checks its length).
pub fn leader_value(v: &JsValue) -> Result<String> {
    well_formed("the leader value", v)
}

#[wasm_bindgen]
extern "C" {
    /// The factory the JavaScript driver builds its events with: one call builds one object
    /// (cheaper than setting its properties one by one across the boundary).
    pub type Shapes;

    /// `{ kind, op, lease, fencingToken, validUntil, wasHeld, error, data, waiter }` (unused
    /// fields `undefined`).
    #[wasm_bindgen(method)]
    #[allow(clippy::too_many_arguments)]
    fn event(
        this: &Shapes,
        kind: &JsValue,
        op: &JsValue,
        lease: &JsValue,
        fencing_token: &JsValue,
        valid_until: &JsValue,
        was_held: &JsValue,
        error: &JsValue,
        data: &JsValue,
        waiter: &JsValue,
    ) -> JsValue;
}

/// An engine's event as one flat object of the core's fields (`lockgate_core::data::EventFields`:
/// its `kind` and what it carries; `fencingToken` a BigInt); `undefined` for telemetry, which
/// travels apart.
pub fn event_to_js(ev: &Event<Done>, waiter: &JsValue, shapes: &Shapes, cache: &mut StrCache) -> JsValue {
    let Some(f) = EventFields::of(ev) else { return JsValue::UNDEFINED };
    let id = |x: Option<u64>| x.map_or(JsValue::UNDEFINED, |x| JsValue::from_f64(id_to_js(x)));
    shapes.event(
        &cache.str(f.kind),
        &id(f.op.map(|o| o.0)),
        &id(f.lease.map(|l| l.0)),
        &f.fencing_token.map_or(JsValue::UNDEFINED, JsValue::from),
        &f.valid_until.map_or(JsValue::UNDEFINED, |t| JsValue::from_f64(millis(t))),
        &f.was_held.map_or(JsValue::UNDEFINED, JsValue::from_bool),
        &f.error.map_or(JsValue::UNDEFINED, errors::to_js),
        &f.data.map_or(JsValue::UNDEFINED, |d| crate::data::to_js(&d, cache)),
        waiter,
    )
}

/// The message of what a transport threw (an `Error`, else the value described).
pub fn error_message(err: &JsValue) -> String {
    if let Some(e) = err.dyn_ref::<js_sys::Error>() {
        return e.message().into();
    }
    err.as_string().unwrap_or_else(|| format!("non-Error value thrown ({})", describe(err)))
}
