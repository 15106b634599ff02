//! The SQL backend's batches, their results and the transport's notices
//! ([`crate::sql::statement`]) as [`Data`], and what a transport opens, so a transport in another
//! language (the Node binding's `lib/transport/sql.js` on `pg` and `mysql2`) runs them without a
//! rule of its own. The engine's structured operations are rendered to batches here (with the
//! client's schema) and their rows parsed here, as the native transport does around its
//! execution: the transport only ever sees SQL text, parameters and rows. The forms:
//!
//! - request: `{ id, conn: 'main' | 'listen' | 'wait', statements: [{ sql, params: [null |
//!   integer | string] }], timeoutMs }` (`timeoutMs`: how long the batch may go unanswered
//!   before the transport fails it as connectionLost and drops its connection: the response
//!   timeout, plus the wait a wait batch asks the server for).
//! - reply: `{ reply: 'rows', results: [{ affected, rows: [[null | integer | string]] }] }`
//!   (one result per statement, in order); or a failure `{ failure, code?, message? }` with
//!   `failure` one of `connectionLost` (may have been applied), `server` (`code`: the SQLSTATE
//!   or the MySQL error number as text), `other` (`code`: the lockgate error code, `PROTOCOL`
//!   if absent).
//! - notice: `{ notice: 'notified', channel, payload }` (a PostgreSQL notification on the
//!   listening connection) or `{ notice: 'reconnected', conn }` (that connection was replaced).
//!
//! What a transport must do with a batch (in order, autocommit, stop at the first failure, one
//! reply, nothing retried) is [`crate::sql::statement`]'s contract.

use super::Data;
use crate::error::{Error, ErrorKind};
use crate::sql::{Batch, BatchResult, Conn, Rows, SqlFailure, SqlNotice, Statement, Value};
use crate::time::Duration;

/// Most items a list in a reply may hold before it counts as nonsense (a batch has a few
/// statements; a lock's rows are its holders and waiters).
const MAX_ITEMS: usize = 1 << 20;

fn conn_name(conn: Conn) -> &'static str {
    match conn {
        Conn::Main => "main",
        Conn::Listen => "listen",
        Conn::Wait => "wait",
    }
}

fn value_data(v: &Value) -> Data {
    match v {
        Value::Null => Data::Null,
        Value::Int(i) => Data::Int(*i),
        Value::Text(t) => Data::from(t.as_str()),
    }
}

/// Batch `batch` of request `id` as data, `limit` its time limit.
pub fn batch_data(id: u64, batch: &Batch, limit: Duration) -> Data {
    let statements = batch.statements.iter().map(|s: &Statement| {
        Data::map([("sql", s.sql.as_str().into()), ("params", Data::List(s.params.iter().map(value_data).collect()))])
    });
    Data::map([
        ("id", id.into()),
        ("conn", conn_name(batch.conn).into()),
        ("statements", Data::List(statements.collect())),
        ("timeoutMs", millis(limit)),
    ])
}

/// A transport's reply as a [`BatchResult`]; data that makes no sense is a `PROTOCOL` failure.
pub fn result_from_data(d: &Data) -> BatchResult {
    parse_result(d)
        .unwrap_or_else(|why| Err(SqlFailure::Other(Error::protocol(format!("the SQL transport's reply: {why}")))))
}

fn parse_result(d: &Data) -> Result<BatchResult, String> {
    const WHAT: &str = "a reply";
    if let Some(failure) = d.get("failure") {
        let message = d.get("message").and_then(Data::as_str).unwrap_or("").to_string();
        return Ok(Err(match failure.as_str() {
            Some("connectionLost") => SqlFailure::ConnectionLost(message),
            Some("server") => SqlFailure::Server { code: d.str_field(WHAT, "code")?.to_string(), message },
            Some("other") => {
                let code = d.get("code").and_then(Data::as_str).unwrap_or("PROTOCOL");
                let kind = ErrorKind::ALL.into_iter().find(|k| k.code() == code).unwrap_or(ErrorKind::Protocol);
                SqlFailure::Other(Error::new(kind, message))
            }
            _ => return Err(format!("unknown failure {failure:?}")),
        }));
    }
    match d.str_field(WHAT, "reply")? {
        "rows" => {}
        other => return Err(format!("unknown reply {other:?}")),
    }
    list(d, "results")?.iter().map(rows).collect::<Result<Vec<_>, _>>().map(Ok)
}

