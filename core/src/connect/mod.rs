//! Connecting, as data: the registry of backends ([`Backend`] names them; each backend's
//! [`Spec`], in its own folder, says its schemes, URL grammar, capabilities and rules), the URL a
//! client connects to ([`Target`]), the [`ClientOptions`] with the defaults and rules every
//! backend shares, the generic setter the bindings call by their own option names
//! ([`ClientOptions::set`], [`Spelling`]), and a lock's options with the backend's defaults
//! ([`ClientOptions::lock_options`]). Pure and wasm-safe (no I/O, no tokio), so every binding —
//! the native driver behind Python and the JVM, and the Node binding's wasm — accepts, defaults
//! and refuses exactly the same things with the same messages, worded in each binding's names
//! and unit.

mod backend;
pub mod failure;
pub(crate) mod options;
pub(crate) mod registry;
mod setter;
pub mod spec;
mod spelling;
mod target;

pub use self::backend::{Backend, Kind};
pub use self::options::{replica_acks, ClientOptions, DEFAULT_REPLICA_ACK_TIMEOUT, DEFAULT_TIMEOUT, MIN_REPLICA_ACK_TIMEOUT};
pub use self::registry::{connect_data, lock_options_for_backend};
pub use self::options::holds_for;
pub use self::setter::OptionValue;
pub use self::options::LeaseBound;
pub use self::spec::Spec;
pub use self::spelling::{ClientOption, Spelling};
pub use self::target::{Address, Target};
// The Redis and Redlock URL forms, where the bindings have always found them.
#[cfg(feature = "redis")]
pub use crate::backend::redis::url::{Endpoint, RedisUrl, DEFAULT_PORT};
#[cfg(feature = "redlock")]
pub use crate::backend::redlock::address::{redlock_url, Masters};
