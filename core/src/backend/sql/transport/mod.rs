//! The SQL transport: runs the SQL backend's [`Batch`]es on PostgreSQL (`tokio-postgres`,
//! [`postgres`]) or MySQL/MariaDB (`sqlx`'s MySQL driver, [`mysql`]) and hands back their
//! [`Rows`], following the contract of `crate::backend::sql::statement`. It decides nothing about
//! locks: which statements to run and what their rows mean are the backend's.
//!
//! Connections per client:
//! - [`Conn::Main`]: one, opened at connect and kept; batches run on it one at a time, in the
//!   order they were made. A connection that failed (dropped, or left a batch unanswered for the
//!   response timeout) is closed, and the next batch opens a new one after pushing
//!   [`SqlNotice::Reconnected`].
//! - [`Conn::Listen`] (PostgreSQL): one, opened by the first batch that names it; every
//!   notification it receives is pushed as [`SqlNotice::Notified`]. It carries no requests of
//!   its own, so a keeper task pings it every [`PING_INTERVAL`] (a silent one is replaced) and
//!   replaces it as soon as it drops, then pushes `Reconnected` (the backend listens again).
//! - [`Conn::Refresh`]: one, opened by the first batch that names it (the backend's batched
//!   refreshes of its waiters' rows, never queued behind Main's work); replaced like Main.
//! - [`Conn::Wait`]: up to [`MAX_WAIT_CONNECTIONS`] idle connections kept for blocking waits
//!   (MySQL's `GET_LOCK`), opened when none is idle; no notice when one is replaced (no session
//!   state outlives a wait batch).
//!
//! Every batch is bounded by the response timeout (a doorbell wait by its own wait plus the
//! response timeout); a batch left unanswered fails with [`SqlFailure::ConnectionLost`] and its
//! connection is closed. A batch that began a transaction and failed inside it is rolled back
//! before its reply. The transport never retries a batch. TLS follows the URL's `sslmode` /
//! `ssl-mode` (rustls on aws-lc-rs for both dialects). No error or `Debug` output shows the
//! password.

mod mysql;
mod postgres;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use futures_util::future::{BoxFuture, FutureExt};
use tokio::sync::mpsc;

use crate::native::transport::{ReplyFuture, Transport};
use crate::connect::{ClientOptions, Target};
use crate::engine::LockEngine;
use crate::error::{Error, ErrorKind};
use crate::native::driver;
use crate::native::message::Msg;
use crate::random::OsRandom;
use crate::backend::sql::address::{SqlAddress, SslMode};
use crate::backend::sql::{
    Batch, BatchResult, Conn, Dialect, Rows, Schema, SqlBackend, SqlEngine, SqlFailure, SqlNotice, SqlOp, SqlRequest, Statement, Value,
    MAX_WAIT_CONNECTIONS,
};
use crate::time::{Duration, Instant};

/// Connects to the database of `target` (the main connection, so a wrong address or login
/// fails here) and starts a SQL client's driver. `CONNECTION` if the server cannot be reached
/// in the connect timeout or its TLS certificate is not trusted, `AUTHENTICATION` if it refuses
/// the login, `INVALID_ARGUMENT` for a CA that cannot be read or used.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> crate::error::Result<mpsc::UnboundedSender<Msg>> {
    let address = target.sql().ok_or_else(|| Error::invalid("not a postgres:// or mysql:// URL"))?;
    let config = options.sql_config()?;
    let endpoint = Endpoint::new(options, address)?;
    let (notices, pushes) = mpsc::unbounded_channel();
    let transport = SqlTransport::connect(endpoint, config.schema.clone(), notices).await?;
    let engine = SqlEngine::with_backend(SqlBackend::new(config), Box::new(OsRandom));
    Ok(driver::spawn(engine, transport, Some(pushes)))
}

/// How often the listening connection is pinged (`SELECT 1`, answered within the response
/// timeout) while it carries nothing else. (Shorter in this module's tests, so the test of a
/// silent listener takes seconds, not tens of them.)
const PING_INTERVAL: Duration = if cfg!(test) { Duration::from_secs(2) } else { Duration::from_secs(10) };

