//! [`Data`]: the plain value a type-erased engine's requests, replies and pushed notices are made
//! of, so a binding converts one value type to its language once for every backend (the Node
//! binding: to and from JavaScript values) instead of each backend's typed requests.

use std::fmt;

/// A plain value: what JSON holds, plus byte strings and 64-bit integers.
#[derive(Clone, PartialEq, Default)]
pub enum Data {
    /// Nothing (`null`).
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer (ids, versions, zxids, milliseconds).
    Int(i64),
    /// A number that need not be whole (milliseconds with a fraction; `Infinity` for a wait
    /// without limit), for values a binding shows its caller.
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// A byte string.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Data>),
    /// A map with string keys, in insertion order.
    Map(Vec<(String, Data)>),
}

impl Data {
    /// A map of `entries`.
    pub fn map<'a>(entries: impl IntoIterator<Item = (&'a str, Data)>) -> Data {
        Data::Map(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The value under `key` of a map (`None` if absent or not a map). A `Null` value counts
    /// as absent, as `undefined` and `null` do in JavaScript.
    pub fn get(&self, key: &str) -> Option<&Data> {
        match self {
            Data::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| !v.is_null()),
            _ => None,
        }
    }

    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Data::Null)
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Data::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Data::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Data::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The bytes of a byte string, or of a string's UTF-8.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Data::Bytes(b) => Some(b),
            Data::Str(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The items, if this is a list.
    pub fn as_list(&self) -> Option<&[Data]> {
        match self {
            Data::List(items) => Some(items),
            _ => None,
        }
    }

    /// The string under `key`, or a message naming what is wrong (`what`: the value's name).
    pub fn str_field(&self, what: &str, key: &str) -> Result<&str, String> {
        self.get(key).and_then(Data::as_str).ok_or_else(|| missing(what, key, "a string", self.get(key)))
    }

    /// The integer under `key`, or a message naming what is wrong.
    pub fn int_field(&self, what: &str, key: &str) -> Result<i64, String> {
        self.get(key).and_then(Data::as_int).ok_or_else(|| missing(what, key, "an integer", self.get(key)))
    }

    /// The bytes under `key` (a byte string or a string), or a message naming what is wrong.
    pub fn bytes_field(&self, what: &str, key: &str) -> Result<&[u8], String> {
        self.get(key).and_then(Data::as_bytes).ok_or_else(|| missing(what, key, "bytes", self.get(key)))
    }

    /// As a JSON value (see the `Serialize` impl for the mapping).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Null => "null",
            Data::Bool(_) => "a boolean",
            Data::Int(_) => "an integer",
            Data::Float(_) => "a number",
            Data::Str(_) => "a string",
            Data::Bytes(_) => "bytes",
            Data::List(_) => "a list",
            Data::Map(_) => "a map",
        }
    }
}

fn missing(what: &str, key: &str, expected: &str, got: Option<&Data>) -> String {
    match got {
        None => format!("{what} has no {key}"),
        Some(v) => format!("{what}'s {key} must be {expected}, got {}", v.kind()),
    }
}

/// Byte strings show their length only: request data carries lock owners' data, which logs
/// need not repeat.
impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Data::Null => f.write_str("null"),
            Data::Bool(b) => write!(f, "{b}"),
            Data::Int(n) => write!(f, "{n}"),
            Data::Float(n) => write!(f, "{n}"),
            Data::Str(s) => write!(f, "{s:?}"),
            Data::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            Data::List(items) => f.debug_list().entries(items).finish(),
            Data::Map(entries) => f.debug_map().entries(entries.iter().map(|(k, v)| (k, v))).finish(),
        }
    }
}

/// JSON's form: a map's entries in their order, bytes as their UTF-8 (lossily), a non-finite
/// number (which JSON lacks) as `null`.
impl serde::Serialize for Data {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Data::Null => s.serialize_unit(),
            Data::Bool(b) => s.serialize_bool(*b),
            Data::Int(n) => s.serialize_i64(*n),
            Data::Float(n) if n.is_finite() => s.serialize_f64(*n),
            Data::Float(_) => s.serialize_unit(),
            Data::Str(text) => s.serialize_str(text),
            Data::Bytes(b) => s.serialize_str(&String::from_utf8_lossy(b)),
            Data::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Data::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl From<bool> for Data {
    fn from(b: bool) -> Data {
        Data::Bool(b)
    }
}

impl From<i64> for Data {
    fn from(n: i64) -> Data {
        Data::Int(n)
    }
}

impl From<i32> for Data {
    fn from(n: i32) -> Data {
        Data::Int(n.into())
    }
}

impl From<u64> for Data {
    /// Values above `i64::MAX` saturate (ids and milliseconds never get there).
    fn from(n: u64) -> Data {
        Data::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Data {
    fn from(n: f64) -> Data {
        Data::Float(n)
    }
}

impl From<&str> for Data {
    fn from(s: &str) -> Data {
        Data::Str(s.to_string())
    }
}

impl From<String> for Data {
    fn from(s: String) -> Data {
        Data::Str(s)
    }
}

impl From<Vec<u8>> for Data {
    fn from(b: Vec<u8>) -> Data {
        Data::Bytes(b)
    }
}

impl<T: Into<Data>> From<Option<T>> for Data {
    fn from(v: Option<T>) -> Data {
        v.map_or(Data::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_say_what_is_wrong() {
        let d = Data::map([("path", "/a".into()), ("version", Data::Null), ("n", "x".into())]);
        assert_eq!(d.str_field("the reply", "path"), Ok("/a"));
        assert_eq!(d.get("version"), None, "null counts as absent");
        assert_eq!(d.int_field("the reply", "version").unwrap_err(), "the reply has no version");
        assert_eq!(d.int_field("the reply", "n").unwrap_err(), "the reply's n must be an integer, got a string");
        assert_eq!(d.bytes_field("the reply", "path"), Ok(&b"/a"[..]));
        assert_eq!(format!("{:?}", Data::Bytes(b"secret".to_vec())), "<6 bytes>");
    }
}
