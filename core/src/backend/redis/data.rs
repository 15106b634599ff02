//! The Redis backends' requests, replies and notices ([`crate::backend::redis`], one server or a Cluster)
//! as [`Data`], what a Redis transport opens, and what the failures of a Redis client library
//! mean, so a transport in another language (the Node binding's `lib/transport/redis.js`)
//! performs them without a rule of its own. The forms:
//!
//! - request: `{ id, commands: [[name, ...args], ...] }`: a pipeline, sent in order on the
//!   command connection (a Cluster's one command per request); the arguments are strings
//!   (bytes where not UTF-8). `{ id, subscribe: channel }`: subscribe the notification
//!   connection to `channel`. On a Cluster, for a listing (PROTOCOL.md §16): `{ id, masters:
//!   true }`, answered with every master's address `host:port` (as the transport routes to it,
//!   from its own view of the slots: ioredis's `nodes('master')`), any order; `{ id, node,
//!   commands }`, a pipeline sent to the node at address `node` (one the masters were answered
//!   with), answered as a pipeline is.
//! - reply: a pipeline's replies as a list, one per command: a string or bytes (bulk and status
//!   replies), an integer, null, or a list of replies; a server's error reply as `{ error:
//!   message }` (it stays in place: `NOSCRIPT` is the engine's to handle), except that refused
//!   credentials and an unavailable server fail the whole request. A subscription: `[]` once
//!   the server confirmed it.
//! - notice: `{ channel, payload }` (strings or bytes), a message on a subscribed channel.
//!
//! The engine also speaks RESP bytes on a binding's own command connection
//! ([`WiredEngine`](super::wire::WiredEngine)).

use crate::connect::{Backend, ClientOptions};
use crate::data::{Connected, Data, DataBackend};
use crate::error::{Error, ErrorKind, Result};
use crate::random::RandomSource;
use crate::time::Duration;

use super::reply::{self, request_level, Reply};
use super::{Command, Engine, EngineConfig, RedisBackend, Request, RequestKind};

/// How deeply a reply may nest (lockgate's scripts answer two levels at most).
const MAX_DEPTH: usize = 32;

impl DataBackend for RedisBackend {
    fn request_data(request: &Request) -> Data {
        request_data(request)
    }

    fn reply_from_data(reply: &Data) -> Result<Vec<Reply>> {
        reply_from_data(reply)
    }

    fn reply_from_error(error: Error) -> Result<Vec<Reply>> {
        Err(error)
    }

    fn notice_from_data(notice: &Data) -> Option<(&[u8], &[u8])> {
        Some((notice.get("channel")?.as_bytes()?, notice.get("payload")?.as_bytes()?))
    }

    fn transport_error(message: &str, server_reply: bool) -> Error {
        transport_error(message, server_reply)
    }
}

/// The Redis engine of a `redis://` or `redis+cluster://` client (a Cluster's calls one per
/// request), with its RESP wire, and its transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let cluster = options.backend()? == Backend::RedisCluster;
    // A cluster has database 0 only (SELECT is refused there).
    if cluster && options.target()?.servers()[0].endpoint().db != 0 {
        return Err(Error::invalid("a Redis Cluster has only database 0: remove the database from the URL"));
    }
    let config = EngineConfig {
        key_prefix: options.key_prefix.clone(),
        replica_acks: options.replica_acks,
        split_pipelines: cluster,
        label: options.label(),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, rng)?;
    Ok(Connected { engine: Box::new(super::wire::WiredEngine::new(engine)), plan: plan(options)? })
}

/// A byte string as data: a string where it is UTF-8 (all of lockgate's are), else bytes.
fn text(bytes: &[u8]) -> Data {
    match std::str::from_utf8(bytes) {
        Ok(s) => Data::from(s),
        Err(_) => Data::Bytes(bytes.to_vec()),
    }
}

/// A request as data.
pub fn request_data(r: &Request) -> Data {
    let command = |c: &Command| Data::List(c.0.iter().map(|a| text(a)).collect());
    match &r.kind {
        RequestKind::Pipeline(commands) => {
            Data::map([("id", r.id.0.into()), ("commands", Data::List(commands.iter().map(command).collect()))])
        }
        RequestKind::Subscribe(channel) => Data::map([("id", r.id.0.into()), ("subscribe", channel.as_str().into())]),
        RequestKind::Masters => Data::map([("id", r.id.0.into()), ("masters", true.into())]),
        RequestKind::OnNode { node, commands } => Data::map([
            ("id", r.id.0.into()),
            ("node", node.as_str().into()),
            ("commands", Data::List(commands.iter().map(command).collect())),
        ]),
    }
}

