//! The SQL backend's batches, their results and the transport's notices
//! ([`crate::backend::sql::statement`]) as [`Data`], and what a transport opens, so a transport in another
//! language (the Node binding's `lib/transport/sql.js` on `pg` and `mysql2`) runs them without a
//! rule of its own. The engine's structured operations are rendered to batches here (with the
//! client's schema) and their rows parsed here, as the native transport does around its
//! execution: the transport only ever sees SQL text, parameters and rows. The forms:
//!
//! - request: `{ id, conn: 'main' | 'listen' | 'wait' | 'refresh', statements: [{ sql, params: [null |
//!   integer | string] }], timeoutMs, script?, refused? }` (`timeoutMs`: how long the batch may
//!   go unanswered before the transport fails it as connectionLost and drops its connection:
//!   the response timeout, plus the wait a wait batch asks the server for; `script`: a MySQL
//!   batch of several statements as one multi-statement script with the parameters in place,
//!   [`mysql_script`], which the transport may send instead of the statements, in one round
//!   trip, its results one per statement; `refused`: instead of `script` when the statements
//!   cannot be one, the failure the transport replies with, running nothing).
//! - reply: `{ reply: 'rows', results: [{ affected, rows: [[null | integer | string]] }] }`
//!   (one result per statement, in order); or a failure `{ failure, code?, message? }` with
//!   `failure` one of `connectionLost` (may have been applied), `server` (`code`: the SQLSTATE
//!   or the MySQL error number as text), `other` (`code`: the lockgate error code, `PROTOCOL`
//!   if absent).
//! - notice: `{ notice: 'notified', channel, payload }` (a PostgreSQL notification on the
//!   listening connection) or `{ notice: 'reconnected', conn }` (that connection was replaced).
//! - plan: see [`plan`].
//!
//! What a transport must do with a batch (in order, autocommit, stop at the first failure, one
//! reply, nothing retried) is [`crate::backend::sql::statement`]'s contract.

use std::collections::HashMap;

use crate::data::{neutral, Connected, Data, DynEngine};
use crate::connect::ClientOptions;
use crate::engine::{Backend, Done, Event, LeaseId, LockEngine, OpId, Primitive, RequestId, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::LockOptions;
use crate::random::RandomSource;
use crate::backend::sql::address::SslMode;
use crate::backend::sql::{
    Batch, BatchResult, Conn, Dialect, Rows, Schema, SqlAddress, SqlBackend, SqlEngine, SqlFailure, SqlNotice, SqlOp,
    SqlRequest, SqlResult, Statement, Value, MAX_WAIT_CONNECTIONS,
};
use crate::backend::sql::script::mysql_script;
use crate::time::{Duration, Instant};

/// Most items a list in a reply may hold before it counts as nonsense (a batch has a few
/// statements; a lock's rows are its holders and waiters).
const MAX_ITEMS: usize = 1 << 20;

fn conn_name(conn: Conn) -> &'static str {
    match conn {
        Conn::Main => "main",
        Conn::Listen => "listen",
        Conn::Wait => "wait",
        Conn::Refresh => "refresh",
    }
}

fn value_data(v: &Value) -> Data {
    match v {
        Value::Null => Data::Null,
        Value::Int(i) => Data::Int(*i),
        Value::Text(t) => Data::from(t.as_str()),
    }
}

/// The SQL engine of a `postgres://`, `postgresql://`, `mysql://` or `mariadb://` client and its
/// transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let target = options.target()?;
    let address = target.sql().ok_or_else(|| Error::protocol("a SQL target without its address"))?;
    let config = options.sql_config()?;
    let schema = config.schema.clone();
    let engine = SqlEngine::with_backend(SqlBackend::new(config), rng);
    let plan = plan(address, options)?;
    Ok(Connected { engine: Box::new(SqlDataEngine::new(engine, schema, options.response_timeout)), plan })
}

