//! Conversions between the `redis` crate's types and the engine's plain data.

use crate::error::{Error, ErrorKind};
use crate::redis::reply::Reply;

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
    let auth_refused = crate::redis::reply::is_auth_refused(code) || crate::redis::reply::mentions_auth_refused(&text);
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
                if e.is_connection_dropped() || crate::redis::reply::TRANSIENT_ERROR_CODES.contains(&code) {
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