/// How long an idle wait connection is kept before it is closed rather than reused (a server's
/// `wait_timeout` or a NAT may have dropped it silently; a wait batch on a dead connection would
/// fail for nothing).
const WAIT_IDLE_LIMIT: Duration = Duration::from_secs(60);

/// How the client's connections are secured (PostgreSQL; libpq's `sslmode` values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TlsMode {
    /// Plain TCP (`disable`).
    Off,
    /// TLS if the server offers it, without checking its certificate (`prefer`, libpq's
    /// default).
    Prefer,
    /// TLS, without checking the certificate (`require` without a CA).
    Require,
    /// TLS with a certificate that chains to the trusted roots, for any name (`verify-ca`, or
    /// `require` with a CA given).
    VerifyCa,
    /// TLS with a certificate that chains to the trusted roots and names the host
    /// (`verify-full`).
    VerifyFull,
}

/// Where and how to connect: one server, its login and database, TLS, the client's timeouts.
/// Never shown: it holds the password (its `Debug` leaves it out).
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) dialect: Dialect,
    /// The server; PostgreSQL URLs may list more, tried in order (`others`).
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) others: Vec<(String, u16)>,
    pub(crate) application_name: Option<String>,
    pub(crate) user: String,
    pub(crate) password: Option<String>,
    pub(crate) database: Option<String>,
    pub(crate) tls: TlsMode,
    /// The CA to trust (PEM) instead of the system's roots.
    pub(crate) tls_ca_pem: Option<Vec<u8>>,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("dialect", &self.dialect)
            .field("server", &self.shown())
            .field("database", &self.database)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Where `address` points, with the client's TLS CA option and timeouts. The URL's CA file
    /// (`sslrootcert`, `ssl-ca`) and the CA option are one trust: giving both is refused.
    pub(crate) fn new(options: &ClientOptions, address: &SqlAddress) -> crate::error::Result<Endpoint> {
        let dialect = address.dialect();
        let (host, port) = address.hosts.first().cloned().ok_or_else(|| Error::invalid("a SQL URL needs a host"))?;
        let tls_ca_pem = match (&address.ssl_root_cert, &options.tls_ca_pem) {
            (Some(_), Some(_)) => return Err(Error::invalid("the URL's CA file and the client's TLS CA option were both given: give one")),
            (Some(path), None) => {
                Some(std::fs::read(path).map_err(|e| Error::invalid(format!("cannot read the URL's CA file {path}: {}", e.kind())))?)
            }
            (None, ca) => ca.clone(),
        };
        let tls = match address.ssl_mode {
            SslMode::Disable => TlsMode::Off,
            SslMode::Prefer => TlsMode::Prefer,
            SslMode::Require => TlsMode::Require,
            SslMode::VerifyCa => TlsMode::VerifyCa,
            SslMode::VerifyFull => TlsMode::VerifyFull,
        };
        let user = address.user.clone().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| match dialect {
            Dialect::Postgres => "postgres".into(),
            Dialect::MySql => "root".into(),
        });
        let connect_timeout = match address.connect_timeout_secs {
            Some(s) if s > 0 => Duration::from_secs(s).min(options.connect_timeout),
            _ => options.connect_timeout,
        };
        Ok(Endpoint {
            dialect,
            host,
            port,
            others: address.hosts[1..].to_vec(),
            application_name: address.application_name.clone(),
            user,
            password: address.password.clone(),
            database: address.database.clone(),
            tls,
            tls_ca_pem,
            connect_timeout,
            response_timeout: options.response_timeout,
        })
    }

    /// `user@host:port` for messages (never the password).
    pub(crate) fn shown(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{}@{host}:{}", self.user, self.port)
    }

    /// `text` with the password cut out, should a driver or server ever quote it.
    pub(crate) fn scrub(&self, text: &str) -> String {
        match self.password.as_deref() {
            Some(p) if !p.is_empty() => text.replace(p, "***"),
            _ => text.to_string(),
        }
    }
}

/// One open connection of either dialect.
enum DbConn {
    Pg(Box<postgres::PgConn>),
    My(Box<mysql::MyConn>),
}

