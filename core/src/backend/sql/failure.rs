//! What a failed batch means: one error for each [`SqlFailure`] (by SQLSTATE on PostgreSQL, by
//! error number on MySQL/MariaDB), and from it an attempt's, a renewal's or a release's verdict,
//! in one place so every kind of call agrees on which failures are worth retrying.
//!
//! - A statement or lock timeout set on the server (by a DBA: `statement_timeout`,
//!   `lock_timeout`, `max_execution_time`, `max_statement_time`, `innodb_lock_wait_timeout`) is
//!   [`ErrorKind::Timeout`] — a wait that ran out, the server's rather than the caller's, said
//!   so in the message — and ends an acquire at once (retrying would hit the same limit until
//!   the caller's own wait ran out, hiding the cause); a renewal or release retries it.
//! - Serialization failures, deadlocks, a server shutting down or restarting and a lost
//!   connection are [`ErrorKind::Connection`]: retryable.
//! - Refused logins and missing privileges are [`ErrorKind::Authentication`].
//! - Anything else is [`ErrorKind::Protocol`] with the server's code and message.

use super::statement::SqlFailure;
use crate::engine::{Attempt, Renewal, Release};
use crate::error::{Error, ErrorKind};

/// What kind of failure a server code is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    /// A statement or lock timeout configured on the server.
    ServerTimeout,
    /// Worth retrying: serialization, deadlock, shutdown, connection trouble.
    Retryable,
    /// A refused login or a missing privilege.
    Refused,
    /// Anything else.
    Other,
}

/// The class of a SQLSTATE or MySQL error number.
pub fn classify(code: &str) -> FailureClass {
    match code {
        // PostgreSQL: query_canceled (statement_timeout), lock_not_available (lock_timeout),
        // idle_in_transaction_session_timeout. MySQL/MariaDB: lock wait timeout,
        // max_execution_time exceeded, query interrupted, MariaDB's max_statement_time.
        "57014" | "55P03" | "25P03" | "1205" | "3024" | "1317" | "1969" => FailureClass::ServerTimeout,
        // Serialization failure, deadlock, admin/crash shutdown, cannot connect now, too many
        // connections, read-only (a failover in progress); MySQL deadlock, server shutdown,
        // lost connection, gone away, too many connections, killed connection.
        "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300" | "25006" | "1213" | "1053" | "2013" | "2006" | "1040"
        | "1927" | "1290" => FailureClass::Retryable,
        c if c.starts_with("08") => FailureClass::Retryable,
        // PostgreSQL: invalid authorization, invalid password, insufficient privilege. MySQL:
        // access denied (login, database, table, command).
        "28000" | "28P01" | "42501" | "1045" | "1044" | "1142" | "1143" | "1227" => FailureClass::Refused,
        _ => FailureClass::Other,
    }
}

/// The error a failed batch stands for.
pub fn failure_error(f: SqlFailure) -> Error {
    match f {
        SqlFailure::ConnectionLost(why) => Error::new(ErrorKind::Connection, format!("database connection lost: {why}")),
        SqlFailure::Server { code, message } => match classify(&code) {
            FailureClass::ServerTimeout => Error::new(
                ErrorKind::Timeout,
                format!("the database cancelled a statement after a timeout set on the server ({code}): {message}"),
            ),
            FailureClass::Retryable => Error::new(ErrorKind::Connection, format!("the database could not serve the statement now ({code}): {message}")),
            FailureClass::Refused => Error::new(ErrorKind::Authentication, format!("the database refused the login or a privilege ({code}): {message}")),
            FailureClass::Other => Error::protocol(format!("the database refused a statement ({code}): {message}")),
        },
        SqlFailure::Other(e) => e,
    }
}

/// Whether the failure is a server-set timeout.
fn server_timeout(f: &SqlFailure) -> bool {
    matches!(f, SqlFailure::Server { code, .. } if classify(code) == FailureClass::ServerTimeout)
}

/// A retryable attempt failure keeps its row (a retry's insert finds it), not undone.
pub fn attempt_transient(error: Error) -> Attempt {
    let why = Some(error.message().to_string());
    Attempt::Transient { error, why, undo: false }
}

/// An attempt that failed with `f`.
pub fn attempt_failure(f: SqlFailure) -> Attempt {
    let timeout = server_timeout(&f);
    let error = failure_error(f);
    if error.retryable() && !timeout {
        attempt_transient(error)
    } else {
        Attempt::Failed { error, undo: true }
    }
}

/// A renewal or extend that failed with `f`: it may pass (the lease is not lost yet), or not.
pub fn renewal_failure(f: SqlFailure) -> Renewal {
    let error = failure_error(f);
    if error.retryable() {
        Renewal::Transient(error)
    } else {
        Renewal::Failed(error)
    }
}

/// A release that failed with `f`: whether its row went is unknown.
pub fn release_failure(f: SqlFailure) -> Release {
    let error = failure_error(f);
    let retry = error.retryable();
    Release::Unconfirmed { error, retry }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str) -> SqlFailure {
        SqlFailure::Server { code: code.into(), message: "m".into() }
    }

    #[test]
    fn codes_map_to_kinds_and_verdicts() {
        for code in ["57014", "55P03", "1205", "3024", "1317", "1969"] {
            let e = failure_error(server(code));
            assert_eq!(e.kind(), ErrorKind::Timeout, "{code}");
            assert!(e.message().contains("timeout set on the server"), "{code}");
            assert!(matches!(attempt_failure(server(code)), Attempt::Failed { undo: true, .. }), "{code}");
            assert!(matches!(renewal_failure(server(code)), Renewal::Transient(_)), "{code}");
        }
        for code in ["40001", "40P01", "57P01", "57P03", "08006", "1213", "1053", "2013"] {
            assert_eq!(failure_error(server(code)).kind(), ErrorKind::Connection, "{code}");
            assert!(matches!(attempt_failure(server(code)), Attempt::Transient { undo: false, .. }), "{code}");
        }
        for code in ["28P01", "42501", "1045"] {
            assert_eq!(failure_error(server(code)).kind(), ErrorKind::Authentication, "{code}");
        }
        assert_eq!(failure_error(server("42601")).kind(), ErrorKind::Protocol);
        assert!(matches!(attempt_failure(SqlFailure::ConnectionLost("x".into())), Attempt::Transient { .. }));
        assert!(matches!(release_failure(SqlFailure::ConnectionLost("x".into())), Release::Unconfirmed { retry: true, .. }));
        assert!(matches!(release_failure(server("42601")), Release::Unconfirmed { retry: false, .. }));
    }
}
