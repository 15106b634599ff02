//! Connecting, as data: the Redis URL grammar and the client and Redlock options with their
//! defaults and rules. Pure and wasm-safe (no I/O, no tokio), so every binding — the native
//! driver behind Python and the JVM, and the Node binding's wasm — accepts, defaults and
//! refuses exactly the same things with the same messages (worded in each binding's names and
//! unit, see [`Spelling`]).

mod options;
mod url;

pub use self::options::{
    redlock_lock_options, replica_acks, ClientOptions, Masters, RedlockOptions, Spelling, DEFAULT_REPLICA_ACK_TIMEOUT,
    DEFAULT_TIMEOUT, MIN_REPLICA_ACK_TIMEOUT,
};
pub use self::url::{Endpoint, RedisUrl, DEFAULT_PORT};
