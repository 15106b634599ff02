//! The SQL backend (PostgreSQL and MySQL/MariaDB; PROTOCOL.md §11).
//!
//! - [`statement`]: what a transport executes (batches of statements in the server's dialect)
//!   and what it hands back.

pub mod statement;

pub use statement::{Batch, BatchResult, Conn, Dialect, Rows, SqlFailure, SqlNotice, Statement, Value, MAX_WAIT_CONNECTIONS};
