//! The Redlock backend's requests and replies ([`crate::backend::redlock`]) as [`Data`], and what a
//! Redis transport opens, so a transport in another language (the Node binding's
//! `lib/transport/redis.js`) performs them without a rule of its own. The forms:
//!
//! - request: `{ id, master, command: [name, ...args] }`: one command for the master of that
//!   index (0-based, in the URL's order); the arguments are strings (bytes where not UTF-8).
//!   Requests to one master are sent in emission order on one connection.
//! - reply: the command's Redis reply: a string or bytes (bulk and status replies), an integer,
//!   null, or a list of replies; a server's error reply as `{ error: message }` (it stays a
//!   reply: `NOSCRIPT` is the engine's to handle; refused credentials fail the request).
//!   Anything else is a `PROTOCOL` failure of the request.
//! - notice: none (masters push nothing).
//!
//! [`plan`] is the plan of every Redis-protocol URL (one server, a cluster, Redlock masters),
//! so a binding that drives the Redis engines through typed requests opens them the same way.

use crate::data::{Connected, Data, DataBackend};
use crate::connect::{Backend, ClientOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::random::RandomSource;
use super::scripts;
use crate::backend::redis::reply::Reply;
use crate::backend::redlock::{NodeRequest, RedlockBackend, RedlockEngine};

/// How deeply a reply may nest (Redlock's scripts answer two levels at most).
const MAX_DEPTH: usize = 8;

impl DataBackend for RedlockBackend {
    fn request_data(request: &NodeRequest) -> Data {
        request_data(request)
    }

    /// A master's client failure reads as one Redis server's (a refused login is AUTHENTICATION).
    fn transport_error(message: &str, server_reply: bool) -> Error {
        crate::backend::redis::data::transport_error(message, server_reply)
    }

    fn reply_from_data(reply: &Data) -> Result<Reply> {
        reply_from_data(reply)
    }

    fn reply_from_error(error: Error) -> Result<Reply> {
        Err(error)
    }

    fn notice_from_data(_notice: &Data) -> Option<std::convert::Infallible> {
        None
    }
}

/// The Redlock engine of a `redlock://` client and its transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let engine = RedlockEngine::new(options.redlock_config()?, rng)?;
    Ok(Connected { engine: Box::new(engine), plan: plan(options)? })
}

/// A request as data.
pub fn request_data(r: &NodeRequest) -> Data {
    let arg = |a: &Vec<u8>| match std::str::from_utf8(a) {
        Ok(s) => Data::from(s),
        Err(_) => Data::Bytes(a.clone()),
    };
    Data::map([
        ("id", r.id.0.into()),
        ("master", (r.master as u64).into()),
        ("command", Data::List(r.command.0.iter().map(arg).collect())),
    ])
}

/// A transport's reply as the engine's: see the module documentation for the form.
pub fn reply_from_data(d: &Data) -> Result<Reply> {
    if let Some(message) = d.get("error") {
        let message = message.as_str().unwrap_or("(an error reply without a message)");
        // Refused credentials fail the request (never retried) instead of counting as the
        // master's answer.
        if crate::backend::redis::reply::is_auth_refused(message) {
            return Err(Error::new(ErrorKind::Authentication, message));
        }
        return Ok(Reply::Error(message.to_string()));
    }
    reply_at(d, 0).map_err(|why| Error::protocol(format!("the Redis transport's reply: {why}")))
}

fn reply_at(d: &Data, depth: usize) -> Result<Reply, String> {
    Ok(match d {
        Data::Null => Reply::Nil,
        Data::Int(n) => Reply::Int(*n),
        Data::Str(s) => Reply::Data(s.clone().into_bytes()),
        Data::Bytes(b) => Reply::Data(b.clone()),
        Data::List(_) if depth >= MAX_DEPTH => return Err("a reply nested too deeply".into()),
        Data::List(items) => Reply::Array(items.iter().map(|x| reply_at(x, depth + 1)).collect::<Result<_, _>>()?),
        other => return Err(format!("{} is no Redis reply", other.kind())),
    })
}

