//! The memcached backend's requests and replies as [`Data`], and what its transport opens, so a
//! transport in another language (the Node binding's `lib/transport/memcached.js`) performs
//! them with no rule of its own. The forms:
//!
//! - request: `{ id, server, command, key?, value?, exptime?, cas? }`: `command` is `add`,
//!   `gets`, `cas` or `stats` (no key), for the server of that index (0-based, in the URL's
//!   order); `value` the
//!   owner token (a string), `exptime` whole seconds (`-1`: already expired), `cas` the cas
//!   unique as a decimal string. Requests to one server are sent in emission order.
//! - reply: `{ status }` for a store (`STORED`, `NOT_STORED`, `EXISTS`, `NOT_FOUND`); for a
//!   `gets`, `{ value, cas }` (value a string or bytes, cas a decimal string or integer) or
//!   null when the item is missing; for a `stats`, `{ uptime }` (the server's `uptime` stat,
//!   an integer or a decimal string). Anything else is a `PROTOCOL` failure of the request.
//! - notice: none (memcached pushes nothing).

use super::request::{McAnswer, McCommand, McReply, McRequest};
use super::{MemcachedBackend, MemcachedEngine};
use crate::connect::ClientOptions;
use crate::data::{Connected, Data, DataBackend};
use crate::error::{Error, Result};
use crate::random::RandomSource;
use crate::time::Duration;

impl DataBackend for MemcachedBackend {
    fn request_data(request: &McRequest) -> Data {
        request_data(request)
    }

    fn reply_from_data(reply: &Data) -> McReply {
        reply_from_data(reply).map_err(|why| Error::protocol(format!("the memcached transport's reply: {why}")))
    }

    fn reply_from_error(error: Error) -> McReply {
        Err(error)
    }

    fn notice_from_data(_notice: &Data) -> Option<std::convert::Infallible> {
        None
    }
}

/// The memcached engine of a `memcached://` client and its transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let engine = MemcachedEngine::new(options.memcached_config()?, rng)?;
    Ok(Connected { engine: Box::new(engine), plan: plan(options)? })
}

/// A request as data.
pub fn request_data(r: &McRequest) -> Data {
    let mut fields: Vec<(&str, Data)> = vec![("id", r.id.0.into()), ("server", (r.server as u64).into())];
    match &r.command {
        McCommand::Add { key, value, exptime } => {
            fields.extend([("command", "add".into()), ("key", key.as_str().into()), ("value", value.as_str().into()), ("exptime", (*exptime).into())]);
        }
        McCommand::Gets { key } => fields.extend([("command", "gets".into()), ("key", key.as_str().into())]),
        McCommand::Stats => fields.push(("command", "stats".into())),
        McCommand::Cas { key, value, exptime, cas } => fields.extend([
            ("command", "cas".into()),
            ("key", key.as_str().into()),
            ("value", value.as_str().into()),
            ("exptime", (*exptime).into()),
            ("cas", cas.to_string().into()),
        ]),
    }
    Data::map(fields)
}

/// A transport's reply as the engine's: see the module documentation for the form.
pub fn reply_from_data(d: &Data) -> Result<McAnswer, String> {
    if d.is_null() {
        return Ok(McAnswer::Miss);
    }
    if let Some(status) = d.get("status") {
        return match status.as_str() {
            Some("STORED") => Ok(McAnswer::Stored),
            Some("NOT_STORED") => Ok(McAnswer::NotStored),
            Some("EXISTS") => Ok(McAnswer::Exists),
            Some("NOT_FOUND") => Ok(McAnswer::NotFound),
            _ => Err(format!("unknown status {status:?}")),
        };
    }
    if let Some(uptime) = d.get("uptime") {
        return match uptime {
            Data::Int(n) if *n >= 0 => Ok(McAnswer::Uptime(*n as u64)),
            Data::Str(s) => s.parse::<u64>().map(McAnswer::Uptime).map_err(|_| format!("uptime {s:?} is not a number")),
            other => Err(format!("uptime {other:?} is not a number")),
        };
    }
    let value = match d.get("value") {
        Some(Data::Str(s)) => s.clone().into_bytes(),
        Some(Data::Bytes(b)) => b.clone(),
        _ => return Err(format!("{} is neither a store status, a value nor null", d.kind())),
    };
    let cas = match d.get("cas") {
        Some(Data::Str(s)) => s.parse::<u64>().map_err(|_| format!("cas {s:?} is not a number"))?,
        Some(Data::Int(n)) if *n >= 0 => *n as u64,
        _ => return Err("a value without its cas unique".into()),
    };
    Ok(McAnswer::Value { value, cas })
}

