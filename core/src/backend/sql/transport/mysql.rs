//! One MySQL/MariaDB connection on `sqlx`'s MySQL driver: a single statement with parameters
//! prepared (sqlx keeps them per connection), one without any sent as text (so `BEGIN` and the
//! like, which the server will not prepare, run too), a batch of several as one text script
//! (one round trip), rows converted to [`Value`]s by column type, errors classified (a killed connection or a server shutting down is
//! `ConnectionLost`, a refused statement its error number).

use futures_util::TryStreamExt;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlDatabaseError, MySqlRow, MySqlSslMode};
use sqlx::{AssertSqlSafe, Column, Connection, Either, Executor, Row, TypeInfo, ValueRef};

use super::{rows, Endpoint, TlsMode};
use crate::error::{Error, ErrorKind};
use crate::backend::sql::script::mysql_script;
use crate::backend::sql::{Rows, SqlFailure, Statement, Value};

/// How many prepared statements a connection keeps (the backend renders a small fixed set).
const STATEMENT_CACHE: usize = 256;

/// Error numbers that mean the server ended the connection: `ER_SERVER_SHUTDOWN`,
/// `ER_CONNECTION_KILLED` (MariaDB's `KILL`), `ER_CLIENT_INTERACTION_TIMEOUT` (MySQL 8).
const CONNECTION_ENDED: [u16; 3] = [1053, 1927, 4031];

/// Error numbers of a refused login: `ER_DBACCESS_DENIED_ERROR`, `ER_ACCESS_DENIED_ERROR`,
/// `ER_ACCESS_DENIED_NO_PASSWORD_ERROR`.
const LOGIN_REFUSED: [u16; 3] = [1044, 1045, 1698];

/// An open connection.
pub(super) struct MyConn {
    conn: MySqlConnection,
    endpoint: Endpoint,
}

impl MyConn {
    /// Connects and logs in, over TLS as the endpoint's mode asks (sqlx's rustls: `Prefer` falls
    /// back to plain TCP when the server offers no TLS; `Require` does not check the
    /// certificate; `VerifyCa` checks its chain to the CA given, else Mozilla's roots;
    /// `VerifyFull` also its name).
    pub(super) async fn open(endpoint: &Endpoint) -> Result<MyConn, SqlFailure> {
        let mode = match endpoint.tls {
            TlsMode::Off => MySqlSslMode::Disabled,
            TlsMode::Prefer => MySqlSslMode::Preferred,
            TlsMode::Require => MySqlSslMode::Required,
            TlsMode::VerifyCa => MySqlSslMode::VerifyCa,
            TlsMode::VerifyFull => MySqlSslMode::VerifyIdentity,
        };
        let mut options = MySqlConnectOptions::new()
            .host(&endpoint.host)
            .port(endpoint.port)
            .username(&endpoint.user)
            .ssl_mode(mode)
            .statement_cache_capacity(STATEMENT_CACHE);
        if let Some(pem) = &endpoint.tls_ca_pem {
            if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(SqlFailure::Other(Error::invalid("the TLS CA holds no PEM certificate")));
            }
            options = options.ssl_ca_from_pem(pem.clone());
        }
        if let Some(p) = &endpoint.password {
            options = options.password(p);
        }
        if let Some(db) = &endpoint.database {
            options = options.database(db);
        }
        let what = "connecting";
        let conn = MySqlConnection::connect_with(&options).await.map_err(|e| failure(&e, what, endpoint))?;
        Ok(MyConn { conn, endpoint: endpoint.clone() })
    }

    /// Runs one statement.
    pub(super) async fn run(&mut self, statement: &Statement) -> Result<Rows, SqlFailure> {
        let what = describe(&statement.sql);
        let sql = AssertSqlSafe(statement.sql.clone());
        let mut stream = if statement.params.is_empty() {
            (&mut self.conn).fetch_many(sqlx::raw_sql(sql))
        } else {
            let mut query = sqlx::query(sql);
            for p in &statement.params {
                query = match p {
                    Value::Null => query.bind(None::<String>),
                    Value::Int(i) => query.bind(*i),
                    Value::Text(t) => query.bind(t.clone()),
                };
            }
            (&mut self.conn).fetch_many(query)
        };
        let (mut affected, mut out) = (0, Vec::new());
        loop {
            match stream.try_next().await {
                Ok(None) => break,
                Ok(Some(Either::Left(done))) => affected += done.rows_affected(),
                Ok(Some(Either::Right(row))) => out.push(values(&row).map_err(|e| SqlFailure::Other(Error::protocol(format!("{what}: {e}"))))?),
                Err(e) => return Err(failure(&e, &what, &self.endpoint)),
            }
        }
        Ok(rows(affected, out))
    }

    /// Runs `statements` as one multi-statement script ([`mysql_script`]: parameters as
    /// literals, text protocol) in one round trip; sqlx logs in with `CLIENT_MULTI_STATEMENTS`.
    /// The server answers each statement in turn and stops at the first that fails, whose
    /// error is the reply; each statement's answer ends with one `Either::Left` (its OK packet,
    /// or the end of its rows), which is how the results are split. Rows come back in the text
    /// format and convert as the prepared ones do ([`values`] reads by column type).
    pub(super) async fn run_script(&mut self, statements: &[Statement]) -> Result<Vec<Rows>, SqlFailure> {
        let script = mysql_script(statements).map_err(SqlFailure::Other)?;
        // The statement the server is answering, for messages (parameters are left out).
        let at = |n: usize| match statements.get(n) {
            Some(s) => format!("{} (statement {} of a script of {})", describe(&s.sql), n + 1, statements.len()),
            None => format!("a script of {} statements", statements.len()),
        };
        let mut stream = (&mut self.conn).fetch_many(sqlx::raw_sql(AssertSqlSafe(script)));
        let mut out = Vec::with_capacity(statements.len());
        let mut current = Vec::new();
        loop {
            match stream.try_next().await {
                Ok(None) => break,
                Ok(Some(Either::Left(done))) => out.push(rows(done.rows_affected(), std::mem::take(&mut current))),
                Ok(Some(Either::Right(row))) => {
                    let row = values(&row).map_err(|e| SqlFailure::Other(Error::protocol(format!("{}: {e}", at(out.len())))))?;
                    current.push(row);
                }
                Err(e) => return Err(failure(&e, &at(out.len()), &self.endpoint)),
            }
        }
        if out.len() != statements.len() || !current.is_empty() {
            let why = format!("the server answered {} results to {} statements", out.len(), statements.len());
            return Err(SqlFailure::Other(Error::protocol(format!("{}: {why}", at(usize::MAX)))));
        }
        Ok(out)
    }

    /// Closes it in the background (a polite `QUIT`, given up after a second).
    pub(super) fn close(self) {
        tokio::spawn(async move {
            let _ = tokio::time::timeout(crate::time::Duration::from_secs(1), self.conn.close()).await;
        });
    }
}

