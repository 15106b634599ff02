//! What a SQL transport executes: batches of parameterized statements, already written in the
//! server's dialect by the backend, and the rows they return. A transport (tokio-postgres and
//! mysql_async natively, `pg` and `mysql2` in Node) knows nothing of locks: it runs the
//! statements of a batch in order on the connection the batch names and hands back every
//! result. Which statements to run and what their rows mean is the backend's (see
//! `request.rs`: each structured operation renders to one [`Batch`] and parses its [`Rows`]).
//!
//! Rules every transport follows:
//! - A batch runs its statements in order, each in autocommit (no transaction wraps a batch
//!   unless its first statement is `BEGIN`), on the one connection [`Conn`] names; its reply is
//!   the first failing statement's failure. A transport may pipeline the statements of a batch
//!   that opens no transaction (send each before the previous one's reply arrives; the server
//!   still runs them in order, each with its own snapshot), so the statements after a failing
//!   one may or may not run: the backend renders such batches only where running the rest is
//!   harmless (a re-check after a failed insert). A batch that opens a transaction runs one
//!   statement at a time and stops at its first failure. A batch that opened a transaction
//!   (its first statement is `BEGIN`, e.g. `BEGIN ISOLATION LEVEL READ COMMITTED`) and fails
//!   before its `COMMIT` is rolled back by the transport (`ROLLBACK` on that connection) before
//!   the reply, so no lock taken in it outlives the batch and the next batch starts clean.
//! - A MySQL/MariaDB transport may send a batch of several statements as one multi-statement
//!   script rendered by [`crate::backend::sql::script::mysql_script`] (the parameters in place as
//!   literals; one round trip instead of one per statement). The server runs the script's
//!   statements one at a time, in order, and stops at the first that fails, so such a batch
//!   keeps the rules above (that failure is the reply; a transaction the batch opened is rolled
//!   back before it); its results are still one per statement, in order, converted as a bound
//!   statement's are.
//! - PostgreSQL integer parameters are written `$n::BIGINT` (they bind as 8-byte integers);
//!   `pg_notify` results are cast to text, so no column is of type `void`.
//! - Every batch gets exactly one reply. A transport never retries a batch on its own: a
//!   connection that drops with a batch on the wire fails it with
//!   [`SqlFailure::ConnectionLost`] (it may or may not have been applied).
//! - [`Conn::Main`] is one connection per client, the same for every batch while it lives:
//!   session state (MySQL named locks taken with `GET_LOCK`) lives on it. When it is replaced
//!   the transport pushes [`SqlNotice::Reconnected`] before the next reply on the new one.
//! - [`Conn::Listen`] (PostgreSQL) is the one connection that runs `LISTEN`; every
//!   notification arriving on it is pushed as [`SqlNotice::Notified`]. When it is replaced the
//!   transport pushes [`SqlNotice::Reconnected`] (the backend listens again).
//! - [`Conn::Refresh`] is one more connection, like Main but for the backend's refreshes of
//!   its waiters' rows only (no session state lives on it); opened by the first batch that
//!   names it. When it is replaced the transport pushes [`SqlNotice::Reconnected`] (nothing to
//!   redo).
//! - [`Conn::Wait`] (MySQL/MariaDB) runs a blocking wait (`GET_LOCK` with a timeout): the
//!   transport runs it on an idle wait connection of its own, opening one if none is idle; the
//!   backend never has more than [`MAX_WAIT_CONNECTIONS`] wait batches on the wire.
//! - Values are bound as parameters (`$1` in PostgreSQL, `?` in MySQL, as written in the
//!   statement); integers come back as [`Value::Int`], text as [`Value::Text`], `NULL` as
//!   [`Value::Null`]; any other column type is converted to text.

use std::fmt;

use crate::error::Error;

/// The SQL dialect the statements are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL (`postgres://`, `postgresql://`).
    Postgres,
    /// MySQL or MariaDB (`mysql://`, `mariadb://`).
    MySql,
}

/// The most wait batches ([`Conn::Wait`]) the backend has on the wire at once, so a client uses
/// at most this many wait connections besides its main one.
pub const MAX_WAIT_CONNECTIONS: usize = 4;

/// Which connection runs a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Conn {
    /// The client's one statement connection.
    Main,
    /// PostgreSQL's listening connection.
    Listen,
    /// An idle wait connection (MySQL/MariaDB blocking waits).
    Wait,
    /// The refresh connection: the batched refreshes of a client's waiters' rows, so they
    /// never queue behind the inserts and re-checks on Main (a waiter's row must not expire
    /// because its own client is busy).
    Refresh,
}

/// A parameter or column value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// An integer (`BIGINT` and narrower).
    Int(i64),
    /// Text (`VARCHAR`, `TEXT`; any other type a transport converts).
    Text(String),
}

impl Value {
    /// The integer, if this is one (text holding an integer counts: some drivers hand back
    /// `BIGINT` expressions as decimals or strings).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Text(t) => t.trim().split('.').next().and_then(|s| s.parse().ok()),
            Value::Null => None,
        }
    }

    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// One parameterized statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The statement, in the batch's dialect, with placeholders for `params`.
    pub sql: String,
    /// The values bound to the placeholders, in order.
    pub params: Vec<Value>,
}

/// Statements run in order on one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The connection that runs it.
    pub conn: Conn,
    /// The statements.
    pub statements: Vec<Statement>,
}

/// What one statement returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rows {
    /// Rows changed (`INSERT`, `UPDATE`, `DELETE`); 0 for a query.
    pub affected: u64,
    /// The rows returned, each a list of column values in select order.
    pub rows: Vec<Vec<Value>>,
}

/// Why a batch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlFailure {
    /// The connection dropped with the batch on the wire, or none could be opened: retryable;
    /// the batch may or may not have been applied.
    ConnectionLost(String),
    /// The server refused the statement: `code` is the SQLSTATE (PostgreSQL, e.g. `57014` for a
    /// statement timeout) or the MySQL error number as text (e.g. `1205` for a lock wait
    /// timeout); `message` is the server's text without any credential.
    Server {
        /// SQLSTATE or MySQL error number.
        code: String,
        /// The server's message.
        message: String,
    },
    /// Anything else (authentication, TLS, a reply that makes no sense), as lockgate's error.
    Other(Error),
}

impl fmt::Display for SqlFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlFailure::ConnectionLost(why) => write!(f, "connection lost: {why}"),
            SqlFailure::Server { code, message } => write!(f, "the database refused a statement ({code}): {message}"),
            SqlFailure::Other(e) => write!(f, "{e}"),
        }
    }
}

/// The reply to one batch: each statement's rows, in order.
pub type BatchResult = Result<Vec<Rows>, SqlFailure>;

/// What a transport pushes without being asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlNotice {
    /// A PostgreSQL notification arrived on the listening connection.
    Notified {
        /// The channel.
        channel: String,
        /// The payload.
        payload: String,
    },
    /// The connection was replaced (session state on the old one is gone: named locks,
    /// `LISTEN`s).
    Reconnected {
        /// Which connection.
        conn: Conn,
    },
}