impl DbConn {
    async fn open(endpoint: &Endpoint, notices: Option<&mpsc::UnboundedSender<SqlNotice>>) -> Result<DbConn, SqlFailure> {
        let limit = endpoint.connect_timeout;
        let opening = async {
            match endpoint.dialect {
                Dialect::Postgres => postgres::PgConn::open(endpoint, notices.cloned()).await.map(|c| DbConn::Pg(Box::new(c))),
                Dialect::MySql => mysql::MyConn::open(endpoint).await.map(|c| DbConn::My(Box::new(c))),
            }
        };
        match tokio::time::timeout(limit, opening).await {
            Ok(r) => r,
            Err(_) => Err(SqlFailure::ConnectionLost(format!(
                "connecting to {}: no answer within the connect timeout ({limit:?})",
                endpoint.shown()
            ))),
        }
    }

    /// Runs the statements in order, stopping at the first failure (MySQL: a batch of several
    /// as one script, in one round trip). A batch that began a transaction and failed inside it
    /// is rolled back, so the connection is left as the next
    /// batch expects it (no transaction open, no row or advisory lock held); a connection that
    /// cannot even roll back is reported lost.
    async fn run(&mut self, statements: &[Statement]) -> BatchResult {
        let mut out = Vec::with_capacity(statements.len());
        let transaction = statements.first().is_some_and(|s| begins_transaction(&s.sql));
        if let (DbConn::Pg(c), false, true) = (&mut *self, transaction, statements.len() > 1) {
            // Autocommit statements, pipelined (the batch contract allows it: see
            // `sql::statement`): the first failure is the reply.
            if let Some(results) = c.run_pipelined(statements).await {
                for result in results {
                    out.push(result?);
                }
                return Ok(out);
            }
        }
        if let (DbConn::My(c), true) = (&mut *self, statements.len() > 1) {
            // One script, one round trip (the batch contract allows it: see `sql::statement`);
            // the server stops at the first failing statement, which is the reply.
            return match c.run_script(statements).await {
                Ok(results) => Ok(results),
                Err(SqlFailure::ConnectionLost(why)) => Err(SqlFailure::ConnectionLost(why)),
                Err(failure) if transaction => Err(self.roll_back(failure).await),
                Err(failure) => Err(failure),
            };
        }
        for statement in statements {
            match self.run_one(statement).await {
                Ok(rows) => out.push(rows),
                Err(SqlFailure::ConnectionLost(why)) => return Err(SqlFailure::ConnectionLost(why)),
                Err(failure) if transaction => return Err(self.roll_back(failure).await),
                Err(failure) => return Err(failure),
            }
        }
        Ok(out)
    }

    /// Rolls back the transaction a batch opened and failed in: `failure` if that works, else
    /// `ConnectionLost` (a connection that cannot roll back is in no state to be used again).
    async fn roll_back(&mut self, failure: SqlFailure) -> SqlFailure {
        let rollback = Statement { sql: "ROLLBACK".into(), params: vec![] };
        match self.run_one(&rollback).await {
            Ok(_) => failure,
            Err(e) => SqlFailure::ConnectionLost(format!("{failure}; then the rollback failed: {e}")),
        }
    }

    async fn run_one(&mut self, statement: &Statement) -> Result<Rows, SqlFailure> {
        match self {
            DbConn::Pg(c) => c.run(statement).await,
            DbConn::My(c) => c.run(statement).await,
        }
    }

    /// Whether the connection is known to be gone (no request can succeed on it).
    fn is_closed(&self) -> bool {
        match self {
            DbConn::Pg(c) => c.is_closed(),
            DbConn::My(_) => false,
        }
    }

    /// Closes it (in the background: a silent server must not hold anyone up).
    fn close(self) {
        match self {
            DbConn::Pg(c) => drop(c),
            DbConn::My(c) => (*c).close(),
        }
    }
}

/// A connection slot (Main or Listen): the open connection, if any, and whether one was open
/// before (so opening the next one is a replacement, announced with `Reconnected`).
#[derive(Default)]
struct Slot {
    conn: Option<DbConn>,
    opened: u64,
    /// A batch is running on it; still set when the next batch comes means that batch was
    /// dropped half-way (its reply no longer wanted), leaving the connection in an unknown
    /// state: it is closed.
    busy: bool,
}

/// An idle wait connection and when it went idle.
struct Idle {
    conn: DbConn,
    since: tokio::time::Instant,
}