/// A row's columns as values: integers as `Int` (an unsigned one beyond `i64` as text), `NULL`
/// as `Null`, everything else (text, decimals, floats) as text.
fn values(row: &MySqlRow) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
        if raw.is_null() {
            out.push(Value::Null);
            continue;
        }
        let name = column.type_info().name().to_string();
        let bad = |e: sqlx::Error| format!("column {} ({name}): {e}", column.name());
        let v = match name.as_str() {
            "BIGINT UNSIGNED" | "INT UNSIGNED" | "MEDIUMINT UNSIGNED" | "SMALLINT UNSIGNED" | "TINYINT UNSIGNED" => {
                let u: u64 = row.try_get_unchecked(i).map_err(bad)?;
                i64::try_from(u).map(Value::Int).unwrap_or_else(|_| Value::Text(u.to_string()))
            }
            "BIGINT" | "INT" | "MEDIUMINT" | "SMALLINT" | "TINYINT" | "BOOLEAN" | "YEAR" => {
                Value::Int(row.try_get_unchecked::<i64, _>(i).map_err(bad)?)
            }
            "FLOAT" | "DOUBLE" => Value::Text(row.try_get_unchecked::<f64, _>(i).map_err(bad)?.to_string()),
            "DATE" | "TIME" | "DATETIME" | "TIMESTAMP" | "GEOMETRY" | "BIT" => {
                return Err(format!("column {} has type {name}: the transport reads integers, text and decimals", column.name()))
            }
            _ => {
                let bytes: Vec<u8> = row.try_get_unchecked(i).map_err(bad)?;
                Value::Text(String::from_utf8_lossy(&bytes).into_owned())
            }
        };
        out.push(v);
    }
    Ok(out)
}

/// The statement's first words, for messages (parameters are left out).
fn describe(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().take(4).collect();
    format!("the statement `{} ...`", words.join(" "))
}

/// A TLS handshake the client or server refused: not retryable.
fn tls_refused(text: &dyn Fn(&dyn std::fmt::Display) -> String, why: &dyn std::fmt::Display) -> SqlFailure {
    SqlFailure::Other(Error::new(
        ErrorKind::Connection,
        text(&format!(
            "the TLS handshake failed ({why}); with ssl-mode=VERIFY_CA or VERIFY_IDENTITY trust the CA that signed the \
             server's certificate (the URL's ssl-ca or the client's TLS CA option) and name the server as its certificate does"
        )),
    ))
}

/// The failure `e` means: the server's error number for a refused statement, `ConnectionLost`
/// for a connection that is gone or in an unknown state (I/O, protocol, the server ended it),
/// `AUTHENTICATION` for a refused login. Messages never carry the password.
pub(super) fn failure(e: &sqlx::Error, what: &str, endpoint: &Endpoint) -> SqlFailure {
    let text = |m: &dyn std::fmt::Display| endpoint.scrub(&format!("{what} on {}: {m}", endpoint.shown()));
    match e {
        sqlx::Error::Database(db) => match db.try_downcast_ref::<MySqlDatabaseError>() {
            Some(my) if LOGIN_REFUSED.contains(&my.number()) => SqlFailure::Other(Error::new(
                ErrorKind::Authentication,
                text(&format!("the server refused the login ({}): {}", my.number(), my.message())),
            )),
            Some(my) if CONNECTION_ENDED.contains(&my.number()) => SqlFailure::ConnectionLost(text(&format!("{} ({})", my.message(), my.number()))),
            Some(my) => SqlFailure::Server { code: my.number().to_string(), message: endpoint.scrub(my.message()) },
            None => SqlFailure::Other(Error::protocol(text(db))),
        },
        sqlx::Error::Tls(why) => tls_refused(&text, why),
        // A refused certificate arrives as rustls' error inside an I/O error.
        sqlx::Error::Io(io) if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => {
            tls_refused(&text, io.get_ref().expect("checked"))
        }
        sqlx::Error::Configuration(_) => SqlFailure::Other(Error::invalid(text(e))),
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) | sqlx::Error::Encode(_) | sqlx::Error::TypeNotFound { .. } => {
            SqlFailure::Other(Error::protocol(text(e)))
        }
        _ => SqlFailure::ConnectionLost(text(e)),
    }
}