/// A transport's reply as the engine's: see the module documentation for the form.
pub fn reply_from_data(d: &Data) -> Result<Vec<Reply>> {
    let Some(items) = d.as_list() else {
        return Err(Error::protocol(format!("the Redis transport's reply must be a list, got {}", d.kind())));
    };
    let replies: Vec<Reply> = items.iter().map(|x| reply_at(x, 0)).collect();
    for r in &replies {
        if let Reply::Error(message) = r {
            if let Some(kind) = request_level(message) {
                return Err(Error::new(kind, message.clone()));
            }
        }
    }
    Ok(replies)
}

fn reply_at(d: &Data, depth: usize) -> Reply {
    match d {
        Data::Null => Reply::Nil,
        Data::Int(n) => Reply::Int(*n),
        Data::Str(s) => Reply::Data(s.clone().into_bytes()),
        Data::Bytes(b) => Reply::Data(b.clone()),
        Data::List(_) if depth >= MAX_DEPTH => Reply::Other("array nested too deeply".into()),
        Data::List(items) => Reply::Array(items.iter().map(|x| reply_at(x, depth + 1)).collect()),
        Data::Map(_) => match d.get("error") {
            Some(message) => Reply::Error(message.as_str().unwrap_or("(an error reply without a message)").into()),
            None => Reply::Other("map".into()),
        },
        other => Reply::Other(other.kind().into()),
    }
}

/// What a Redis client's failure means: a server's error reply (`server_reply`, e.g. to a
/// handshake's `AUTH`) by its code ([`request_level`], else `PROTOCOL`); any other failure
/// (refused connection, closed socket, timeout) `CONNECTION`, or `AUTHENTICATION` where the
/// client's message names a refused credential.
pub fn transport_error(message: &str, server_reply: bool) -> Error {
    let kind = if server_reply {
        request_level(message).unwrap_or(ErrorKind::Protocol)
    } else if reply::mentions_auth_refused(message) {
        ErrorKind::Authentication
    } else {
        ErrorKind::Connection
    };
    Error::new(kind, message)
}

/// What a Redis transport opens for a single server or a Cluster: `{ transport: 'redis',
/// backend, servers, connectTimeoutMs, commandTimeoutMs, tlsCaPem? }`. `servers` holds the
/// server (a Cluster's seed node) as the URL names it (`host`, `port`, `username`, `password`,
/// `tls`, `db`, `identity`: `host:port/db`, `redacted`: the URL with its password as `***`);
/// `tlsCaPem` the certificate(s) TLS connections trust.
pub fn plan(options: &ClientOptions) -> Result<Data> {
    plan_fields(options).map(Data::map)
}

/// The fields of [`plan`], for a plan that adds its own (Redlock's scripts).
pub(crate) fn plan_fields(options: &ClientOptions) -> Result<Vec<(&'static str, Data)>> {
    let (target, backend) = (options.target()?, options.backend()?);
    let servers = target.servers().iter().map(|s| {
        let e = s.endpoint();
        Data::map([
            ("host", e.host.into()),
            ("port", i64::from(e.port).into()),
            ("username", e.username.into()),
            ("password", e.password.into()),
            ("tls", e.tls.into()),
            ("db", i64::from(e.db).into()),
            ("identity", s.identity().into()),
            ("redacted", s.to_string().into()),
        ])
    });
    let mut plan = vec![
        ("transport", "redis".into()),
        ("backend", backend.scheme(false).into()),
        ("servers", Data::List(servers.collect())),
        ("connectTimeoutMs", millis(options.connect_timeout)),
        ("commandTimeoutMs", millis(options.response_timeout)),
    ];
    if let Some(pem) = &options.tls_ca_pem {
        plan.push(("tlsCaPem", String::from_utf8_lossy(pem).into_owned().into()));
    }
    Ok(plan)
}

