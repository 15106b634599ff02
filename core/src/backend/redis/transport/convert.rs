//! Conversions between the `redis` crate's types and the engine's plain data.

use crate::error::{Error, ErrorKind};
use crate::backend::redis::reply::Reply;

/// A `redis::Value` as an engine [`Reply`].
pub(crate) fn reply(v: redis::Value) -> Reply {
    use redis::Value as V;
    match v {
        V::Nil => Reply::Nil,
        V::Int(i) => Reply::Int(i),
        V::BulkString(b) => Reply::Data(b),
        V::Array(a) | V::Set(a) => Reply::Array(a.into_iter().map(reply).collect()),
        V::SimpleString(s) => Reply::Status(s),
        V::Okay => Reply::Status("OK".into()),
        V::VerbatimString { text, .. } => Reply::Data(text.into_bytes()),
        V::ServerError(e) => Reply::Error(match e.details() {
            Some(d) => format!("{} {d}", e.code()),
            None => e.code().to_string(),
        }),
        V::Map(_) => Reply::Other("map".into()),
        V::Double(_) => Reply::Other("double".into()),
        V::Boolean(_) => Reply::Other("boolean".into()),
        V::Attribute { .. } => Reply::Other("attribute".into()),
        V::Push { .. } => Reply::Other("push".into()),
        _ => Reply::Other("unknown".into()),
    }
}

/// A `redis` crate error as a lockgate [`Error`], with the password scrubbed out.
pub(crate) fn error(e: &redis::RedisError, scrub: impl Fn(&str) -> String) -> Error {
    use redis::ErrorKind as K;
    let code = e.code().unwrap_or("");
    let text = e.to_string();
    let auth_refused = crate::backend::redis::reply::is_auth_refused(code) || crate::backend::redis::reply::mentions_auth_refused(&text);
    let kind = if auth_refused {
        ErrorKind::Authentication
    } else {
        match e.kind() {
            K::AuthenticationFailed => ErrorKind::Authentication,
            K::InvalidClientConfig => ErrorKind::InvalidArgument,
            K::Parse | K::UnexpectedReturnType => ErrorKind::Protocol,
            K::Server(_) => {
                // Transient server states: a loading or busy server, a slot in migration, a
                // primary or (on a cluster) a slot's master that is down for now.
                if e.is_connection_dropped() || crate::backend::redis::reply::TRANSIENT_ERROR_CODES.contains(&code) {
                    ErrorKind::Connection
                } else {
                    ErrorKind::Protocol
                }
            }
            _ => ErrorKind::Connection,
        }
    };
    Error::new(kind, scrub(&text))
}

/// A failed connect to the server `url` names as a lockgate [`Error`] through the one
/// formatter ([`crate::connect::failure`]): the redacted URL and what the server answered. The
/// `redis` crate reports a refused port as a bare "Connection refused (os error 111)" and a
/// server of another kind as a RESP parse error or a broken pipe, so a plain-TCP URL is probed
/// once (a TCP connect and a `PING`, within 1 s) to say which: nothing listening
/// (`CONNECTION`), or a server that does not speak Redis (`PROTOCOL`, not retryable: an HTTP
/// status line, or a close without a reply).
pub(crate) async fn connect_error(e: &redis::RedisError, url: &crate::connect::RedisUrl) -> Error {
    use crate::connect::failure::{connect_failed, foreign_reply, io_answer};
    let converted = error(e, |m| url.scrub(m));
    if matches!(converted.kind(), ErrorKind::Authentication | ErrorKind::InvalidArgument | ErrorKind::Closed)
        || url.is_tls()
        || e.is_timeout()
    {
        return connect_failed(converted.kind(), url, converted.message());
    }
    // A refused port is already unambiguous, and a silent server (timed out above) would keep
    // the probe waiting its whole second: only the unclear failures are probed, so a
    // reconnect loop during an outage costs no extra connect per attempt.
    if e.is_connection_refusal() {
        return connect_failed(ErrorKind::Connection, url, &io_answer(&std::io::ErrorKind::ConnectionRefused.into()));
    }
    let endpoint = url.endpoint();
    let probe = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = match tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await {
            Ok(s) => s,
            Err(io) => return Some((ErrorKind::Connection, io_answer(&io))),
        };
        // A server that closes on the PING (PostgreSQL on a bad startup packet) reads as an
        // empty reply; one that resets it, too.
        let _ = sock.write_all(b"PING\r\n").await;
        let mut buf = [0u8; 128];
        let n = sock.read(&mut buf).await.unwrap_or(0);
        foreign_reply("Redis", &buf[..n]).map(|why| (ErrorKind::Protocol, why))
    };
    match tokio::time::timeout(std::time::Duration::from_secs(1), probe).await {
        Ok(Some((kind, answered))) => connect_failed(kind, url, &answered),
        // It speaks Redis (or answers nothing within 1 s): the crate's own words say more.
        _ => connect_failed(converted.kind(), url, converted.message()),
    }
}
