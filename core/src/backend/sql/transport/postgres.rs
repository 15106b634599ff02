//! One PostgreSQL connection on `tokio-postgres`: statements prepared once per connection and
//! bound by the types the server inferred for their placeholders, rows converted to [`Value`]s,
//! notifications pushed, errors classified (a connection the server ended is
//! `ConnectionLost`, a refused statement its SQLSTATE), TLS with rustls (see [`tls`]).

use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;

use futures_util::{pin_mut, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_postgres as pg;
use tokio_postgres::types::{private::BytesMut, FromSql, IsNull, ToSql, Type};

use super::{rows, Endpoint, TlsMode};
use crate::error::{Error, ErrorKind};
use crate::backend::sql::{Rows, SqlFailure, SqlNotice, Statement, Value};

/// How many prepared statements a connection keeps (the backend renders a small fixed set; the
/// cap only guards against a caller that renders unboundedly many).
const STATEMENT_CACHE: usize = 256;

/// An open connection; dropping it ends the task that drives it (and so the connection).
pub(super) struct PgConn {
    client: pg::Client,
    statements: HashMap<String, pg::Statement>,
    task: tokio::task::JoinHandle<()>,
    /// Closed (its sender dropped) when the connection has ended.
    ended: watch::Receiver<()>,
    endpoint: Endpoint,
}

impl Drop for PgConn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PgConn {
    /// Connects and logs in; notifications go to `notices` if given.
    pub(super) async fn open(endpoint: &Endpoint, notices: Option<mpsc::UnboundedSender<SqlNotice>>) -> Result<PgConn, SqlFailure> {
        let mut config = pg::Config::new();
        config
            .host(&endpoint.host)
            .port(endpoint.port)
            .user(&endpoint.user)
            .application_name(endpoint.application_name.as_deref().unwrap_or("lockgate"))
            .connect_timeout(endpoint.connect_timeout)
            // A connection whose sent data goes unacknowledged, or whose peer vanished, is given
            // up by the kernel; a server that acknowledges but never answers is the response
            // timeout's.
            .tcp_user_timeout(endpoint.response_timeout.max(crate::time::Duration::from_secs(1)))
            .keepalives(true)
            .keepalives_idle(crate::time::Duration::from_secs(5))
            .keepalives_interval(crate::time::Duration::from_secs(2))
            .keepalives_retries(3);
        for (host, port) in &endpoint.others {
            config.host(host).port(*port);
        }
        if let Some(p) = &endpoint.password {
            config.password(p.as_bytes());
        }
        if let Some(db) = &endpoint.database {
            config.dbname(db);
        }
        config.ssl_mode(match endpoint.tls {
            TlsMode::Off => pg::config::SslMode::Disable,
            TlsMode::Prefer => pg::config::SslMode::Prefer,
            _ => pg::config::SslMode::Require,
        });
        let connector = tls::connector(endpoint).map_err(SqlFailure::Other)?;
        let (client, mut connection) = config.connect(connector).await.map_err(|e| failure(&e, true, "connecting", endpoint))?;
        let (end, ended) = watch::channel(());
        let task = tokio::spawn(async move {
            let _end = end;
            let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            pin_mut!(messages);
            while let Some(Ok(message)) = messages.next().await {
                if let (pg::AsyncMessage::Notification(n), Some(tx)) = (message, &notices) {
                    let _ = tx.send(SqlNotice::Notified { channel: n.channel().to_string(), payload: n.payload().to_string() });
                }
            }
        });
        Ok(PgConn { client, statements: HashMap::new(), task, ended, endpoint: endpoint.clone() })
    }

    /// Whether the connection has ended.
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed() || self.task.is_finished()
    }

    /// Resolves when the connection ends.
    pub(super) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut ended = self.ended.clone();
        async move { while ended.changed().await.is_ok() {} }
    }

    /// Runs one statement.
    pub(super) async fn run(&mut self, statement: &Statement) -> Result<Rows, SqlFailure> {
        let what = describe(&statement.sql);
        let prepared = match self.statements.get(&statement.sql) {
            Some(p) => p.clone(),
            None => {
                let p = self.client.prepare(&statement.sql).await.map_err(|e| self.failure(&e, &what))?;
                if self.statements.len() >= STATEMENT_CACHE {
                    self.statements.clear();
                }
                self.statements.insert(statement.sql.clone(), p.clone());
                p
            }
        };
        match self.query(&prepared, statement).await {
            Ok(r) => Ok(r),
            Err(e) => {
                // A statement the server refused may be stale (a table changed under a
                // prepared plan): prepare it again next time.
                self.statements.remove(&statement.sql);
                Err(self.failure(&e, &what))
            }
        }
    }

    /// Runs statements pipelined if every one is prepared already: each is sent before the
    /// previous one's reply is read (one round trip for the lot), and the server runs them in
    /// order, each in its own autocommit transaction with its own snapshot; every statement
    /// runs, whatever an earlier one's outcome. `None` if one is not prepared yet: preparing
    /// needs its tables to exist, which an earlier statement of the batch may be creating, so
    /// the caller runs such a batch one statement at a time (the first time only).
    pub(super) async fn run_pipelined(&mut self, statements: &[Statement]) -> Option<Vec<Result<Rows, SqlFailure>>> {
        let prepared: Vec<pg::Statement> = statements.iter().map(|s| self.statements.get(&s.sql).cloned()).collect::<Option<_>>()?;
        // `join_all` polls every query once before waiting on any: each is written to the
        // connection when first polled, so all are on the wire before the first reply.
        let replies = futures_util::future::join_all(prepared.iter().zip(statements).map(|(p, s)| self.query(p, s))).await;
        let mut out = Vec::with_capacity(replies.len());
        for (reply, statement) in replies.into_iter().zip(statements) {
            out.push(reply.map_err(|e| {
                self.statements.remove(&statement.sql);
                self.failure(&e, &describe(&statement.sql))
            }));
        }
        Some(out)
    }

    async fn query(&self, prepared: &pg::Statement, statement: &Statement) -> Result<Rows, pg::Error> {
        let params: Vec<Param<'_>> = statement.params.iter().map(Param).collect();
        let stream = self.client.query_raw(prepared, params.iter().map(|p| p as &dyn ToSql)).await?;
        pin_mut!(stream);
        let mut out = Vec::new();
        while let Some(row) = stream.next().await {
            let row = row?;
            let mut values = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                values.push(row.try_get::<_, Cell>(i)?.0);
            }
            out.push(values);
        }
        let affected = if is_query(&statement.sql) { 0 } else { stream.rows_affected().unwrap_or(0) };
        Ok(rows(affected, out))
    }

    fn failure(&self, e: &pg::Error, what: &str) -> SqlFailure {
        failure(e, self.is_closed(), what, &self.endpoint)
    }
}

