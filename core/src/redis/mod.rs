//! The Redis wire contract (PROTOCOL.md): key layout, Lua scripts and reply shapes.

pub mod keys;
pub mod redlock;
pub mod reply;
pub mod scripts;
pub mod shared;
