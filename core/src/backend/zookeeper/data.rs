//! The ZooKeeper backend's requests, replies and notices ([`crate::backend::zookeeper::request`]) as
//! [`Data`], and what a transport opens, so a transport in another language (the Node binding's
//! `lib/transport/zookeeper.js`) performs them without a rule of its own. The forms:
//!
//! - request: `{ id, op, ..., sessionMs? }` (`sessionMs`: the request runs in the client's
//!   extra session asked for that timeout, opened by `openSession` and closed by `closeSession`
//!   with it; absent: the client's own session) with `op` one of `openSession`, `closeSession`; `create` (`path`, `data`: bytes,
//!   `mode`: `persistent` | `ephemeral` | `ephemeralSequential` | `container`); `delete` and
//!   `check` (`path`, `version`: an integer or null for any); `children`, `exists` and `getData`
//!   (`path`, `watch`: a boolean).
//! - reply: `{ reply: 'session', sessionId, timeoutMs }`, `{ reply: 'created', path, stat }`,
//!   `{ reply: 'deleted' }`, `{ reply: 'closed' }`, `{ reply: 'checked' }`, `{ reply: 'children', children: [name] }`,
//!   `{ reply: 'exists', stat }` (`stat` null when there is no node), `{ reply: 'data', data,
//!   stat }`; or a failure `{ failure, message? , code? }` with `failure` one of `noNode`,
//!   `nodeExists`, `badVersion`, `notEmpty`, `connectionLoss`, `sessionExpired`, `other` (`code`:
//!   the lockgate error code of an `other`, `PROTOCOL` if absent). A stat is `{ czxid, mzxid,
//!   version, cversion, ephemeralOwner, numChildren }`.
//! - notice: `{ notice: 'watch', path, event: 'created' | 'deleted' | 'dataChanged' |
//!   'childrenChanged' }` or `{ notice: 'session', event: 'disconnected' | 'reconnected' |
//!   'expired', sessionMs? }` (`sessionMs`: of that extra session).



use crate::data::{Connected, Data, DataBackend};
use crate::connect::ClientOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::random::RandomSource;
use crate::time::Duration;
use crate::backend::zookeeper::{
    CreateMode, SessionEvent, Stat, WatchEvent, ZkAddress, ZkConfig, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest,
    ZkResult, ZooKeeperBackend, ZooKeeperEngine,
};

impl DataBackend for ZooKeeperBackend {
    fn request_data(request: &ZkRequest) -> Data {
        request_data(request)
    }

    fn reply_from_data(reply: &Data) -> ZkResult {
        reply_from_data(reply)
    }

    fn reply_from_error(error: Error) -> ZkResult {
        reply_from_error(error)
    }

    fn notice_from_data(notice: &Data) -> Option<ZkNotice> {
        notice_from_data(notice)
    }
}

/// The ZooKeeper engine of a `zookeeper://` client and its transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let target = options.target()?;
    let address = target.zookeeper().ok_or_else(|| Error::protocol("a ZooKeeper target without its ensemble"))?;
    let config: ZkConfig = options.zookeeper_config()?;
    let plan = plan(address, options, config.session_timeout);
    let engine = ZooKeeperEngine::with_backend(ZooKeeperBackend::new(config)?, rng);
    Ok(Connected { engine: Box::new(engine), plan })
}

/// A request as data; one of an extra session says which by `sessionMs` (the timeout it asks).
pub fn request_data(r: &ZkRequest) -> Data {
    let mut d = op_data(r);
    if let (Some(t), Data::Map(entries)) = (r.session, &mut d) {
        entries.push(("sessionMs".to_string(), millis(t)));
    }
    d
}

fn op_data(r: &ZkRequest) -> Data {
    let id = ("id", Data::from(r.id.0));
    let path = |p: &str| ("path", Data::from(p));
    let version = |v: &Option<i32>| ("version", Data::from(*v));
    match &r.op {
        ZkOp::OpenSession => Data::map([id, ("op", "openSession".into())]),
        ZkOp::CloseSession => Data::map([id, ("op", "closeSession".into())]),
        ZkOp::Create { path: p, data, mode } => Data::map([
            id,
            ("op", "create".into()),
            path(p),
            ("data", data.clone().into()),
            ("mode", mode_name(*mode).into()),
        ]),
        ZkOp::Delete { path: p, version: v } => Data::map([id, ("op", "delete".into()), path(p), version(v)]),
        ZkOp::Check { path: p, version: v } => Data::map([id, ("op", "check".into()), path(p), version(v)]),
        ZkOp::Children { path: p, watch } => watched(id, "children", p, *watch),
        ZkOp::Exists { path: p, watch } => watched(id, "exists", p, *watch),
        ZkOp::GetData { path: p, watch } => watched(id, "getData", p, *watch),
    }
}

