//! The core's plain [`Data`] as JavaScript values and back, once for every backend whose engine
//! speaks it (`lockgate_core::data`): requests and connect plans out, replies and pushed
//! notices in. Integers beyond 2^53 travel as `BigInt`s (ZooKeeper's zxids and session ids).

use js_sys::{Array, Object, Reflect, Uint8Array};
use lockgate_core::data::Data;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::js::{describe, StrCache};

/// The largest integer a JS number holds exactly.
const MAX_SAFE: i64 = 9_007_199_254_740_991;

/// How deeply a value may nest (replies are two or three levels deep).
const MAX_DEPTH: usize = 16;

/// `Data` as a JavaScript value: `null`, a boolean, a number (a `BigInt` beyond 2^53), a
/// string (short ones from `strings`), a `Uint8Array`, an array or a plain object.
pub fn to_js(d: &Data, strings: &mut StrCache) -> JsValue {
    match d {
        Data::Null => JsValue::NULL,
        Data::Bool(b) => JsValue::from_bool(*b),
        Data::Int(n) if (-MAX_SAFE..=MAX_SAFE).contains(n) => JsValue::from_f64(*n as f64),
        Data::Int(n) => JsValue::from(*n),
        Data::Float(n) => JsValue::from_f64(*n),
        Data::Str(s) => strings.str(s),
        Data::Bytes(b) => Uint8Array::from(b.as_slice()).into(),
        // One crossing for the whole array, where `Array::push` is one per item.
        Data::List(items) => JsValue::from(items.iter().map(|x| to_js(x, strings)).collect::<Vec<_>>()),
        Data::Map(entries) => {
            let o = Object::new();
            for (k, v) in entries {
                let _ = Reflect::set(&o, &strings.str(k), &to_js(v, strings));
            }
            o.into()
        }
    }
}

/// A JavaScript value as `Data` (`undefined` is `null`; a number must be an integer within
/// 2^53, a `BigInt` within 64 bits; objects by their own enumerable keys), or what is wrong;
/// `depth`: how deeply `v` is nested (0 at the top).
pub fn from_js(v: &JsValue, depth: usize) -> Result<Data, String> {
    if v.is_undefined() || v.is_null() {
        return Ok(Data::Null);
    }
    if let Some(b) = v.as_bool() {
        return Ok(Data::Bool(b));
    }
    if let Some(n) = v.as_f64() {
        return if n.fract() == 0.0 && n.abs() <= MAX_SAFE as f64 {
            Ok(Data::Int(n as i64))
        } else {
            Err(format!("the number {n} is not an integer below 2^53"))
        };
    }
    if let Some(s) = v.as_string() {
        return Ok(Data::Str(s));
    }
    if v.is_bigint() {
        return i64::try_from(v.clone()).map(Data::Int).map_err(|_| "a BigInt beyond 64 bits".to_string());
    }
    if let Some(b) = v.dyn_ref::<Uint8Array>() {
        return Ok(Data::Bytes(b.to_vec()));
    }
    if depth >= MAX_DEPTH {
        return Err("a value nested too deeply".into());
    }
    if let Some(a) = v.dyn_ref::<Array>() {
        return a.iter().map(|x| from_js(&x, depth + 1)).collect::<Result<_, _>>().map(Data::List);
    }
    if v.is_object() && !v.is_function() {
        let obj: &Object = v.unchecked_ref();
        let mut entries = Vec::new();
        for key in Object::keys(obj).iter() {
            let value = Reflect::get(obj, &key).unwrap_or(JsValue::UNDEFINED);
            entries.push((key.as_string().unwrap_or_default(), from_js(&value, depth + 1)?));
        }
        return Ok(Data::Map(entries));
    }
    Err(format!("{} is not plain data", describe(v)))
}