/// What every batch of the transport shares.
struct Shared {
    endpoint: Endpoint,
    /// Where lockgate's table lives (what operations render against).
    schema: Schema,
    notices: mpsc::UnboundedSender<SqlNotice>,
    /// The main connection; its lock is held for a whole batch, so batches run one at a time in
    /// the order they asked (tokio's mutex is fair).
    main: tokio::sync::Mutex<Slot>,
    listen: tokio::sync::Mutex<Slot>,
    /// The refresh connection (the backend's heartbeats of its waiters' rows).
    refresh: tokio::sync::Mutex<Slot>,
    /// Whether the listening connection's keeper task runs.
    keeper: Mutex<bool>,
    waits: Mutex<Vec<Idle>>,
}

/// The SQL transport of one client. Clones share its connections.
#[derive(Clone)]
pub(crate) struct SqlTransport {
    shared: Arc<Shared>,
}

impl fmt::Debug for SqlTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlTransport").field("endpoint", &self.shared.endpoint).finish()
    }
}

impl SqlTransport {
    /// Opens the main connection (so a wrong address or login fails here, not at the first
    /// lock); notices go to `notices`. `CONNECTION` if the server cannot be reached in the
    /// connect timeout, `AUTHENTICATION` if it refuses the login.
    pub(crate) async fn connect(
        endpoint: Endpoint,
        schema: Schema,
        notices: mpsc::UnboundedSender<SqlNotice>,
    ) -> crate::error::Result<SqlTransport> {
        let conn = DbConn::open(&endpoint, None).await.map_err(|f| connect_error(f, &endpoint))?;
        let main = Slot { conn: Some(conn), opened: 1, busy: false };
        let shared = Shared {
            endpoint,
            schema,
            notices,
            main: tokio::sync::Mutex::new(main),
            listen: tokio::sync::Mutex::new(Slot::default()),
            refresh: tokio::sync::Mutex::new(Slot::default()),
            keeper: Mutex::new(false),
            waits: Mutex::new(Vec::new()),
        };
        Ok(SqlTransport { shared: Arc::new(shared) })
    }

    /// The dialect of the server.
    #[cfg(test)]
    pub(crate) fn dialect(&self) -> Dialect {
        self.shared.endpoint.dialect
    }

    /// Runs `batch` on the connection it names. A batch takes its place in the main
    /// connection's line when its future is first polled (the driver polls them in the order it
    /// made them).
    #[cfg(test)]
    pub(crate) fn execute(&self, batch: Batch) -> BoxFuture<'static, BatchResult> {
        self.execute_within(batch, None)
    }

    /// Runs `batch`; a Wait batch within `wait` plus the response timeout (without `wait`:
    /// its largest numeric parameter, see [`wait_limit`]).
    fn execute_within(&self, batch: Batch, wait: Option<Duration>) -> BoxFuture<'static, BatchResult> {
        let shared = self.shared.clone();
        async move {
            match batch.conn {
                Conn::Main | Conn::Refresh => on_slot(&shared, batch.conn, &batch.statements).await,
                Conn::Listen => {
                    if shared.endpoint.dialect != Dialect::Postgres {
                        return Err(SqlFailure::Other(Error::invalid("a Listen batch on MySQL/MariaDB (only PostgreSQL listens)")));
                    }
                    let r = on_slot(&shared, Conn::Listen, &batch.statements).await;
                    start_keeper(&shared);
                    r
                }
                Conn::Wait => {
                    let response = shared.endpoint.response_timeout;
                    let limit = wait.map_or_else(|| wait_limit(&batch.statements, response), |w| w + response);
                    on_wait(&shared, &batch.statements, limit).await
                }
            }
        }
        .boxed()
    }
}

impl Transport for SqlTransport {
    type Backend = SqlBackend;
    type Push = SqlNotice;

    /// Renders the operation in the server's dialect, runs it and parses its rows (all three
    /// the core's: `SqlOp::render` / `parse`). A doorbell wait is bounded by its own wait plus
    /// the response timeout.
    fn perform(&self, SqlRequest { id, op }: SqlRequest) -> ReplyFuture<SqlBackend> {
        let batch = op.render(&self.shared.schema);
        let wait = match &op {
            SqlOp::WaitDoorbell { timeout_secs, .. } => Some(Duration::from_secs(*timeout_secs)),
            _ => None,
        };
        let running = self.execute_within(batch, wait);
        async move { (id, running.await.and_then(|rows| op.parse(rows))) }.boxed()
    }