fn watched(id: (&'static str, Data), op: &str, path: &str, watch: bool) -> Data {
    Data::map([id, ("op", op.into()), ("path", path.into()), ("watch", watch.into())])
}

fn mode_name(mode: CreateMode) -> &'static str {
    match mode {
        CreateMode::Persistent => "persistent",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::EphemeralSequential => "ephemeralSequential",
        CreateMode::Container => "container",
    }
}

/// A transport's reply as a [`ZkResult`]; data that makes no sense is a `PROTOCOL` failure.
pub fn reply_from_data(d: &Data) -> ZkResult {
    match parse_reply(d) {
        Ok(result) => result,
        Err(why) => Err(ZkFailure::Other(Error::protocol(format!("the ZooKeeper transport's reply: {why}")))),
    }
}

fn parse_reply(d: &Data) -> Result<ZkResult, String> {
    const WHAT: &str = "a reply";
    if let Some(failure) = d.get("failure") {
        let message = d.get("message").and_then(Data::as_str).unwrap_or("").to_string();
        return Ok(Err(match failure.as_str() {
            Some("noNode") => ZkFailure::NoNode,
            Some("nodeExists") => ZkFailure::NodeExists,
            Some("badVersion") => ZkFailure::BadVersion,
            Some("notEmpty") => ZkFailure::NotEmpty,
            Some("connectionLoss") => ZkFailure::ConnectionLoss(message),
            Some("sessionExpired") => ZkFailure::SessionExpired,
            Some("other") => {
                let code = d.get("code").and_then(Data::as_str).unwrap_or("PROTOCOL");
                let kind = ErrorKind::ALL.into_iter().find(|k| k.code() == code).unwrap_or(ErrorKind::Protocol);
                ZkFailure::Other(Error::new(kind, message))
            }
            _ => return Err(format!("unknown failure {failure:?}")),
        }));
    }
    let reply = match d.str_field(WHAT, "reply")? {
        "session" => {
            let timeout = d.int_field(WHAT, "timeoutMs")?;
            let timeout = u64::try_from(timeout).map_err(|_| format!("a negative session timeout ({timeout} ms)"))?;
            ZkReply::Session { id: d.int_field(WHAT, "sessionId")?, timeout: Duration::from_millis(timeout) }
        }
        "created" => ZkReply::Created { path: d.str_field(WHAT, "path")?.to_string(), stat: stat(d.get("stat"))? },
        "deleted" => ZkReply::Deleted,
        "closed" => ZkReply::Closed,
        "checked" => ZkReply::Checked,
        "children" => {
            let list = d.get("children").and_then(Data::as_list).ok_or("a children reply has no list of children")?;
            let names = list.iter().map(|c| c.as_str().map(str::to_string).ok_or("a child name is not a string"));
            ZkReply::Children(names.collect::<Result<_, _>>()?)
        }
        "exists" => ZkReply::Exists(match d.get("stat") {
            None => None,
            some => Some(stat(some)?),
        }),
        "data" => ZkReply::Data(d.bytes_field(WHAT, "data")?.to_vec(), stat(d.get("stat"))?),
        other => return Err(format!("unknown reply {other:?}")),
    };
    Ok(Ok(reply))
}

fn stat(d: Option<&Data>) -> Result<Stat, String> {
    const WHAT: &str = "a stat";
    let d = d.ok_or("a reply has no stat")?;
    let int32 = |key: &str| -> Result<i32, String> {
        let n = d.int_field(WHAT, key)?;
        i32::try_from(n).map_err(|_| format!("a stat's {key} is out of range ({n})"))
    };
    Ok(Stat {
        czxid: d.int_field(WHAT, "czxid")?,
        mzxid: d.int_field(WHAT, "mzxid")?,
        version: int32("version")?,
        cversion: int32("cversion")?,
        ephemeral_owner: d.int_field(WHAT, "ephemeralOwner")?,
        num_children: int32("numChildren")?,
    })
}