/// What a Redis transport opens for a Redis-protocol client (`redis://`, `redis+cluster://`,
/// `redlock://`, their TLS forms): `{ transport: 'redis', backend, servers, connectTimeoutMs,
/// commandTimeoutMs, tlsCaPem?, scripts? }`. `servers` holds each server as the URL names it
/// (`host`, `port`, `username`, `password`, `tls`, `db`, `identity`: `host:port/db`, `redacted`:
/// the URL with its password as `***`); `tlsCaPem` the certificate(s) TLS connections trust;
/// `scripts` (Redlock) the Lua sources to `SCRIPT LOAD` on each master when its connection
/// becomes ready: only an optimisation, since the engine handles `NOSCRIPT` itself, sparing a
/// fresh master the one attempt it would otherwise sit out.
pub fn plan(options: &ClientOptions) -> Result<Data> {
    let mut plan = crate::backend::redis::data::plan_fields(options)?;
    let backend = options.backend()?;
    if backend == Backend::Redlock {
        plan.push(("scripts", Data::List(scripts::all().iter().map(|s| s.source.into()).collect())));
    }
    Ok(Data::map(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;
    use crate::backend::redis::Command;

    #[test]
    fn requests_name_the_master_and_the_command() {
        let command = Command(vec![b"EVALSHA".to_vec(), b"abc".to_vec(), vec![0xff]]);
        let d = request_data(&NodeRequest { id: RequestId(4), master: 2, command });
        assert_eq!((d.int_field("", "id"), d.int_field("", "master")), (Ok(4), Ok(2)));
        let command = d.get("command").and_then(Data::as_list).unwrap();
        assert_eq!(command, [Data::from("EVALSHA"), Data::from("abc"), Data::Bytes(vec![0xff])]);
    }

    #[test]
    fn replies_errors_and_nonsense() {
        let list = Data::List(vec![Data::Int(-2), Data::from("5")]);
        assert_eq!(reply_from_data(&list), Ok(Reply::Array(vec![Reply::Int(-2), Reply::Data(b"5".to_vec())])));
        assert_eq!(reply_from_data(&Data::Null), Ok(Reply::Nil));
        let noscript = Data::map([("error", "NOSCRIPT No matching script".into())]);
        assert!(reply_from_data(&noscript).unwrap().is_noscript());
        let refused = Data::map([("error", "NOAUTH Authentication required.".into())]);
        assert_eq!(reply_from_data(&refused).unwrap_err().kind(), ErrorKind::Authentication);
        for bad in [Data::Bool(true), Data::map([("x", 1i64.into())]), Data::List(vec![Data::Bool(false)])] {
            assert_eq!(reply_from_data(&bad).unwrap_err().kind(), ErrorKind::Protocol, "{bad:?}");
        }
    }

    #[test]
    fn the_plan_names_every_master_and_the_scripts() {
        let o = ClientOptions::new("redlock://u:pw@a:1,b:2,c");
        let p = plan(&o).unwrap();
        assert_eq!((p.str_field("", "transport"), p.str_field("", "backend")), (Ok("redis"), Ok("redlock")));
        let servers = p.get("servers").and_then(Data::as_list).unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(servers[2].int_field("", "port"), Ok(6379));
        assert_eq!(servers[0].str_field("", "password"), Ok("pw"));
        assert_eq!(servers[0].str_field("", "redacted"), Ok("redis://u:***@a:1"));
        assert_eq!(p.get("scripts").and_then(Data::as_list).map(<[Data]>::len), Some(4));
        let single = plan(&ClientOptions::new("redis://a:1/2")).unwrap();
        assert_eq!(single.get("scripts"), None);
        assert_eq!(single.get("servers").and_then(Data::as_list).unwrap()[0].int_field("", "db"), Ok(2));
    }
}
