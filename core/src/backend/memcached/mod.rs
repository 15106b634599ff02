//! The memcached backend (PROTOCOL.md §13): the cache lock of the source documents, honest about
//! what a cache can promise. A lock is one item whose value is its holder's owner token:
//! acquire is `add` with the lease as expiry (whole seconds, rounded up, plus memcached's clock
//! slack); renewal, extend and release read the item with `gets` and write it back with `cas`
//! only while it still holds the caller's token, so they never resurrect an item that expired or
//! was evicted (a release is a `cas` to an already-expired time: a conditional delete). A stored
//! `add` is a grant only once the server's `stats` shows it had been up the deployment's
//! `max_lease` (the delayed-restart rule: a restarted server has forgotten leases that may still
//! be counted valid).
//!
//! What it does not offer: memcached pushes nothing, so waiters poll with capped exponential
//! backoff and jitter ([`backend::POLL_CAP`]: no FIFO order, no starvation guarantee); it
//! evicts and restarts empty, so nothing it stores is monotonic and grants carry no fencing
//! token; a semaphore, read-write lock or election would need several items kept consistent
//! under eviction, which memcached cannot, so they are refused with `UNSUPPORTED`.
//!
//! - [`address`]: the URL; [`key`]: an item's key and the server it lives on;
//! - [`request`]: the four commands every transport performs and their answers;
//! - [`backend`]: the engine's calls on that wire; [`data`]: the same as plain data for Node.

pub mod address;
pub mod backend;
pub mod data;
pub mod key;
pub mod request;
pub mod spec;
#[cfg(feature = "tokio")]
pub(crate) mod transport;

pub use address::MemcachedAddress;
pub use backend::{MemcachedBackend, MemcachedConfig, MemcachedEngine, MemcachedTarget};
pub use request::{McAnswer, McCommand, McReply, McRequest};
#[cfg(test)]
mod tests;
