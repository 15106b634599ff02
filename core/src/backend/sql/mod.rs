//! The SQL backend (PostgreSQL and MySQL/MariaDB; PROTOCOL.md §11): one row per holder or
//! waiter in `<prefix>entry`, ids as queue order and fencing tokens, expiry on the server's
//! clock, waiters woken by notifications (PostgreSQL) or doorbells (MySQL named locks).
//!
//! - [`statement`]: what a transport executes (batches of statements in the server's dialect)
//!   and what it hands back.
//! - [`request`]: the backend's structured operations, rendered to a dialect's statements and
//!   parsed back from their rows; the [`Schema`].
//! - [`target`]: a lock's `lock_key` and entry; [`recipe`]: who holds among a name's rows;
//!   [`watch`]: what the waiters' heartbeat reads of the rows they wait behind.
//! - [`config`], [`backend`]: the engine backend; `failure`: what a failed batch means.
//! - [`address`]: the `postgres://` and `mysql://` URLs.

pub mod address;
pub mod backend;
pub mod config;
pub mod data;
pub mod failure;
pub mod inspect;
pub mod list;
pub mod recipe;
pub mod request;
pub mod script;
pub mod spec;
pub mod statement;
pub mod target;
#[cfg(feature = "tokio")]
pub(crate) mod transport;
pub mod watch;

pub use address::SqlAddress;
pub use backend::{SqlBackend, SqlEngine};
pub use config::{SqlConfig, DEFAULT_NOTIFY_CHECK};
pub use request::{
    doorbell, is_missing_table, AcquireOp, EntryKind, EntryRow, Schema, SqlOp, SqlReply, SqlRequest, SqlResult, DEFAULT_TABLE_PREFIX,
};
pub use statement::{Batch, BatchResult, Conn, Dialect, Rows, SqlFailure, SqlNotice, Statement, Value, MAX_WAIT_CONNECTIONS};
pub use target::SqlTarget;