/// A SQL client's engine with the data face of [`DynEngine`]: each request's operation is
/// rendered to its batch with the client's [`Schema`] on the way out, and kept until its reply
/// comes back to be parsed by it ([`SqlOp::render`], [`SqlOp::parse`]: what the native
/// transport does around its execution).
pub struct SqlDataEngine<B: Backend> {
    engine: LockEngine<B>,
    schema: Schema,
    response_timeout: Duration,
    /// The operations on the wire, by request id.
    in_flight: HashMap<RequestId, SqlOp>,
}

impl<B> SqlDataEngine<B>
where
    B: for<'a> Backend<Request = SqlRequest, Reply = SqlResult, Notice<'a> = SqlNotice>,
    B::Outcome: Into<Done>,
{
    /// `engine` rendering on `schema`; batches may go unanswered for `response_timeout` (a
    /// doorbell wait for its own wait on top).
    pub fn new(engine: LockEngine<B>, schema: Schema, response_timeout: Duration) -> Self {
        SqlDataEngine { engine, schema, response_timeout, in_flight: HashMap::new() }
    }

    /// Feeds the reply to request `id`, parsed by its operation (a reply nobody waits for is
    /// dropped, as the engine drops one itself).
    fn reply(&mut self, now: Instant, id: RequestId, result: BatchResult) {
        if let Some(op) = self.in_flight.remove(&id) {
            let reply = result.and_then(|rows| op.parse(rows));
            self.engine.handle_reply(now, id, reply);
        }
    }
}

/// How long a batch of `op` may go unanswered: the response timeout, plus the wait a doorbell
/// wait asks the server for.
pub fn time_limit(op: &SqlOp, response_timeout: Duration) -> Duration {
    match op {
        SqlOp::WaitDoorbell { timeout_secs, .. } => response_timeout + Duration::from_secs(*timeout_secs),
        _ => response_timeout,
    }
}

impl<B> DynEngine for SqlDataEngine<B>
where
    B: for<'a> Backend<Request = SqlRequest, Reply = SqlResult, Notice<'a> = SqlNotice>,
    B::Outcome: Into<Done>,
{
    fn acquire(
        &mut self,
        now: Instant,
        name: &str,
        primitive: &Primitive,
        options: &LockOptions,
        wait: Wait,
    ) -> Result<OpId> {
        self.engine.acquire_primitive(now, name, primitive, options, wait)
    }

    fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
        self.engine.reacquire(now, lease)
    }

    fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
        self.engine.observe_leader(now, name)
    }

    fn inspect_as(&mut self, now: Instant, name: &str, primitive: &crate::primitive::Primitive) -> Result<OpId> {
        self.engine.inspect_as(now, name, primitive)
    }

    fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId> {
        self.engine.break_lock(now, name, kind, fencing_token)
    }

    fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId> {
        self.engine.adopt(now, identity, options)
    }

    fn export(&self, now: Instant, lease: LeaseId) -> Result<String> {
        self.engine.export(now, lease)
    }

    fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId> {
        self.engine.list(now, prefix, limit, cursor)
    }

    fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        self.engine.release(now, lease)
    }

    fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        self.engine.extend(now, lease, duration)
    }

    fn cancel(&mut self, now: Instant, op: OpId) {
        self.engine.cancel(now, op)
    }

    fn enable_telemetry(&mut self, config: crate::engine::TelemetryConfig) {
        self.engine.enable_telemetry(config)
    }

    fn shutdown(&mut self, now: Instant) {
        self.engine.shutdown(now)
    }

    fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
        self.engine.lease_valid_until(lease)
    }

    fn is_held(&self, now: Instant, lease: LeaseId) -> bool {
        self.engine.is_held(now, lease)
    }

    fn is_idle(&self) -> bool {
        self.engine.is_idle()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn handle_disconnect(&mut self, now: Instant) {
        self.engine.handle_disconnect(now)
    }

    fn poll_request(&mut self) -> Option<Data> {
        let SqlRequest { id, op } = self.engine.poll_request()?;
        let data = batch_data(id.0, &op.render(&self.schema), time_limit(&op, self.response_timeout), self.schema.dialect);
        self.in_flight.insert(id, op);
        Some(data)
    }

    fn poll_event(&mut self) -> Option<Event<Done>> {
        self.engine.poll_event().map(neutral)
    }

    fn handle_reply(&mut self, now: Instant, id: RequestId, reply: &Data) {
        self.reply(now, id, result_from_data(reply))
    }

    fn handle_failure(&mut self, now: Instant, id: RequestId, error: Error) {
        self.reply(now, id, result_from_error(error))
    }

    fn handle_notice(&mut self, now: Instant, notice: &Data) {
        if let Some(n) = notice_from_data(notice) {
            self.engine.handle_notice(now, n);
        }
    }
}