/// Whether `sql` is a query (its rows are the answer; `affected` stays 0).
fn is_query(sql: &str) -> bool {
    let word: String = sql.trim_start().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    matches!(word.to_ascii_uppercase().as_str(), "SELECT" | "WITH" | "VALUES" | "SHOW" | "TABLE")
}

/// The statement's first words, for messages (statements are the backend's, never secret;
/// parameters are left out).
fn describe(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().take(4).collect();
    format!("the statement `{} ...`", words.join(" "))
}

/// The failure `e` means: `ConnectionLost` when the connection is gone (`closed`, or the
/// server said it ends it: SQLSTATE class 08, 57P01-57P03), `AUTHENTICATION` for a refused
/// login (class 28), the server's SQLSTATE for a refused statement, `Other` for the rest.
/// Messages never carry the password.
pub(super) fn failure(e: &pg::Error, closed: bool, what: &str, endpoint: &Endpoint) -> SqlFailure {
    let text = |m: &dyn std::fmt::Display| endpoint.scrub(&format!("{what} on {}: {m}", endpoint.shown()));
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        if code.starts_with("28") {
            return SqlFailure::Other(Error::new(ErrorKind::Authentication, text(&format!("the server refused the login ({code}): {}", db.message()))));
        }
        if code == "3D000" {
            // invalid_catalog_name: the URL names a database the server does not have; no
            // retry makes it appear.
            return SqlFailure::Other(Error::invalid(text(&format!("the database does not exist ({code}): {}", db.message()))));
        }
        if closed || code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03") {
            return SqlFailure::ConnectionLost(text(&format!("{} ({code})", db.message())));
        }
        return SqlFailure::Server { code: code.to_string(), message: endpoint.scrub(db.message()) };
    }
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(bad) = s.downcast_ref::<BadValue>() {
            return SqlFailure::Other(Error::invalid(text(bad)));
        }
        if let Some(bad) = s.downcast_ref::<BadColumn>() {
            return SqlFailure::Other(Error::protocol(text(bad)));
        }
        // rustls' error arrives wrapped in an `io::Error` (whose `source()` skips it).
        let tls = s.downcast_ref::<rustls::Error>().or_else(|| {
            s.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls) = tls {
            return SqlFailure::Other(Error::new(
                ErrorKind::Connection,
                text(&format!(
                    "the TLS handshake failed ({tls}); with sslmode=verify-ca or verify-full trust the CA that signed the \
                     server's certificate (the client's TLS CA option) and name the server as its certificate does"
                )),
            ));
        }
        source = s.source();
    }
    // The server asked for a password the URL does not give (tokio-postgres says only
    // "invalid configuration: password missing"): a refused login, never retried.
    if e.source().is_some_and(|s| s.to_string().contains("password missing")) {
        return SqlFailure::Other(Error::new(ErrorKind::Authentication, text(&"the server asks for a password and the URL gives none")));
    }
    if closed || e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) || e.to_string().contains("timeout") {
        return SqlFailure::ConnectionLost(text(e));
    }
    SqlFailure::Other(Error::protocol(text(e)))
}

