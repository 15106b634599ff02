//! JavaScript values the other modules share, none of them about locks: a value described for
//! an error message, and the cache of short strings sent to JavaScript again and again.

use std::collections::HashMap;

use wasm_bindgen::prelude::*;

/// `v` described for an error message: its type, or a string's first 40 characters.
pub fn describe(v: &JsValue) -> String {
    if v.is_null() {
        "null".into()
    } else if let Some(s) = v.as_string() {
        let s: String = s.chars().take(40).collect();
        format!("the string {s:?}")
    } else {
        v.js_typeof().as_string().unwrap_or_else(|| "a value".into())
    }
}

/// JavaScript strings for the short strings the engine sends again and again (event kinds, map
/// keys, command names, script digests, keys, tokens between acquire and release): each is
/// decoded once, where a string crossing into JavaScript is otherwise decoded every time.
#[derive(Default)]
pub struct StrCache {
    map: HashMap<Box<str>, JsValue>,
}

impl StrCache {
    const MAX_ENTRIES: usize = 1024;
    /// Longer strings are rarely sent twice.
    const MAX_LEN: usize = 64;

    /// `s` as a JavaScript string.
    pub fn str(&mut self, s: &str) -> JsValue {
        if s.len() > Self::MAX_LEN {
            return JsValue::from_str(s);
        }
        if let Some(v) = self.map.get(s) {
            return v.clone();
        }
        if self.map.len() >= Self::MAX_ENTRIES {
            self.map.clear();
        }
        let v = JsValue::from_str(s);
        self.map.insert(s.into(), v.clone());
        v
    }
}
