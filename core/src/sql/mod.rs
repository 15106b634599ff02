//! The SQL backend (PostgreSQL and MySQL/MariaDB; PROTOCOL.md §11).
//!
//! - [`statement`]: what a transport executes (batches of statements in the server's dialect)
//!   and what it hands back.
//! - [`request`]: the backend's structured operations, rendered to a dialect's statements and
//!   parsed back from their rows.

pub mod request;
pub mod statement;

pub use request::{
    doorbell, is_missing_table, AcquireOp, EntryKind, EntryRow, Schema, SqlOp, SqlReply, SqlRequest, SqlResult, DEFAULT_TABLE_PREFIX,
};
pub use statement::{Batch, BatchResult, Conn, Dialect, Rows, SqlFailure, SqlNotice, Statement, Value, MAX_WAIT_CONNECTIONS};