    fn push(engine: &mut LockEngine<SqlBackend>, now: Instant, push: SqlNotice) {
        engine.handle_notice(now, push);
    }
}

/// Runs `statements` on the Main, Listen or Refresh slot, opening its connection if it has
/// none.
async fn on_slot(shared: &Arc<Shared>, which: Conn, statements: &[Statement]) -> BatchResult {
    let slot = match which {
        Conn::Listen => &shared.listen,
        Conn::Refresh => &shared.refresh,
        _ => &shared.main,
    };
    let mut slot = slot.lock().await;
    if slot.busy || slot.conn.as_ref().is_some_and(DbConn::is_closed) {
        if let Some(c) = slot.conn.take() {
            c.close();
        }
    }
    if slot.conn.is_none() {
        open_into(shared, which, &mut slot).await?;
    }
    let limit = shared.endpoint.response_timeout;
    slot.busy = true;
    let conn = slot.conn.as_mut().expect("opened above");
    let result = match tokio::time::timeout(limit, conn.run(statements)).await {
        Ok(r) => r,
        Err(_) => Err(SqlFailure::ConnectionLost(format!(
            "no reply from {} within the response timeout ({limit:?})",
            shared.endpoint.shown()
        ))),
    };
    slot.busy = false;
    if matches!(result, Err(SqlFailure::ConnectionLost(_))) {
        if let Some(c) = slot.conn.take() {
            c.close();
        }
    }
    result
}

