//! The old paths of the Redis engine (`engine::Engine`, `engine::EngineConfig`, ...), kept
//! until their callers (core/src/native, core/src/connect, bindings-node, lib.rs) name
//! `crate::redis` instead; then this file goes. The only file of the backend-agnostic layer
//! that names a backend, and it holds nothing but these re-exports
//! (`tests/engine_layering.rs` checks both).

pub use crate::redis::{Command, Engine, EngineConfig, ReplicaAcks, Request, RequestKind};