/// Batch `batch` of request `id` as data, `limit` its time limit, for a server of `dialect`: a
/// MySQL batch of several statements also carries them as one script ([`mysql_script`]) for the
/// transport to send in one round trip, or, if they cannot be one, the failure to reply with.
pub fn batch_data(id: u64, batch: &Batch, limit: Duration, dialect: Dialect) -> Data {
    let statements = batch.statements.iter().map(|s: &Statement| {
        Data::map([("sql", s.sql.as_str().into()), ("params", Data::List(s.params.iter().map(value_data).collect()))])
    });
    let mut fields = vec![
        ("id", id.into()),
        ("conn", conn_name(batch.conn).into()),
        ("statements", Data::List(statements.collect())),
        ("timeoutMs", millis(limit)),
    ];
    if dialect == Dialect::MySql && batch.statements.len() > 1 {
        match mysql_script(&batch.statements) {
            Ok(script) => fields.push(("script", script.into())),
            Err(e) => fields.push((
                "refused",
                Data::map([("failure", "other".into()), ("code", e.kind().code().into()), ("message", e.message().into())]),
            )),
        }
    }
    Data::map(fields)
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
                "refresh" => Conn::Refresh,
                _ => return None,
            },
        }),
        _ => None,
    }
}

// ---- the plan ----