fn rows(d: &Data) -> Result<Rows, String> {
    const WHAT: &str = "a statement's result";
    let affected = d.int_field(WHAT, "affected")?;
    let affected = u64::try_from(affected).map_err(|_| format!("a negative count of affected rows ({affected})"))?;
    let rows = list(d, "rows")?
        .iter()
        .map(|row| {
            let columns = row.as_list().ok_or_else(|| format!("a row that is {}, not a list", row.kind()))?;
            columns.iter().map(value).collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
    Ok(Rows { affected, rows })
}

fn value(d: &Data) -> Result<Value, String> {
    match d {
        Data::Null => Ok(Value::Null),
        Data::Int(i) => Ok(Value::Int(*i)),
        Data::Str(s) => Ok(Value::Text(s.clone())),
        other => Err(format!("a column value that is {}, not null, an integer or text", other.kind())),
    }
}

/// The list under `key` (at most [`MAX_ITEMS`]).
fn list<'a>(d: &'a Data, key: &str) -> Result<&'a [Data], String> {
    let items = d.get(key).and_then(Data::as_list).ok_or_else(|| format!("no list of {key}"))?;
    if items.len() > MAX_ITEMS {
        return Err(format!("more than {MAX_ITEMS} {key}"));
    }
    Ok(items)
}

/// The result for a batch whose transport failed before any answer: a lost connection (may
/// have been applied: retryable) for `CONNECTION` and `TIMEOUT` errors, else the error.
pub fn result_from_error(error: Error) -> BatchResult {
    Err(match error.kind() {
        ErrorKind::Connection | ErrorKind::Timeout => SqlFailure::ConnectionLost(error.message().to_string()),
        _ => SqlFailure::Other(error),
    })
}

/// A pushed notice; `None` for data that is none.
pub fn notice_from_data(d: &Data) -> Option<SqlNotice> {
    match d.get("notice")?.as_str()? {
        "notified" => Some(SqlNotice::Notified {
            channel: d.get("channel")?.as_str()?.to_string(),
            // An empty payload is null in some drivers.
            payload: d.get("payload").and_then(Data::as_str).unwrap_or("").to_string(),
        }),
        "reconnected" => Some(SqlNotice::Reconnected {
            conn: match d.get("conn")?.as_str()? {
                "main" => Conn::Main,
                "listen" => Conn::Listen,
                "wait" => Conn::Wait,
                _ => return None,
            },
        }),
        _ => None,
    }
}

