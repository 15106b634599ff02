//! Connecting, as data: which backend a URL's scheme selects ([`Backend`], [`Target`]), the
//! one [`ClientOptions`] of every backend with its defaults and rules, the generic setter the
//! bindings call by their own option names ([`ClientOptions::set`], [`Spelling`]), and a lock's
//! options with the backend's defaults ([`ClientOptions::lock_options`]). Pure and wasm-safe
//! (no I/O, no tokio), so every binding — the native driver behind Python and the JVM, and the
//! Node binding's wasm — accepts, defaults and refuses exactly the same things with the same
//! messages, worded in each binding's names and unit.

mod backend;
pub mod failure;
mod options;
mod setter;
mod spelling;
mod target;
mod url;

pub use self::backend::Backend;
pub use self::options::{
    lock_options_for_backend, replica_acks, ClientOptions, Masters, DEFAULT_REPLICA_ACK_TIMEOUT, DEFAULT_TIMEOUT,
    MIN_REPLICA_ACK_TIMEOUT,
};
#[cfg(feature = "tokio")]
#[allow(unused_imports)] // the native client moves to lock_options_for_backend (issue 15)
pub(crate) use self::options::lock_options_for;
pub(crate) use self::url::percent_decode;
pub use self::setter::OptionValue;
pub use self::spelling::{ClientOption, Spelling};
pub use self::target::{redlock_url, Target};
pub use self::url::{Endpoint, RedisUrl, DEFAULT_PORT};