/// What a transport opens for `address` with `options`: `{ transport: 'sql', backend, dialect:
/// 'postgres' | 'mysql', hosts: [{ host, port }] (tried in order), user: string | null,
/// password: string | null, database: string | null, applicationName: string | null, tls,
/// connectTimeoutMs, commandTimeoutMs, maxWaitConnections, redacted }` with `tls` null (plain
/// TCP) or `{ verify: 'none' | 'ca' | 'full', optional, caPem: string | null, caFile: string |
/// null }`: `verify` how the server's certificate is checked (`ca`: the chain, `full`: the
/// chain and the host name), `optional` whether a server without TLS is spoken to in plaintext
/// (`sslmode=prefer`), the CA as the client's TLS CA option's PEM or the URL's file
/// (`sslrootcert`, `ssl-ca`; the transport reads it), none meaning the system's roots. A null
/// user is the OS user's. `connectTimeoutMs` is the URL's `connect_timeout` where shorter than
/// the client's; `redacted` is the URL with its password as `***`. `INVALID_ARGUMENT` for both
/// a CA file and the CA option, or a CA option that holds no PEM certificate.
pub fn plan(address: &SqlAddress, options: &ClientOptions) -> Result<Data> {
    let ca_pem = match (&address.ssl_root_cert, &options.tls_ca_pem) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid("the URL's CA file and the client's TLS CA option were both given: give one"))
        }
        (None, Some(pem)) if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") => {
            return Err(Error::invalid(
                "the client's TLS CA option holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        (_, pem) => pem.as_ref().map(|p| String::from_utf8_lossy(p).into_owned()),
    };
    let ca_given = ca_pem.is_some() || address.ssl_root_cert.is_some();
    let tls = |verify: &str, optional: bool| {
        Data::map([
            ("verify", verify.into()),
            ("optional", optional.into()),
            ("caPem", ca_pem.clone().into()),
            ("caFile", address.ssl_root_cert.clone().into()),
        ])
    };
    let tls = match address.ssl_mode {
        SslMode::Disable => Data::Null,
        SslMode::Prefer => tls("none", true),
        // libpq: `require` with a CA given checks the chain as `verify-ca` does.
        SslMode::Require if ca_given => tls("ca", false),
        SslMode::Require => tls("none", false),
        SslMode::VerifyCa => tls("ca", false),
        SslMode::VerifyFull => tls("full", false),
    };
    let connect_timeout = match address.connect_timeout_secs {
        Some(s) if s > 0 => Duration::from_secs(s).min(options.connect_timeout),
        _ => options.connect_timeout,
    };
    let (backend, dialect) = match address.dialect() {
        Dialect::Postgres => ("postgres", "postgres"),
        Dialect::MySql => ("mysql", "mysql"),
    };
    let hosts =
        address.hosts.iter().map(|(h, p)| Data::map([("host", h.as_str().into()), ("port", i64::from(*p).into())]));
    Ok(Data::map([
        ("transport", "sql".into()),
        ("backend", backend.into()),
        ("dialect", dialect.into()),
        ("hosts", Data::List(hosts.collect())),
        ("user", address.user.clone().into()),
        ("password", address.password.clone().into()),
        ("database", address.database.clone().into()),
        ("applicationName", address.application_name.clone().into()),
        ("tls", tls),
        ("connectTimeoutMs", millis(connect_timeout)),
        ("commandTimeoutMs", millis(options.response_timeout)),
        ("maxWaitConnections", (MAX_WAIT_CONNECTIONS as u64).into()),
        ("redacted", address.shown().into()),
    ]))
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
        let d = batch_data(7, &batch, Duration::from_millis(4500), Dialect::MySql);
        assert_eq!(
            (d.int_field("", "id"), d.str_field("", "conn"), d.int_field("", "timeoutMs")),
            (Ok(7), Ok("wait"), Ok(4500))
        );
        let statements = d.get("statements").and_then(Data::as_list).unwrap();
        assert_eq!(statements[0].str_field("", "sql"), Ok("SELECT GET_LOCK(?, ?)"));
        assert_eq!(statements[0].get("params"), Some(&Data::List(vec!["lockgate:ab".into(), Data::Int(3)])));
        // A null parameter stays in its place (Data::get treats null as absent, lists keep it).
        assert_eq!(statements[1].get("params"), Some(&Data::List(vec![Data::Null])));
        // A MySQL batch of several statements is also one script, the core's rendering.
        assert_eq!(d.str_field("", "script"), Ok("SELECT GET_LOCK(_utf8mb4 X'6C6F636B676174653A6162', 3);\nSELECT RELEASE_LOCK(NULL)"));
        assert_eq!(d.get("refused"), None);
        assert_eq!(
            batch_data(1, &Batch { conn: Conn::Listen, statements: vec![] }, Duration::ZERO, Dialect::Postgres).str_field("", "conn"),
            Ok("listen")
        );
    }

    #[test]
    fn only_mysql_batches_of_several_statements_carry_a_script() {
        let st = |sql: &str, params: Vec<Value>| Statement { sql: sql.into(), params };
        let two = Batch { conn: Conn::Main, statements: vec![st("SELECT 1", vec![]), st("SELECT 2", vec![])] };
        assert_eq!(batch_data(1, &two, Duration::ZERO, Dialect::Postgres).get("script"), None);
        assert_eq!(batch_data(1, &two, Duration::ZERO, Dialect::MySql).str_field("", "script"), Ok("SELECT 1;\nSELECT 2"));
        let one = Batch { conn: Conn::Main, statements: vec![st("SELECT ?", vec![Value::Int(1)])] };
        assert_eq!(batch_data(1, &one, Duration::ZERO, Dialect::MySql).get("script"), None);
        // Statements that cannot be one script: the failure to reply with, as a reply parses it.
        let bad = Batch { conn: Conn::Main, statements: vec![st("SELECT 1", vec![]), st("SELECT ?", vec![])] };
        let d = batch_data(1, &bad, Duration::ZERO, Dialect::MySql);
        assert_eq!(d.get("script"), None);
        match result_from_data(d.get("refused").expect("refused")) {
            Err(SqlFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
            other => panic!("{other:?}"),
        }
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
    fn a_doorbell_wait_may_take_its_wait_longer() {
        let response = Duration::from_millis(2500);
        let wait = SqlOp::WaitDoorbell { owner: "ab".into(), timeout_secs: 4 };
        assert_eq!(time_limit(&wait, response), Duration::from_millis(6500));
        assert_eq!(time_limit(&SqlOp::Ping, response), response);
    }

    fn plan_of(url: &str, ca: Option<&str>) -> Result<Data> {
        let mut o = ClientOptions::new(url);
        o.tls_ca_pem = ca.map(|c| c.as_bytes().to_vec());
        plan(o.target()?.sql().unwrap(), &o)
    }

    #[test]
    fn the_plan_names_what_to_open_and_how() {
        let p = plan_of("postgresql://app:pw@h1:5433,h2/orders?sslmode=verify-full&connect_timeout=2", None).unwrap();
        assert_eq!((p.str_field("", "transport"), p.str_field("", "dialect")), (Ok("sql"), Ok("postgres")));
        let hosts = p.get("hosts").and_then(Data::as_list).unwrap();
        assert_eq!((hosts[1].str_field("", "host"), hosts[1].int_field("", "port")), (Ok("h2"), Ok(5432)));
        assert_eq!((p.str_field("", "user"), p.str_field("", "password")), (Ok("app"), Ok("pw")));
        assert_eq!(p.str_field("", "database"), Ok("orders"));
        assert_eq!(p.get("tls").map(|t| t.str_field("", "verify")), Some(Ok("full")));
        assert_eq!(p.int_field("", "connectTimeoutMs"), Ok(2000), "the URL's connect_timeout, shorter");
        assert_eq!(p.int_field("", "maxWaitConnections"), Ok(MAX_WAIT_CONNECTIONS as i64));
        assert_eq!(
            p.str_field("", "redacted"),
            Ok("postgresql://app:***@h1:5433,h2:5432/orders?sslmode=verify-full&connect_timeout=2")
        );
        // TLS by the URL's mode: libpq's default prefer falls back to plaintext; require checks
        // the chain once a CA is given.
        let tls = |url: &str| plan_of(url, None).unwrap().get("tls").cloned();
        assert_eq!(tls("postgres://h?sslmode=disable"), None);
        let prefer = tls("postgres://h").unwrap();
        assert_eq!((prefer.str_field("", "verify"), prefer.get("optional")), (Ok("none"), Some(&Data::Bool(true))));
        assert_eq!(tls("postgres://h?sslmode=require").unwrap().str_field("", "verify"), Ok("none"));
        let with_file = tls("postgres://h?sslmode=require&sslrootcert=/etc/ca.pem").unwrap();
        assert_eq!(
            (with_file.str_field("", "verify"), with_file.str_field("", "caFile")),
            (Ok("ca"), Ok("/etc/ca.pem"))
        );
        assert_eq!(tls("mysql://h/db?ssl-mode=VERIFY_IDENTITY").unwrap().str_field("", "verify"), Ok("full"));
        let my = plan_of("mariadb://h/db", None).unwrap();
        assert_eq!((my.str_field("", "dialect"), my.get("user")), (Ok("mysql"), None));
    }

    #[test]
    fn a_ca_is_pem_and_given_once() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let p = plan_of("postgres://h?sslmode=verify-ca", Some(pem)).unwrap();
        assert_eq!(p.get("tls").and_then(|t| t.get("caPem")), Some(&Data::from(pem)));
        for (url, ca, says) in [
            ("postgres://h?sslmode=verify-ca", "/etc/ca.pem", "no PEM certificate"),
            ("postgres://h?sslmode=verify-ca&sslrootcert=/etc/ca.pem", pem, "both given"),
        ] {
            let e = plan_of(url, Some(ca)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.message().contains(says), "{e}");
        }
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