fn millis(d: Duration) -> Data {
    Data::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_says_its_connection_statements_and_limit() {
        let batch = Batch {
            conn: Conn::Wait,
            statements: vec![
                Statement {
                    sql: "SELECT GET_LOCK(?, ?)".into(),
                    params: vec![Value::Text("lockgate:ab".into()), Value::Int(3)],
                },
                Statement { sql: "SELECT RELEASE_LOCK(?)".into(), params: vec![Value::Null] },
            ],
        };
        let d = batch_data(7, &batch, Duration::from_millis(4500));
        assert_eq!(
            (d.int_field("", "id"), d.str_field("", "conn"), d.int_field("", "timeoutMs")),
            (Ok(7), Ok("wait"), Ok(4500))
        );
        let statements = d.get("statements").and_then(Data::as_list).unwrap();
        assert_eq!(statements[0].str_field("", "sql"), Ok("SELECT GET_LOCK(?, ?)"));
        assert_eq!(statements[0].get("params"), Some(&Data::List(vec!["lockgate:ab".into(), Data::Int(3)])));
        // A null parameter stays in its place (Data::get treats null as absent, lists keep it).
        assert_eq!(statements[1].get("params"), Some(&Data::List(vec![Data::Null])));
        assert_eq!(
            batch_data(1, &Batch { conn: Conn::Listen, statements: vec![] }, Duration::ZERO).str_field("", "conn"),
            Ok("listen")
        );
    }

    #[test]
    fn rows_and_failures_round_trip() {
        let reply = Data::map([
            ("reply", "rows".into()),
            (
                "results",
                Data::List(vec![
                    Data::map([("affected", 1i64.into()), ("rows", Data::List(vec![]))]),
                    Data::map([
                        ("affected", 0i64.into()),
                        ("rows", Data::List(vec![Data::List(vec![Data::Int(1 << 60), "w".into(), Data::Null])])),
                    ]),
                ]),
            ),
        ]);
        assert_eq!(
            result_from_data(&reply),
            Ok(vec![
                Rows { affected: 1, rows: vec![] },
                Rows { affected: 0, rows: vec![vec![Value::Int(1 << 60), Value::Text("w".into()), Value::Null]] },
            ])
        );
        let lost = Data::map([("failure", "connectionLost".into()), ("message", "reset".into())]);
        assert_eq!(result_from_data(&lost), Err(SqlFailure::ConnectionLost("reset".into())));
        let server =
            Data::map([("failure", "server".into()), ("code", "57014".into()), ("message", "canceling".into())]);
        assert_eq!(
            result_from_data(&server),
            Err(SqlFailure::Server { code: "57014".into(), message: "canceling".into() })
        );
        let auth =
            Data::map([("failure", "other".into()), ("code", "AUTHENTICATION".into()), ("message", "no".into())]);
        match result_from_data(&auth) {
            Err(SqlFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::Authentication),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nonsense_is_a_protocol_failure() {
        let result = |rows: Data| {
            Data::map([
                ("reply", "rows".into()),
                ("results", Data::List(vec![Data::map([("affected", 0i64.into()), ("rows", rows)])])),
            ])
        };
        for bad in [
            Data::Null,
            Data::map([("reply", "rows".into())]),
            Data::map([("reply", "table".into()), ("results", Data::List(vec![]))]),
            Data::map([("failure", "server".into())]),
            Data::map([("failure", "sorry".into())]),
            result(Data::List(vec![Data::Int(1)])),
            result(Data::List(vec![Data::List(vec![Data::Bool(true)])])),
            Data::map([
                ("reply", "rows".into()),
                ("results", Data::List(vec![Data::map([("affected", (-1i64).into()), ("rows", Data::List(vec![]))])])),
            ]),
        ] {
            match result_from_data(&bad) {
                Err(SqlFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::Protocol, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn notices() {
        let n = Data::map([
            ("notice", "notified".into()),
            ("channel", "lockgate_wake".into()),
            ("payload", "mutex/a".into()),
        ]);
        assert_eq!(
            notice_from_data(&n),
            Some(SqlNotice::Notified { channel: "lockgate_wake".into(), payload: "mutex/a".into() })
        );
        let r = Data::map([("notice", "reconnected".into()), ("conn", "listen".into())]);
        assert_eq!(notice_from_data(&r), Some(SqlNotice::Reconnected { conn: Conn::Listen }));
        assert_eq!(notice_from_data(&Data::map([("notice", "reconnected".into()), ("conn", "x".into())])), None);
        assert_eq!(notice_from_data(&Data::map([("notice", "notified".into())])), None);
    }

    #[test]
    fn transport_errors_are_lost_connections_or_themselves() {
        assert!(matches!(
            result_from_error(Error::new(ErrorKind::Connection, "down")),
            Err(SqlFailure::ConnectionLost(_))
        ));
        assert!(matches!(result_from_error(Error::protocol("odd")), Err(SqlFailure::Other(_))));
    }
}