/// The reply for a request whose transport failed before an answer: a lost connection (may
/// have been applied: retryable within the session) for `CONNECTION` errors, else the error.
pub fn reply_from_error(error: Error) -> ZkResult {
    Err(match error.kind() {
        ErrorKind::Connection | ErrorKind::Timeout => ZkFailure::ConnectionLoss(error.message().to_string()),
        _ => ZkFailure::Other(error),
    })
}

/// A pushed notice; `None` for data that is none.
pub fn notice_from_data(d: &Data) -> Option<ZkNotice> {
    let event = d.get("event")?.as_str()?;
    match d.get("notice")?.as_str()? {
        "watch" => {
            let event = match event {
                "created" => WatchEvent::Created,
                "deleted" => WatchEvent::Deleted,
                "dataChanged" => WatchEvent::DataChanged,
                "childrenChanged" => WatchEvent::ChildrenChanged,
                _ => return None,
            };
            Some(ZkNotice::Watch { path: d.get("path")?.as_str()?.to_string(), event })
        }
        "session" => {
            let event = match event {
                "disconnected" => SessionEvent::Disconnected,
                "reconnected" => SessionEvent::Reconnected,
                "expired" => SessionEvent::Expired,
                _ => return None,
            };
            Some(match d.get("sessionMs") {
                None => ZkNotice::Session(event),
                Some(ms) => ZkNotice::Extra { timeout: Duration::from_millis(u64::try_from(ms.as_int()?).ok()?), event },
            })
        }
        _ => None,
    }
}

/// What a transport opens for `address` with `options`: `{ transport: 'zookeeper', backend,
/// connectString, hosts: [{ host, port }], chroot, digest: { username, password } | null, tls,
/// sessionTimeoutMs, connectTimeoutMs, commandTimeoutMs, redacted }` (`connectString`: the
/// members and chroot in the form ZooKeeper clients take; `commandTimeoutMs`: how long a request
/// may wait for its reply before its connection counts as lost; `redacted`: the URL with its
/// password as `***`).
pub fn plan(address: &ZkAddress, options: &ClientOptions, session_timeout: Duration) -> Data {
    let hosts = address.hosts.iter().map(|(h, p)| Data::map([("host", h.as_str().into()), ("port", i64::from(*p).into())]));
    let digest = address.digest.as_ref().map(|(user, password)| {
        Data::map([("username", user.as_str().into()), ("password", password.as_str().into())])
    });
    Data::map([
        ("transport", "zookeeper".into()),
        ("backend", "zookeeper".into()),
        ("connectString", address.connect_string().into()),
        ("hosts", Data::List(hosts.collect())),
        ("chroot", address.chroot.clone().into()),
        ("digest", digest.unwrap_or(Data::Null)),
        ("tls", address.tls.into()),
        ("sessionTimeoutMs", millis(session_timeout)),
        ("connectTimeoutMs", millis(options.connect_timeout)),
        ("commandTimeoutMs", millis(options.response_timeout)),
        ("redacted", address.shown().into()),
    ])
}