/// Opens the connection of an empty slot; a replacement pushes `Reconnected` first.
async fn open_into(shared: &Arc<Shared>, which: Conn, slot: &mut Slot) -> Result<(), SqlFailure> {
    let notices = (which == Conn::Listen).then_some(&shared.notices);
    let conn = DbConn::open(&shared.endpoint, notices).await?;
    if slot.opened > 0 {
        let _ = shared.notices.send(SqlNotice::Reconnected { conn: which });
    }
    slot.opened += 1;
    slot.conn = Some(conn);
    slot.busy = false;
    if which == Conn::Main {
        // The server may have restarted: idle wait connections are likely dead too.
        shared.waits.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    Ok(())
}

/// Starts the listening connection's keeper once: it replaces the connection as soon as it
/// drops or stops answering pings, and ends with the transport.
fn start_keeper(shared: &Arc<Shared>) {
    {
        let mut running = shared.keeper.lock().unwrap_or_else(|p| p.into_inner());
        if *running {
            return;
        }
        *running = true;
    }
    let weak = Arc::downgrade(shared);
    tokio::spawn(keep_listening(weak));
}

async fn keep_listening(weak: Weak<Shared>) {
    loop {
        // Wait for the connection to drop, or for the next ping.
        let closed = {
            let Some(shared) = weak.upgrade() else { return };
            let slot = shared.listen.lock().await;
            match &slot.conn {
                Some(DbConn::Pg(c)) => Some(c.closed()),
                _ => None,
            }
        };
        let dropped = match closed {
            Some(closed) => tokio::time::timeout(PING_INTERVAL, closed).await.is_ok(),
            None => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                true
            }
        };
        let Some(shared) = weak.upgrade() else { return };
        let mut slot = shared.listen.lock().await;
        let healthy = match (&mut slot.conn, dropped) {
            (Some(conn), false) => {
                let limit = shared.endpoint.response_timeout;
                let ping = Statement { sql: "SELECT 1".into(), params: vec![] };
                matches!(tokio::time::timeout(limit, conn.run(std::slice::from_ref(&ping))).await, Ok(Ok(_)))
            }
            // No connection (a batch failed and closed it): open one.
            _ => false,
        };
        if healthy {
            continue;
        }
        if let Some(c) = slot.conn.take() {
            c.close();
        }
        // Open the replacement now (its Reconnected makes the backend listen again); if the
        // server cannot be reached, try again in a second.
        if open_into(&shared, Conn::Listen, &mut slot).await.is_err() {
            drop(slot);
            drop(shared);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Runs a wait batch on an idle wait connection (or a new one), bounded by [`wait_limit`].
async fn on_wait(shared: &Arc<Shared>, statements: &[Statement], limit: Duration) -> BatchResult {
    let idle = {
        let mut waits = shared.waits.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        waits.retain(|i| now.duration_since(i.since) < WAIT_IDLE_LIMIT);
        waits.pop()
    };
    let mut conn = match idle {
        Some(i) if !i.conn.is_closed() => i.conn,
        _ => DbConn::open(&shared.endpoint, None).await?,
    };
    let result = match tokio::time::timeout(limit, conn.run(statements)).await {
        Ok(r) => r,
        Err(_) => Err(SqlFailure::ConnectionLost(format!(
            "no reply to a wait from {} within its wait and the response timeout ({limit:?})",
            shared.endpoint.shown()
        ))),
    };
    match &result {
        Err(SqlFailure::ConnectionLost(_)) => conn.close(),
        _ => {
            let mut waits = shared.waits.lock().unwrap_or_else(|p| p.into_inner());
            if waits.len() < MAX_WAIT_CONNECTIONS {
                waits.push(Idle { conn, since: tokio::time::Instant::now() });
            } else {
                conn.close();
            }
        }
    }
    result
}

/// How long a wait batch may take: the longest wait it asks the server for plus the response
/// timeout. A wait batch carries its wait as a numeric parameter in seconds (`GET_LOCK(?, ?)`'s
/// timeout, integer or decimal text), so the largest numeric parameter is its wait.
pub(crate) fn wait_limit(statements: &[Statement], response_timeout: Duration) -> Duration {
    let secs = statements
        .iter()
        .flat_map(|s| &s.params)
        .filter_map(|v| match v {
            Value::Int(i) => Some(*i as f64),
            Value::Text(t) => t.trim().parse::<f64>().ok(),
            Value::Null => None,
        })
        .filter(|s| s.is_finite() && *s > 0.0)
        .fold(0.0, f64::max);
    Duration::from_secs_f64(secs.min(1.0e6)) + response_timeout
}

/// A failure to connect as the error `connect` returns, through the one formatter
/// ([`crate::connect::failure`]): the server (user, host and port; never the password) and what
/// it answered. A database that does not exist is `INVALID_ARGUMENT` and a refused privilege
/// `AUTHENTICATION`, neither retryable: only a server that is down, busy or full (too many
/// connections, starting up) is worth another try.
pub(crate) fn connect_error(failure: SqlFailure, endpoint: &Endpoint) -> Error {
    let target = endpoint.shown();
    // The dialects' messages start with "connecting on <target>: ".
    let prefix = format!("connecting on {target}: ");
    let said = |m: &str| m.strip_prefix(&prefix).unwrap_or(m).to_string();
    let (kind, answered) = match failure {
        SqlFailure::ConnectionLost(why) => (ErrorKind::Connection, said(&why)),
        SqlFailure::Server { code, message } => {
            let kind = match code.as_str() {
                // PostgreSQL invalid_catalog_name, MySQL ER_BAD_DB_ERROR.
                "3D000" | "1049" => ErrorKind::InvalidArgument,
                // insufficient_privilege, ER_DBACCESS_DENIED_ERROR.
                "42501" | "1044" => ErrorKind::Authentication,
                _ => ErrorKind::Connection,
            };
            let what = if kind == ErrorKind::InvalidArgument { "the database does not exist" } else { "the server refused the connection" };
            (kind, format!("{what} ({code}): {}", endpoint.scrub(&message)))
        }
        SqlFailure::Other(e) => (e.kind(), said(e.message())),
    };
    crate::connect::failure::connect_failed(kind, &target, &answered)
}

/// Whether `sql` opens a transaction (`BEGIN`, `START TRANSACTION`).
fn begins_transaction(sql: &str) -> bool {
    let words: Vec<String> = sql.split_whitespace().take(2).map(|w| w.trim_end_matches(';').to_ascii_uppercase()).collect();
    matches!(words.first().map(String::as_str), Some("BEGIN")) || words == ["START", "TRANSACTION"]
}

/// The rows of one statement (`affected` for a change).
fn rows(affected: u64, rows: Vec<Vec<Value>>) -> Rows {
    Rows { affected, rows }
}