/// Whole milliseconds, rounded up (a timeout is never shortened).
fn millis(d: Duration) -> Data {
    Data::from(u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;

    #[test]
    fn requests_are_pipelines_or_subscriptions() {
        let commands = vec![Command(vec![b"EVALSHA".to_vec(), vec![0xff]]), Command(vec![b"PING".to_vec()])];
        let d = request_data(&Request { id: RequestId(3), kind: RequestKind::Pipeline(commands) });
        assert_eq!(d.int_field("", "id"), Ok(3));
        let commands = d.get("commands").and_then(Data::as_list).unwrap();
        assert_eq!(commands[0], Data::List(vec![Data::from("EVALSHA"), Data::Bytes(vec![0xff])]));
        assert_eq!(commands[1], Data::List(vec![Data::from("PING")]));
        let d = request_data(&Request { id: RequestId(4), kind: RequestKind::Subscribe("ch".into()) });
        assert_eq!((d.int_field("", "id"), d.str_field("", "subscribe")), (Ok(4), Ok("ch")));
        let d = request_data(&Request { id: RequestId(5), kind: RequestKind::Masters });
        assert_eq!(d.get("masters"), Some(&Data::Bool(true)));
        let on = RequestKind::OnNode { node: "127.0.0.1:7000".into(), commands: vec![Command(vec![b"SCAN".to_vec()])] };
        let d = request_data(&Request { id: RequestId(6), kind: on });
        assert_eq!(d.str_field("", "node"), Ok("127.0.0.1:7000"));
        assert_eq!(d.get("commands").and_then(Data::as_list).map(<[Data]>::len), Some(1));
    }

    #[test]
    fn replies_stay_in_place_unless_the_request_fails() {
        let noscript = Data::map([("error", "NOSCRIPT No matching script".into())]);
        let d = Data::List(vec![Data::Int(1), Data::Null, Data::from("ab"), Data::List(vec![Data::Int(0)]), noscript]);
        let replies = reply_from_data(&d).unwrap();
        assert_eq!(replies[..4], [Reply::Int(1), Reply::Nil, Reply::Data(b"ab".to_vec()), Reply::Array(vec![Reply::Int(0)])]);
        assert!(replies[4].is_noscript());
        assert_eq!(reply_from_data(&Data::List(Vec::new())), Ok(Vec::new()), "a confirmed subscription");
        let refused = Data::List(vec![Data::Int(1), Data::map([("error", "WRONGPASS invalid".into())])]);
        assert_eq!(reply_from_data(&refused).unwrap_err().kind(), ErrorKind::Authentication);
        let loading = Data::List(vec![Data::map([("error", "LOADING Redis is loading".into())])]);
        assert_eq!(reply_from_data(&loading).unwrap_err().kind(), ErrorKind::Connection);
        assert_eq!(reply_from_data(&Data::Int(1)).unwrap_err().kind(), ErrorKind::Protocol);
        assert!(matches!(reply_from_data(&Data::List(vec![Data::Bool(true)])).unwrap()[0], Reply::Other(_)));
    }

    #[test]
    fn notices_and_client_failures() {
        let n = Data::map([("channel", "c".into()), ("payload", Data::Bytes(b"p".to_vec()))]);
        assert_eq!(RedisBackend::notice_from_data(&n), Some((&b"c"[..], &b"p"[..])));
        assert_eq!(RedisBackend::notice_from_data(&Data::map([("channel", "c".into())])), None);
        assert_eq!(transport_error("NOAUTH Authentication required.", true).kind(), ErrorKind::Authentication);
        assert_eq!(transport_error("ERR DB index is out of range", true).kind(), ErrorKind::Protocol);
        assert_eq!(transport_error("Reached the max retries: WRONGPASS", false).kind(), ErrorKind::Authentication);
        assert_eq!(transport_error("connect ECONNREFUSED", false).kind(), ErrorKind::Connection);
    }

    #[test]
    fn the_plan_names_the_server_and_a_cluster_has_database_0_only() {
        let p = plan(&ClientOptions::new("redis://u:pw@a:1/2")).unwrap();
        assert_eq!((p.str_field("", "transport"), p.str_field("", "backend")), (Ok("redis"), Ok("redis")));
        let server = &p.get("servers").and_then(Data::as_list).unwrap()[0];
        assert_eq!((server.int_field("", "db"), server.str_field("", "redacted")), (Ok(2), Ok("redis://u:***@a:1/2")));
        let rng = || Box::new(crate::random::OsRandom);
        assert!(connect(&ClientOptions::new("redis+cluster://a:1"), rng()).is_ok());
        let err = connect(&ClientOptions::new("redis+cluster://a:1/3"), rng()).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
}