fn millis(d: Duration) -> Data {
    Data::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;

    #[test]
    fn requests_say_every_field() {
        let r = ZkRequest {
            id: RequestId(7),
            op: ZkOp::Create { path: "/l/a-".into(), data: b"v".to_vec(), mode: CreateMode::EphemeralSequential },
            session: Some(Duration::from_millis(2000)),
        };
        let d = request_data(&r);
        assert_eq!(d.get("id"), Some(&Data::Int(7)));
        assert_eq!(d.str_field("", "op"), Ok("create"));
        assert_eq!(d.str_field("", "mode"), Ok("ephemeralSequential"));
        assert_eq!(d.bytes_field("", "data"), Ok(&b"v"[..]));
        assert_eq!(d.int_field("", "sessionMs"), Ok(2000));
        let d = request_data(&ZkRequest::own(RequestId(8), ZkOp::Delete { path: "/x".into(), version: None }));
        assert_eq!((d.get("version"), d.get("sessionMs")), (None, None));
        let d = request_data(&ZkRequest::own(RequestId(9), ZkOp::Check { path: "/x".into(), version: Some(3) }));
        assert_eq!((d.str_field("", "op"), d.int_field("", "version")), (Ok("check"), Ok(3)));
    }

    fn stat_data(czxid: i64) -> Data {
        Data::map([
            ("czxid", czxid.into()),
            ("mzxid", czxid.into()),
            ("version", 0i64.into()),
            ("cversion", 0i64.into()),
            ("ephemeralOwner", 99i64.into()),
            ("numChildren", 0i64.into()),
        ])
    }

    #[test]
    fn replies_and_failures_round_trip() {
        let created = Data::map([("reply", "created".into()), ("path", "/l/a-0000000001".into()), ("stat", stat_data(1 << 40))]);
        match reply_from_data(&created) {
            Ok(ZkReply::Created { path, stat }) => {
                assert_eq!(path, "/l/a-0000000001");
                assert_eq!((stat.czxid, stat.ephemeral_owner), (1 << 40, 99));
            }
            other => panic!("{other:?}"),
        }
        let none = Data::map([("reply", "exists".into()), ("stat", Data::Null)]);
        assert_eq!(reply_from_data(&none), Ok(ZkReply::Exists(None)));
        let kids = Data::map([("reply", "children".into()), ("children", Data::List(vec!["b".into(), "a".into()]))]);
        assert_eq!(reply_from_data(&kids), Ok(ZkReply::Children(vec!["b".into(), "a".into()])));
        let lost = Data::map([("failure", "connectionLoss".into()), ("message", "socket closed".into())]);
        assert_eq!(reply_from_data(&lost), Err(ZkFailure::ConnectionLoss("socket closed".into())));
        let auth = Data::map([("failure", "other".into()), ("code", "AUTHENTICATION".into()), ("message", "NoAuth".into())]);
        match reply_from_data(&auth) {
            Err(ZkFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::Authentication),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nonsense_is_a_protocol_failure() {
        for bad in [
            Data::Null,
            Data::map([("reply", "created".into())]),
            Data::map([("reply", "session".into()), ("sessionId", 1i64.into()), ("timeoutMs", (-1i64).into())]),
            Data::map([("reply", "data".into()), ("data", Data::Int(1)), ("stat", stat_data(1))]),
            Data::map([("reply", "children".into()), ("children", Data::List(vec![Data::Int(1)]))]),
            Data::map([("failure", "sorry".into())]),
        ] {
            match reply_from_data(&bad) {
                Err(ZkFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::Protocol, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn notices() {
        let w = Data::map([("notice", "watch".into()), ("path", "/l/a".into()), ("event", "deleted".into())]);
        assert_eq!(notice_from_data(&w), Some(ZkNotice::Watch { path: "/l/a".into(), event: WatchEvent::Deleted }));
        let s = Data::map([("notice", "session".into()), ("event", "expired".into())]);
        assert_eq!(notice_from_data(&s), Some(ZkNotice::Session(SessionEvent::Expired)));
        let x = Data::map([("notice", "session".into()), ("event", "expired".into()), ("sessionMs", 2000i64.into())]);
        assert_eq!(notice_from_data(&x), Some(ZkNotice::Extra { timeout: Duration::from_millis(2000), event: SessionEvent::Expired }));
        assert_eq!(notice_from_data(&Data::map([("notice", "session".into()), ("event", "x".into())])), None);
    }

    #[test]
    fn transport_errors_are_connection_losses_or_themselves() {
        assert!(matches!(reply_from_error(Error::new(ErrorKind::Connection, "down")), Err(ZkFailure::ConnectionLoss(_))));
        assert!(matches!(reply_from_error(Error::protocol("odd")), Err(ZkFailure::Other(_))));
    }

    #[test]
    fn the_plan_names_what_to_open() {
        let a = ZkAddress::parse("app:pw@h1:2182,h2/locks", false).unwrap();
        let o = ClientOptions::new("zookeeper://app:pw@h1:2182,h2/locks");
        let p = plan(&a, &o, Duration::from_secs(60));
        assert_eq!(p.str_field("", "connectString"), Ok("h1:2182,h2:2181/locks"));
        assert_eq!(p.int_field("", "sessionTimeoutMs"), Ok(60_000));
        assert_eq!(p.get("digest").and_then(|d| d.get("password")), Some(&Data::from("pw")));
        assert_eq!(p.str_field("", "redacted"), Ok("zookeeper://app:***@h1:2182,h2:2181/locks"));
    }
}