/// A value that does not fit the type the server inferred for its placeholder.
#[derive(Debug)]
struct BadValue(String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for BadValue {}

/// A column of a type the transport cannot read (or a malformed value).
#[derive(Debug)]
struct BadColumn(String);

impl std::fmt::Display for BadColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for BadColumn {}

fn is_text(ty: &Type) -> bool {
    matches!(*ty, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON)
}

/// A parameter bound as the type the server inferred for its placeholder.
#[derive(Debug)]
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let bad = |what: &str| -> Box<dyn StdError + Sync + Send> { Box::new(BadValue(format!("cannot bind {what} to a {ty} parameter"))) };
        let int = match self.0 {
            Value::Null => return Ok(IsNull::Yes),
            Value::Int(i) => *i,
            Value::Text(t) if is_text(ty) => return t.as_str().to_sql(ty, out),
            Value::Text(t) => t.trim().parse::<i64>().map_err(|_| bad("text"))?,
        };
        match *ty {
            Type::INT8 => int.to_sql(ty, out),
            Type::INT4 => i32::try_from(int).map_err(|_| bad("an integer out of range"))?.to_sql(ty, out),
            Type::INT2 => i16::try_from(int).map_err(|_| bad("an integer out of range"))?.to_sql(ty, out),
            Type::FLOAT8 => (int as f64).to_sql(ty, out),
            Type::BOOL => (int != 0).to_sql(ty, out),
            _ if is_text(ty) => int.to_string().as_str().to_sql(ty, out),
            _ => Err(bad("an integer")),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A column value read as the contract's [`Value`].
struct Cell(Value);

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        let v = match *ty {
            Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::OID => Value::Int(u32::from_sql(ty, raw)?.into()),
            Type::BOOL => Value::Text(bool::from_sql(ty, raw)?.to_string()),
            Type::FLOAT4 => Value::Text(f32::from_sql(ty, raw)?.to_string()),
            Type::FLOAT8 => Value::Text(f64::from_sql(ty, raw)?.to_string()),
            Type::NUMERIC => Value::Text(numeric_text(raw).ok_or_else(|| BadColumn("a malformed NUMERIC".into()))?),
            Type::JSONB => Value::Text(String::from_utf8_lossy(raw.get(1..).unwrap_or_default()).into_owned()),
            _ if is_text(ty) => Value::Text(String::from_utf8_lossy(raw).into_owned()),
            // `SELECT pg_notify(..)` and other functions returning nothing.
            Type::VOID => Value::Null,
            _ => return Err(Box::new(BadColumn(format!("a column of type {ty} (the transport reads integers, text, booleans, floats and numerics)")))),
        };
        Ok(Cell(v))
    }

    fn from_sql_null(_: &Type) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(Cell(Value::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// PostgreSQL's binary NUMERIC as decimal text (`-12.50`, `NaN`, `Infinity`).
fn numeric_text(raw: &[u8]) -> Option<String> {
    let word = |i: usize| raw.get(i * 2..i * 2 + 2).map(|b| i16::from_be_bytes([b[0], b[1]]));
    let (ndigits, weight, sign, dscale) = (word(0)? as usize, word(1)?, word(2)? as u16, word(3)? as u16 as usize);
    match sign {
        0xC000 => return Some("NaN".into()),
        0xD000 => return Some("Infinity".into()),
        0xF000 => return Some("-Infinity".into()),
        _ => {}
    }
    let digit = |g: i32| -> Option<i16> {
        if g < 0 || g as usize >= ndigits {
            Some(0)
        } else {
            word(4 + g as usize)
        }
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        for g in 0..=i32::from(weight) {
            let d = digit(g)?;
            text.push_str(&if g == 0 { d.to_string() } else { format!("{d:04}") });
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut g = i32::from(weight) + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(g)?));
            g += 1;
        }
        frac.truncate(dscale);
        text.push('.');
        text.push_str(&frac);
    }
    Some(text)
}

/// TLS for PostgreSQL connections: rustls on the build's one provider (aws-lc-rs), trusting the
/// client's CA option or the system's roots, checking as much as the mode asks (libpq's
/// meaning of `sslmode`).
mod tls {
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
    use tokio_postgres_rustls::MakeRustlsConnect;

    use super::super::{Endpoint, TlsMode};
    use crate::error::{Error, Result};

    /// The connector for `endpoint` (unused when its mode is `Off`).
    pub(super) fn connector(endpoint: &Endpoint) -> Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
        let mode = match (&endpoint.tls, &endpoint.tls_ca_pem) {
            // libpq: `require` with a CA given checks the chain as `verify-ca` does.
            (TlsMode::Require, Some(_)) => TlsMode::VerifyCa,
            (mode, _) => mode.clone(),
        };
        let config = match mode {
            TlsMode::Off | TlsMode::Prefer | TlsMode::Require => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth()
            }
            TlsMode::VerifyCa | TlsMode::VerifyFull => {
                let roots = Arc::new(roots(endpoint.tls_ca_pem.as_deref())?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
                if mode == TlsMode::VerifyFull {
                    builder.with_webpki_verifier(webpki).with_no_client_auth()
                } else {
                    builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyName(webpki))).with_no_client_auth()
                }
            }
        };
        Ok(MakeRustlsConnect::new(config))
    }

    /// The CA option's certificates, else the system's roots.
    fn roots(ca: Option<&[u8]>) -> Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            Some(pem) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| Error::invalid("the client's TLS CA option is not valid PEM"))?;
                roots.add_parsable_certificates(certs);
                if roots.is_empty() {
                    return Err(Error::invalid("the client's TLS CA option holds no usable PEM CA certificate"));
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                if roots.is_empty() {
                    return Err(Error::invalid("sslmode=verify-ca/verify-full without a CA needs the system's trusted roots, and none were found"));
                }
            }
        }
        Ok(roots)
    }

    /// `verify-ca`: the chain must be trusted; the name is not checked.
    #[derive(Debug)]
    struct AnyName(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for AnyName {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> std::result::Result<ServerCertVerified, rustls::Error> {
            match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
                Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
                | Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                    Ok(ServerCertVerified::assertion())
                }
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    /// `prefer` / `require`: encrypted, the certificate not checked (libpq's meaning); the
    /// handshake's signatures still are.
    #[derive(Debug)]
    struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

    impl ServerCertVerifier for Unchecked {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> std::result::Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn numeric(ndigits: i16, weight: i16, sign: u16, dscale: u16, digits: &[i16]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [ndigits, weight, sign as i16, dscale as i16].iter().chain(digits) {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v
    }

    #[test]
    fn numerics_become_decimal_text() {
        assert_eq!(numeric_text(&numeric(2, 1, 0, 0, &[12, 3456])).unwrap(), "123456");
        assert_eq!(numeric_text(&numeric(1, 1, 0, 0, &[12])).unwrap(), "120000");
        assert_eq!(numeric_text(&numeric(2, 0, 0x4000, 2, &[12, 5000])).unwrap(), "-12.50");
        assert_eq!(numeric_text(&numeric(1, -1, 0, 3, &[5])).unwrap(), "0.000");
        assert_eq!(numeric_text(&numeric(1, -1, 0, 5, &[5])).unwrap(), "0.00050");
        assert_eq!(numeric_text(&numeric(0, 0, 0, 0, &[])).unwrap(), "0");
        assert_eq!(numeric_text(&numeric(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
        assert!(numeric_text(&[0, 2, 0]).is_none());
        assert_eq!(Value::Text(numeric_text(&numeric(1, 0, 0, 3, &[1_700])).unwrap()).as_int(), Some(1700));
    }

    #[test]
    fn queries_have_no_affected_rows() {
        assert!(is_query("  select 1") && is_query("WITH x AS (SELECT 1) SELECT * FROM x"));
        assert!(!is_query("INSERT INTO t VALUES (1)") && !is_query("DELETE FROM t"));
        assert_eq!(describe("SELECT id,\n owner FROM lockgate_entry WHERE x = $1"), "the statement `SELECT id, owner FROM ...`");
    }
}