/// What the memcached transport opens: `{ transport: 'memcached', backend: 'memcached',
/// servers: [{ host, port }], connectTimeoutMs, commandTimeoutMs, redacted }` (`servers` in the
/// URL's order, which requests' `server` indexes; `commandTimeoutMs`: how long a request may
/// wait for its answer before the transport reports it lost and replaces the connection).
pub fn plan(options: &ClientOptions) -> Result<Data> {
    let target = options.target()?;
    let address = target.memcached().ok_or_else(|| Error::invalid("not a memcached:// URL"))?;
    let servers = address.hosts.iter().map(|(h, p)| Data::map([("host", h.as_str().into()), ("port", i64::from(*p).into())]));
    Ok(Data::map([
        ("transport", "memcached".into()),
        ("backend", "memcached".into()),
        ("servers", Data::List(servers.collect())),
        ("connectTimeoutMs", millis(options.connect_timeout)),
        ("commandTimeoutMs", millis(options.response_timeout)),
        ("redacted", address.shown().into()),
    ]))
}

fn millis(d: Duration) -> Data {
    Data::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;

    #[test]
    fn requests_and_replies_as_data() {
        let cas = McCommand::Cas { key: "k".into(), value: "t".into(), exptime: -1, cas: u64::MAX };
        let d = request_data(&McRequest { id: RequestId(3), server: 1, command: cas });
        assert_eq!((d.int_field("", "id"), d.int_field("", "server"), d.int_field("", "exptime")), (Ok(3), Ok(1), Ok(-1)));
        assert_eq!((d.str_field("", "command"), d.str_field("", "cas")), (Ok("cas"), Ok("18446744073709551615")));
        let add = request_data(&McRequest { id: RequestId(4), server: 0, command: McCommand::Add { key: "k".into(), value: "t".into(), exptime: 3 } });
        assert_eq!((add.str_field("", "command"), add.int_field("", "exptime"), add.get("cas")), (Ok("add"), Ok(3), None));
        assert_eq!(reply_from_data(&Data::Null), Ok(McAnswer::Miss));
        assert_eq!(reply_from_data(&Data::map([("status", "EXISTS".into())])), Ok(McAnswer::Exists));
        let v = Data::map([("value", "tok".into()), ("cas", "42".into())]);
        assert_eq!(reply_from_data(&v), Ok(McAnswer::Value { value: b"tok".to_vec(), cas: 42 }));
        let stats = request_data(&McRequest { id: RequestId(5), server: 1, command: McCommand::Stats });
        assert_eq!((stats.str_field("", "command"), stats.get("key")), (Ok("stats"), None));
        assert_eq!(reply_from_data(&Data::map([("uptime", Data::Int(42))])), Ok(McAnswer::Uptime(42)));
        assert_eq!(reply_from_data(&Data::map([("uptime", "7".into())])), Ok(McAnswer::Uptime(7)));
        assert!(reply_from_data(&Data::map([("uptime", Data::Int(-1))])).is_err());
        for bad in [Data::map([("status", "ERROR".into())]), Data::map([("value", "t".into())]), Data::Int(1), Data::map([("value", "t".into()), ("cas", "x".into())])] {
            assert!(reply_from_data(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(MemcachedBackend::reply_from_data(&Data::Bool(true)).unwrap_err().kind(), crate::ErrorKind::Protocol);
    }

    #[test]
    fn the_plan_lists_the_servers() {
        let o = ClientOptions::new("memcached://a:1,b");
        let p = plan(&o).unwrap();
        assert_eq!((p.str_field("", "transport"), p.str_field("", "redacted")), (Ok("memcached"), Ok("memcached://a:1,b:11211")));
        let servers = p.get("servers").and_then(Data::as_list).unwrap();
        assert_eq!((servers[1].str_field("", "host"), servers[1].int_field("", "port")), (Ok("b"), Ok(11211)));
        assert!(connect(&o, Box::new(crate::random::SeededRandom::new(1))).unwrap().engine.is_idle());
        assert!(connect(&ClientOptions::new("etcd://h"), Box::new(crate::random::SeededRandom::new(2))).is_err());
    }
}
