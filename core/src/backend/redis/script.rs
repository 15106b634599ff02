//! A Lua script of the wire contract and the helpers every script text is built from.

use std::sync::OnceLock;

/// A script with its SHA-1, sent with EVALSHA and re-sent with EVAL on NOSCRIPT.
#[derive(Debug)]
pub struct Script {
    /// Human name used in errors and PROTOCOL.md.
    pub name: &'static str,
    /// The Lua source.
    pub source: &'static str,
    digest: OnceLock<String>,
}

impl Script {
    pub(crate) const fn new(name: &'static str, source: &'static str) -> Self {
        Script {
            name,
            source,
            digest: OnceLock::new(),
        }
    }

    /// Lowercase hex SHA-1 of the source, as EVALSHA expects (computed once).
    pub fn sha1(&self) -> &str {
        self.digest
            .get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }
}

/// The server clock and number formatting, prepended to every script that needs them (each
/// script stays self-contained; the bytes, hence the digests, are those of PROTOCOL.md).
macro_rules! lua_clock {
    () => {
        r#"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
"#
    };
}
pub(crate) use lua_clock;
