//! The Redis backends: the wire contract of PROTOCOL.md §1–§7 (single instance, Cluster,
//! replica-acknowledged mode) as a [`Backend`](crate::engine::Backend) of the lock engine, and
//! the scripts each Redlock master runs (PROTOCOL.md §8; the Redlock backend itself is
//! `crate::backend::redlock`).
//!
//! - [`backend`]: [`RedisBackend`], its configuration and [`Engine`] (the engine over it);
//! - [`request`]: what the driver is asked to do (pipelines, a subscription);
//! - [`keys`], [`target`]: the key layout and what one lock is on the wire;
//! - [`mutex`], [`holders`], [`script`]: the Lua scripts (each Redlock master's are
//!   `crate::backend::redlock::scripts`);
//! - [`reply`]: reply shapes and their parsing;
//! - [`resp`]: the RESP2 byte codec, for drivers that own their socket;
//! - [`data`], [`wire`]: requests, replies and notices as plain data, and as the bytes of a
//!   binding's own socket (the Node binding).
//!
//! The engine half (backend, request, reply, scripts) is in every build: the client options
//! every backend shares carry its `ReplicaAcks`. The `redis` feature adds the URL, the
//! registry spec, the RESP codec, the data form and the native transport.

#[cfg(feature = "redis")]
pub mod address;
pub mod backend;
#[cfg(feature = "redis")]
pub mod data;
pub mod holders;
pub mod inspect;
pub mod keys;
pub mod list;
pub mod mutex;
pub mod reply;
pub mod request;
#[cfg(feature = "redis")]
pub mod resp;
pub mod script;
#[cfg(feature = "redis")]
pub mod spec;
pub mod target;
#[cfg(feature = "redis")]
pub mod url;
#[cfg(feature = "redis")]
pub mod wire;
#[cfg(all(feature = "tokio", feature = "redis"))]
// Some of the links' reconnect hooks serve Redlock's transport only.
#[cfg_attr(not(feature = "redlock"), allow(dead_code))]
pub(crate) mod transport;

pub use backend::{Engine, EngineConfig, RedisBackend, RedisConfig, ReplicaAcks};
pub use request::{Command, Request, RequestKind};
pub use script::Script;
pub use target::Target;

/// Every script of the protocol (mutex and shared-holder families), for documentation and
/// preloading.
pub fn all() -> [&'static Script; 9] {
    [
        &mutex::ACQUIRE,
        &mutex::RELEASE,
        &mutex::EXTEND,
        &holders::ACQUIRE,
        &holders::RELEASE,
        &holders::EXTEND,
        &holders::OBSERVE,
        &mutex::INSPECT,
        &holders::INSPECT,
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_hex_sha1() {
        for s in super::all() {
            let d = s.sha1();
            assert_eq!(d.len(), 40);
            assert!(d.chars().all(|c| c.is_ascii_hexdigit()));
        }
    }
}

#[cfg(test)]
mod protocol_doc {
    // PROTOCOL.md lists each script's digest: a script change without a protocol version bump
    // (and a doc update) fails here.
    #[test]
    fn protocol_md_lists_every_digest() {
        let doc = include_str!("../../../../PROTOCOL.md");
        let missing: Vec<String> = super::all()
            .iter()
            .filter(|s| !doc.contains(s.sha1()))
            .map(|s| format!("{} {}", s.name, s.sha1()))
            .collect();
        assert!(missing.is_empty(), "PROTOCOL.md lacks these digests: {missing:?}");
    }
}
