//! The etcd backend's requests, replies and notices ([`crate::backend::etcd::request`]) as [`Data`], and
//! what a transport opens, so a transport in another language (the Node binding's
//! `lib/transport/etcd.js` on `etcd3`) performs them without a rule of its own. Keys and values
//! are bytes; revisions, lease ids and counts are integers (lease ids are 64-bit: beyond 2^53
//! they travel as JavaScript `BigInt`s). The forms:
//!
//! - request: `{ id, op, ... }` with `op` one of `leaseGrant` (`ttlSecs`); `leaseKeepAlive` and
//!   `leaseRevoke` (`lease`); `range` (a range's fields: `key`, `prefix`: a boolean, `order`:
//!   `key` | `createAscending` | `createDescending`, `limit`, `maxCreateRevision`, `countOnly`, `from`: bytes or null, where a prefix range starts;
//!   a boolean); `txn` (`compares`: [`{ key, op: 'equal' | 'notEqual' | 'less' | 'greater',
//!   target: 'createRevision' | 'modRevision' | 'version' | 'lease' | 'value', value }`] with
//!   `value` bytes for a `value` target, else an integer; `success` and `failure`: lists of
//!   `{ op: 'put', key, value, lease }`, `{ op: 'delete', key, prefix }` or `{ op: 'range',
//!   ...a range's fields }`); `watch` (`watch`: the backend's integer name for it, `key`,
//!   `prefix`, `startRevision`); `cancelWatch` (`watch`).
//! - reply: `{ reply: 'leaseGranted', lease, ttlSecs }`, `{ reply: 'keptAlive', lease, ttlSecs }`,
//!   `{ reply: 'leaseRevoked' }`, `{ reply: 'range', revision, kvs: [kv], count }`, `{ reply:
//!   'txn', revision, succeeded, replies: [{ reply: 'put' } | { reply: 'delete', deleted } |
//!   { reply: 'range', kvs, count }] }`, `{ reply: 'watching' }`, `{ reply: 'watchCanceled' }`;
//!   or a failure `{ failure, message?, code?, compactRevision? }` with `failure` one of
//!   `connectionLost` (may have been applied: the connection broke or the request went
//!   unanswered), `unavailable` (refused before it was applied: no leader, too many requests),
//!   `leaseNotFound`, `compacted` (`compactRevision`, 0 if unknown), `other` (`code`: the
//!   lockgate error code, `PROTOCOL` if absent). A kv is `{ key, value, createRevision,
//!   modRevision, version, lease }`.
//! - notice: `{ notice: 'watch', watch, events: [{ type: 'put' | 'delete', kv }] }` or `{
//!   notice: 'watchEnded', watch, why }`.
//!
//! What each op must do (one reply per request, keepalives answered by the server's answer to
//! them, linearizable reads, watches named by the backend, nothing retried by the transport) is
//! [`crate::backend::etcd::request`]'s contract.

use crate::data::{Connected, Data, DataBackend};
use crate::connect::ClientOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::backend::etcd::{
    Compare, CompareOp, CompareTarget, EtcdAddress, EtcdBackend, EtcdEngine, EtcdFailure, EtcdNotice, EtcdOp,
    EtcdReply, EtcdRequest, EtcdResult, EventKind, KeyValue, Order, Range, TxnOp, TxnReply, WatchEvent, WatchId,
};
use crate::random::RandomSource;
use crate::time::Duration;

/// Most items a list in a reply or notice may hold before it counts as nonsense (a transaction's
/// replies, a range's keys and a watch's events are far fewer).
const MAX_ITEMS: usize = 1 << 20;

impl DataBackend for EtcdBackend {
    fn request_data(request: &EtcdRequest) -> Data {
        request_data(request)
    }

    fn reply_from_data(reply: &Data) -> EtcdResult {
        reply_from_data(reply)
    }

    fn reply_from_error(error: Error) -> EtcdResult {
        reply_from_error(error)
    }

    fn notice_from_data(notice: &Data) -> Option<EtcdNotice> {
        notice_from_data(notice)
    }
}

/// The etcd engine of an `etcd://` or `etcds://` client and its transport plan.
pub fn connect(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected> {
    let target = options.target()?;
    let address = target.etcd().ok_or_else(|| Error::protocol("an etcd target without its members"))?;
    let engine = EtcdEngine::with_backend(EtcdBackend::new(options.etcd_config()?)?, rng);
    Ok(Connected { engine: Box::new(engine), plan: plan(address, options)? })
}

// ---- requests ----

/// A request as data.
pub fn request_data(r: &EtcdRequest) -> Data {
    let id = ("id", Data::from(r.id.0));
    let op = |name: &str| ("op", Data::from(name));
    match &r.op {
        EtcdOp::LeaseGrant { ttl_secs } => Data::map([id, op("leaseGrant"), ("ttlSecs", (*ttl_secs).into())]),
        EtcdOp::LeaseKeepAlive { lease } => Data::map([id, op("leaseKeepAlive"), ("lease", (*lease).into())]),
        EtcdOp::LeaseRevoke { lease } => Data::map([id, op("leaseRevoke"), ("lease", (*lease).into())]),
        EtcdOp::Range(range) => Data::Map(
            [id, op("range")].into_iter().map(|(k, v)| (k.to_string(), v)).chain(range_fields(range)).collect(),
        ),
        EtcdOp::Txn(txn) => Data::map([
            id,
            op("txn"),
            ("compares", Data::List(txn.compares.iter().map(compare_data).collect())),
            ("success", Data::List(txn.success.iter().map(txn_op_data).collect())),
            ("failure", Data::List(txn.failure.iter().map(txn_op_data).collect())),
        ]),
        EtcdOp::Watch { watch, key, prefix, start_revision } => Data::map([
            id,
            op("watch"),
            ("watch", watch.0.into()),
            ("key", key.clone().into()),
            ("prefix", (*prefix).into()),
            ("startRevision", (*start_revision).into()),
        ]),
        EtcdOp::CancelWatch { watch } => Data::map([id, op("cancelWatch"), ("watch", watch.0.into())]),
    }
}

/// A range's fields (of a `range` request, or of a transaction's `range` op).
fn range_fields(r: &Range) -> Vec<(String, Data)> {
    let order = match r.order {
        Order::Key => "key",
        Order::CreateAscending => "createAscending",
        Order::CreateDescending => "createDescending",
    };
    [
        ("key", Data::from(r.key.clone())),
        ("prefix", r.prefix.into()),
        ("order", order.into()),
        ("limit", r.limit.into()),
        ("maxCreateRevision", r.max_create_revision.into()),
        ("countOnly", r.count_only.into()),
        ("from", r.from.clone().map_or(Data::Null, Data::from)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn compare_data(c: &Compare) -> Data {
    let op = match c.op {
        CompareOp::Equal => "equal",
        CompareOp::NotEqual => "notEqual",
        CompareOp::Less => "less",
        CompareOp::Greater => "greater",
    };
    let (target, value) = match &c.target {
        CompareTarget::CreateRevision(r) => ("createRevision", Data::from(*r)),
        CompareTarget::ModRevision(r) => ("modRevision", Data::from(*r)),
        CompareTarget::Version(v) => ("version", Data::from(*v)),
        CompareTarget::Lease(l) => ("lease", Data::from(*l)),
        CompareTarget::Value(v) => ("value", Data::from(v.clone())),
    };
    Data::map([("key", c.key.clone().into()), ("op", op.into()), ("target", target.into()), ("value", value)])
}

fn txn_op_data(op: &TxnOp) -> Data {
    match op {
        TxnOp::Put { key, value, lease } => Data::map([
            ("op", "put".into()),
            ("key", key.clone().into()),
            ("value", value.clone().into()),
            ("lease", (*lease).into()),
        ]),
        TxnOp::Delete { key, prefix } => {
            Data::map([("op", "delete".into()), ("key", key.clone().into()), ("prefix", (*prefix).into())])
        }
        TxnOp::Range(r) => {
            Data::Map(std::iter::once(("op".to_string(), Data::from("range"))).chain(range_fields(r)).collect())
        }
    }
}

// ---- replies ----

/// A transport's reply as an [`EtcdResult`]; data that makes no sense is a `PROTOCOL` failure.
pub fn reply_from_data(d: &Data) -> EtcdResult {
    match parse_reply(d) {
        Ok(result) => result,
        Err(why) => Err(EtcdFailure::Other(Error::protocol(format!("the etcd transport's reply: {why}")))),
    }
}

fn parse_reply(d: &Data) -> Result<EtcdResult, String> {
    const WHAT: &str = "a reply";
    if let Some(failure) = d.get("failure") {
        let message = d.get("message").and_then(Data::as_str).unwrap_or("").to_string();
        return Ok(Err(match failure.as_str() {
            Some("connectionLost") => EtcdFailure::ConnectionLost(message),
            Some("unavailable") => EtcdFailure::Unavailable(message),
            Some("leaseNotFound") => EtcdFailure::LeaseNotFound,
            Some("compacted") => EtcdFailure::Compacted {
                compact_revision: match d.get("compactRevision") {
                    None => 0,
                    Some(_) => d.int_field(WHAT, "compactRevision")?,
                },
            },
            Some("other") => {
                let code = d.get("code").and_then(Data::as_str).unwrap_or("PROTOCOL");
                let kind = ErrorKind::ALL.into_iter().find(|k| k.code() == code).unwrap_or(ErrorKind::Protocol);
                EtcdFailure::Other(Error::new(kind, message))
            }
            _ => return Err(format!("unknown failure {failure:?}")),
        }));
    }
    let reply = match d.str_field(WHAT, "reply")? {
        "leaseGranted" => {
            EtcdReply::LeaseGranted { lease: d.int_field(WHAT, "lease")?, ttl_secs: d.int_field(WHAT, "ttlSecs")? }
        }
        "keptAlive" => {
            let ttl_secs = d.int_field(WHAT, "ttlSecs")?;
            if ttl_secs <= 0 {
                // etcd's TTL 0 means the lease is gone: the transport reports that as leaseNotFound.
                return Err(format!("a keepalive acknowledged with TTL {ttl_secs}"));
            }
            EtcdReply::KeptAlive { lease: d.int_field(WHAT, "lease")?, ttl_secs }
        }
        "leaseRevoked" => EtcdReply::LeaseRevoked,
        "range" => EtcdReply::Range {
            revision: d.int_field(WHAT, "revision")?,
            kvs: kvs(d)?,
            count: d.int_field(WHAT, "count")?,
        },
        "txn" => {
            let succeeded = d.get("succeeded").and_then(Data::as_bool).ok_or("a txn reply has no boolean succeeded")?;
            let replies = list(d, "replies")?.iter().map(txn_reply).collect::<Result<_, _>>()?;
            EtcdReply::Txn { revision: d.int_field(WHAT, "revision")?, succeeded, replies }
        }
        "watching" => EtcdReply::Watching,
        "watchCanceled" => EtcdReply::WatchCanceled,
        other => return Err(format!("unknown reply {other:?}")),
    };
    Ok(Ok(reply))
}

fn txn_reply(d: &Data) -> Result<TxnReply, String> {
    const WHAT: &str = "a transaction op's reply";
    Ok(match d.str_field(WHAT, "reply")? {
        "put" => TxnReply::Put,
        "delete" => TxnReply::Delete { deleted: d.int_field(WHAT, "deleted")? },
        "range" => TxnReply::Range { kvs: kvs(d)?, count: d.int_field(WHAT, "count")? },
        other => return Err(format!("unknown transaction op reply {other:?}")),
    })
}

/// The list under `key` (at most [`MAX_ITEMS`]).
fn list<'a>(d: &'a Data, key: &str) -> Result<&'a [Data], String> {
    let items = d.get(key).and_then(Data::as_list).ok_or_else(|| format!("no list of {key}"))?;
    if items.len() > MAX_ITEMS {
        return Err(format!("more than {MAX_ITEMS} {key}"));
    }
    Ok(items)
}

fn kvs(d: &Data) -> Result<Vec<KeyValue>, String> {
    list(d, "kvs")?.iter().map(key_value).collect()
}

fn key_value(d: &Data) -> Result<KeyValue, String> {
    const WHAT: &str = "a kv";
    Ok(KeyValue {
        key: d.bytes_field(WHAT, "key")?.to_vec(),
        // etcd leaves an empty value out (a delete event's, an empty lock key's).
        value: match d.get("value") {
            None => Vec::new(),
            Some(_) => d.bytes_field(WHAT, "value")?.to_vec(),
        },
        create_revision: d.int_field(WHAT, "createRevision")?,
        mod_revision: d.int_field(WHAT, "modRevision")?,
        version: d.int_field(WHAT, "version")?,
        lease: d.int_field(WHAT, "lease")?,
    })
}

/// The reply for a request whose transport failed before an answer: a lost connection (may
/// have been applied: retryable) for `CONNECTION` and `TIMEOUT` errors, else the error.
pub fn reply_from_error(error: Error) -> EtcdResult {
    Err(match error.kind() {
        ErrorKind::Connection | ErrorKind::Timeout => EtcdFailure::ConnectionLost(error.message().to_string()),
        _ => EtcdFailure::Other(error),
    })
}

// ---- notices ----

/// A pushed notice; `None` for data that is none (a watch event that makes no sense included:
/// the watch then stays as it is, and the backend's periodic re-check finds what it missed).
pub fn notice_from_data(d: &Data) -> Option<EtcdNotice> {
    let watch = WatchId(u64::try_from(d.get("watch")?.as_int()?).ok()?);
    match d.get("notice")?.as_str()? {
        "watch" => {
            let events = d.get("events")?.as_list()?;
            if events.len() > MAX_ITEMS {
                return None;
            }
            let events = events
                .iter()
                .map(|e| {
                    let kind = match e.get("type")?.as_str()? {
                        "put" => EventKind::Put,
                        "delete" => EventKind::Delete,
                        _ => return None,
                    };
                    Some(WatchEvent { kind, kv: key_value(e.get("kv")?).ok()? })
                })
                .collect::<Option<Vec<_>>>()?;
            Some(EtcdNotice::Watch { watch, events })
        }
        "watchEnded" => {
            let why = d.get("why").and_then(Data::as_str).unwrap_or("the watch ended").to_string();
            Some(EtcdNotice::WatchEnded { watch, why })
        }
        _ => None,
    }
}

// ---- the plan ----

/// What a transport opens for `address` with `options`: `{ transport: 'etcd', backend: 'etcd',
/// hosts: ['http://h:p' | 'https://h:p'], auth: { username, password } | null, tls, tlsCaPem:
/// string | null, connectTimeoutMs, commandTimeoutMs, redacted }` (`hosts`: every member, in URL
/// order, as gRPC clients take them; `tlsCaPem`: the PEM certificate(s) an `etcds://` client
/// trusts instead of the system's roots; `commandTimeoutMs`: how long a request may wait for
/// its answer before the transport reports it lost and replaces its connections; `redacted`:
/// the URL with its password as `***`). `INVALID_ARGUMENT` for a TLS CA option that holds no
/// PEM certificate.
pub fn plan(address: &EtcdAddress, options: &ClientOptions) -> Result<Data> {
    let auth = address.login.as_ref().map(|(user, password)| {
        Data::map([("username", user.as_str().into()), ("password", password.as_str().into())])
    });
    let ca = match &options.tls_ca_pem {
        Some(pem) if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") => {
            return Err(Error::invalid(
                "the client's TLS CA option holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        Some(pem) => Data::from(String::from_utf8_lossy(pem).into_owned()),
        None => Data::Null,
    };
    Ok(Data::map([
        ("transport", "etcd".into()),
        ("backend", "etcd".into()),
        ("hosts", Data::List(address.endpoints().into_iter().map(Data::from).collect())),
        ("auth", auth.unwrap_or(Data::Null)),
        ("tls", address.tls.into()),
        ("tlsCaPem", ca),
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
    use crate::backend::etcd::Txn;

    fn request(op: EtcdOp) -> Data {
        request_data(&EtcdRequest { id: RequestId(7), op })
    }

    fn range_back(d: &Data) -> Range {
        let order = match d.str_field("", "order").unwrap() {
            "key" => Order::Key,
            "createAscending" => Order::CreateAscending,
            "createDescending" => Order::CreateDescending,
            other => panic!("{other}"),
        };
        Range {
            key: d.bytes_field("", "key").unwrap().to_vec(),
            prefix: d.get("prefix").and_then(Data::as_bool).unwrap(),
            order,
            limit: d.int_field("", "limit").unwrap(),
            max_create_revision: d.int_field("", "maxCreateRevision").unwrap(),
            count_only: d.get("countOnly").and_then(Data::as_bool).unwrap(),
            from: d.get("from").and_then(Data::as_bytes).map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn requests_say_every_field() {
        let d = request(EtcdOp::LeaseGrant { ttl_secs: 60 });
        assert_eq!(
            (d.int_field("", "id"), d.str_field("", "op"), d.int_field("", "ttlSecs")),
            (Ok(7), Ok("leaseGrant"), Ok(60))
        );
        let big = 0x694d_8f1a_2b3c_4d5e;
        let d = request(EtcdOp::LeaseKeepAlive { lease: big });
        assert_eq!((d.str_field("", "op"), d.int_field("", "lease")), (Ok("leaseKeepAlive"), Ok(big)));
        assert_eq!(request(EtcdOp::LeaseRevoke { lease: 3 }).str_field("", "op"), Ok("leaseRevoke"));
        let mut range = Range::prefix(b"/l/".to_vec(), Order::CreateDescending, 1);
        range.max_create_revision = 41;
        let d = request(EtcdOp::Range(range.clone()));
        assert_eq!(d.str_field("", "op"), Ok("range"));
        assert_eq!(range_back(&d), range);
        let d = request(EtcdOp::Watch { watch: WatchId(5), key: b"/l/a".to_vec(), prefix: false, start_revision: 42 });
        assert_eq!((d.int_field("", "watch"), d.int_field("", "startRevision")), (Ok(5), Ok(42)));
        assert_eq!(d.get("key"), Some(&Data::Bytes(b"/l/a".to_vec())), "keys are bytes");
        let d = request(EtcdOp::CancelWatch { watch: WatchId(5) });
        assert_eq!((d.str_field("", "op"), d.int_field("", "watch")), (Ok("cancelWatch"), Ok(5)));
    }

    #[test]
    fn a_transaction_says_its_compares_and_ops() {
        let txn = Txn {
            compares: vec![
                Compare::created_at(b"/l/a".to_vec(), 0),
                Compare { key: b"/l/b".to_vec(), op: CompareOp::NotEqual, target: CompareTarget::Value(b"v".to_vec()) },
                Compare { key: b"/l/c".to_vec(), op: CompareOp::Less, target: CompareTarget::Lease(9) },
            ],
            success: vec![
                TxnOp::Put { key: b"/l/a".to_vec(), value: Vec::new(), lease: 9 },
                TxnOp::Range(Range::prefix(b"/l/".to_vec(), Order::CreateAscending, 1)),
            ],
            failure: vec![TxnOp::Delete { key: b"/l/a".to_vec(), prefix: false }],
        };
        let d = request(EtcdOp::Txn(txn.clone()));
        let compares = d.get("compares").and_then(Data::as_list).unwrap();
        assert_eq!(
            (compares[0].str_field("", "op"), compares[0].str_field("", "target")),
            (Ok("equal"), Ok("createRevision"))
        );
        assert_eq!(compares[0].int_field("", "value"), Ok(0));
        assert_eq!(compares[1].get("value"), Some(&Data::Bytes(b"v".to_vec())));
        assert_eq!((compares[2].str_field("", "op"), compares[2].int_field("", "value")), (Ok("less"), Ok(9)));
        let success = d.get("success").and_then(Data::as_list).unwrap();
        assert_eq!((success[0].str_field("", "op"), success[0].int_field("", "lease")), (Ok("put"), Ok(9)));
        assert_eq!(success[0].get("value"), Some(&Data::Bytes(Vec::new())));
        assert_eq!(success[1].str_field("", "op"), Ok("range"));
        assert_eq!(range_back(&success[1]), Range::prefix(b"/l/".to_vec(), Order::CreateAscending, 1));
        let failure = d.get("failure").and_then(Data::as_list).unwrap();
        assert_eq!(failure[0].str_field("", "op"), Ok("delete"));
        assert_eq!(failure[0].get("prefix"), Some(&Data::Bool(false)));
    }

    fn kv_data(kv: &KeyValue) -> Data {
        Data::map([
            ("key", kv.key.clone().into()),
            ("value", kv.value.clone().into()),
            ("createRevision", kv.create_revision.into()),
            ("modRevision", kv.mod_revision.into()),
            ("version", kv.version.into()),
            ("lease", kv.lease.into()),
        ])
    }

    /// A reply in the documented form (what a transport writes).
    fn reply_data(r: &EtcdResult) -> Data {
        let kvs = |kvs: &[KeyValue]| Data::List(kvs.iter().map(kv_data).collect());
        match r {
            Ok(EtcdReply::LeaseGranted { lease, ttl_secs }) => Data::map([
                ("reply", "leaseGranted".into()),
                ("lease", (*lease).into()),
                ("ttlSecs", (*ttl_secs).into()),
            ]),
            Ok(EtcdReply::KeptAlive { lease, ttl_secs }) => {
                Data::map([("reply", "keptAlive".into()), ("lease", (*lease).into()), ("ttlSecs", (*ttl_secs).into())])
            }
            Ok(EtcdReply::LeaseRevoked) => Data::map([("reply", "leaseRevoked".into())]),
            Ok(EtcdReply::Range { revision, kvs: k, count }) => Data::map([
                ("reply", "range".into()),
                ("revision", (*revision).into()),
                ("kvs", kvs(k)),
                ("count", (*count).into()),
            ]),
            Ok(EtcdReply::Txn { revision, succeeded, replies }) => {
                let replies = replies
                    .iter()
                    .map(|r| match r {
                        TxnReply::Put => Data::map([("reply", "put".into())]),
                        TxnReply::Delete { deleted } => {
                            Data::map([("reply", "delete".into()), ("deleted", (*deleted).into())])
                        }
                        TxnReply::Range { kvs: k, count } => {
                            Data::map([("reply", "range".into()), ("kvs", kvs(k)), ("count", (*count).into())])
                        }
                    })
                    .collect();
                Data::map([
                    ("reply", "txn".into()),
                    ("revision", (*revision).into()),
                    ("succeeded", (*succeeded).into()),
                    ("replies", Data::List(replies)),
                ])
            }
            Ok(EtcdReply::Watching) => Data::map([("reply", "watching".into())]),
            Ok(EtcdReply::WatchCanceled) => Data::map([("reply", "watchCanceled".into())]),
            Err(EtcdFailure::ConnectionLost(m)) => {
                Data::map([("failure", "connectionLost".into()), ("message", m.as_str().into())])
            }
            Err(EtcdFailure::Unavailable(m)) => {
                Data::map([("failure", "unavailable".into()), ("message", m.as_str().into())])
            }
            Err(EtcdFailure::LeaseNotFound) => Data::map([("failure", "leaseNotFound".into())]),
            Err(EtcdFailure::Compacted { compact_revision }) => {
                Data::map([("failure", "compacted".into()), ("compactRevision", (*compact_revision).into())])
            }
            Err(EtcdFailure::Other(e)) => {
                Data::map([("failure", "other".into()), ("code", e.code().into()), ("message", e.message().into())])
            }
        }
    }

    #[test]
    fn replies_and_failures_round_trip() {
        let kv = KeyValue {
            key: b"/l/694d".to_vec(),
            value: b"10.0.0.7".to_vec(),
            create_revision: 12,
            mod_revision: 12,
            version: 1,
            lease: i64::MAX,
        };
        let deleted = KeyValue {
            key: b"/l/a".to_vec(),
            value: Vec::new(),
            create_revision: 0,
            mod_revision: 13,
            version: 0,
            lease: 0,
        };
        for r in [
            Ok(EtcdReply::LeaseGranted { lease: 0x694d_8f1a_2b3c_4d5e, ttl_secs: 60 }),
            Ok(EtcdReply::KeptAlive { lease: 1, ttl_secs: 2 }),
            Ok(EtcdReply::LeaseRevoked),
            Ok(EtcdReply::Range { revision: 13, kvs: vec![kv.clone(), deleted], count: 5 }),
            Ok(EtcdReply::Txn {
                revision: 14,
                succeeded: false,
                replies: vec![
                    TxnReply::Put,
                    TxnReply::Delete { deleted: 1 },
                    TxnReply::Range { kvs: vec![kv], count: 1 },
                ],
            }),
            Ok(EtcdReply::Watching),
            Ok(EtcdReply::WatchCanceled),
            Err(EtcdFailure::ConnectionLost("socket closed".into())),
            Err(EtcdFailure::Unavailable("etcdserver: no leader".into())),
            Err(EtcdFailure::LeaseNotFound),
            Err(EtcdFailure::Compacted { compact_revision: 9 }),
            Err(EtcdFailure::Other(Error::new(ErrorKind::Authentication, "permission denied"))),
        ] {
            assert_eq!(reply_from_data(&reply_data(&r)), r);
        }
        // Left out by the transport: an empty value, an unknown compact revision, the code.
        let sparse = Data::map([
            ("reply", "range".into()),
            ("revision", 3i64.into()),
            ("count", 1i64.into()),
            (
                "kvs",
                Data::List(vec![Data::map([
                    ("key", "/l/a".into()),
                    ("createRevision", 2i64.into()),
                    ("modRevision", 2i64.into()),
                    ("version", 1i64.into()),
                    ("lease", 5i64.into()),
                ])]),
            ),
        ]);
        match reply_from_data(&sparse) {
            Ok(EtcdReply::Range { kvs, .. }) => {
                assert_eq!((kvs[0].key.as_slice(), kvs[0].value.len()), (&b"/l/a"[..], 0))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            reply_from_data(&Data::map([("failure", "compacted".into())])),
            Err(EtcdFailure::Compacted { compact_revision: 0 })
        );
        match reply_from_data(&Data::map([("failure", "other".into()), ("message", "odd".into())])) {
            Err(EtcdFailure::Other(e)) => assert_eq!((e.kind(), e.message()), (ErrorKind::Protocol, "odd")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nonsense_is_a_protocol_failure() {
        let kv = |k: Data| {
            Data::map([
                ("reply", "range".into()),
                ("revision", 1i64.into()),
                ("count", 1i64.into()),
                ("kvs", Data::List(vec![k])),
            ])
        };
        for bad in [
            Data::Null,
            Data::Int(3),
            Data::map([("reply", "granted".into())]),
            Data::map([("reply", "leaseGranted".into()), ("lease", "x".into()), ("ttlSecs", 1i64.into())]),
            Data::map([("reply", "keptAlive".into()), ("lease", 1i64.into()), ("ttlSecs", 0i64.into())]),
            Data::map([("reply", "range".into()), ("revision", 1i64.into()), ("count", 1i64.into())]),
            kv(Data::map([("key", Data::Int(1))])),
            kv(Data::Null),
            Data::map([("reply", "txn".into()), ("revision", 1i64.into()), ("replies", Data::List(vec![]))]),
            Data::map([
                ("reply", "txn".into()),
                ("revision", 1i64.into()),
                ("succeeded", true.into()),
                ("replies", Data::List(vec![Data::map([("reply", "nested".into())])])),
            ]),
            Data::map([("failure", "sorry".into())]),
            Data::map([("failure", "compacted".into()), ("compactRevision", "9".into())]),
        ] {
            match reply_from_data(&bad) {
                Err(EtcdFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::Protocol, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn notices() {
        let kv = KeyValue {
            key: b"/l/a".to_vec(),
            value: Vec::new(),
            create_revision: 0,
            mod_revision: 20,
            version: 0,
            lease: 0,
        };
        let event = Data::map([("type", "delete".into()), ("kv", kv_data(&kv))]);
        let w = Data::map([
            ("notice", "watch".into()),
            ("watch", 3i64.into()),
            ("events", Data::List(vec![event.clone()])),
        ]);
        assert_eq!(
            notice_from_data(&w),
            Some(EtcdNotice::Watch { watch: WatchId(3), events: vec![WatchEvent { kind: EventKind::Delete, kv }] })
        );
        let ended =
            Data::map([("notice", "watchEnded".into()), ("watch", 3i64.into()), ("why", "stream broke".into())]);
        assert_eq!(
            notice_from_data(&ended),
            Some(EtcdNotice::WatchEnded { watch: WatchId(3), why: "stream broke".into() })
        );
        for bad in [
            Data::Null,
            Data::map([
                ("notice", "watch".into()),
                ("watch", (-1i64).into()),
                ("events", Data::List(vec![event.clone()])),
            ]),
            Data::map([("notice", "watch".into()), ("watch", 3i64.into())]),
            Data::map([
                ("notice", "watch".into()),
                ("watch", 3i64.into()),
                ("events", Data::List(vec![Data::map([("type", "touch".into())])])),
            ]),
            Data::map([("notice", "session".into()), ("watch", 3i64.into())]),
        ] {
            assert_eq!(notice_from_data(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn transport_errors_are_connection_losses_or_themselves() {
        assert!(matches!(
            reply_from_error(Error::new(ErrorKind::Connection, "down")),
            Err(EtcdFailure::ConnectionLost(_))
        ));
        assert!(matches!(
            reply_from_error(Error::new(ErrorKind::Timeout, "slow")),
            Err(EtcdFailure::ConnectionLost(_))
        ));
        assert!(matches!(reply_from_error(Error::protocol("odd")), Err(EtcdFailure::Other(_))));
    }

    #[test]
    fn the_plan_names_what_to_open() {
        let o = ClientOptions::new("etcd://app:pw@h1:2389,h2");
        let a = EtcdAddress::parse("app:pw@h1:2389,h2", false).unwrap();
        let p = plan(&a, &o).unwrap();
        assert_eq!(p.str_field("", "transport"), Ok("etcd"));
        assert_eq!(p.get("hosts"), Some(&Data::List(vec!["http://h1:2389".into(), "http://h2:2379".into()])));
        assert_eq!(p.get("auth").and_then(|d| d.get("password")), Some(&Data::from("pw")));
        assert_eq!((p.get("tls"), p.get("tlsCaPem")), (Some(&Data::Bool(false)), None));
        assert_eq!(p.str_field("", "redacted"), Ok("etcd://app:***@h1:2389,h2:2379"));
        assert_eq!(p.int_field("", "commandTimeoutMs"), Ok(o.response_timeout.as_millis() as i64));
        let mut o = ClientOptions::new("etcds://h1");
        let a = EtcdAddress::parse("h1", true).unwrap();
        o.tls_ca_pem = Some(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec());
        let p = plan(&a, &o).unwrap();
        assert_eq!(p.get("hosts"), Some(&Data::List(vec!["https://h1:2379".into()])));
        assert!(p.str_field("", "tlsCaPem").unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
        o.tls_ca_pem = Some(b"/etc/ssl/ca.pem".to_vec());
        let e = plan(&a, &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(!e.message().contains("/etc/ssl"), "{e}");
    }

    #[test]
    fn connect_builds_the_engine_and_its_plan() {
        let mut o = ClientOptions::new("etcd://127.0.0.1:2379");
        o.session_timeout = Some(Duration::from_secs(5));
        let c = connect(&o, Box::new(crate::random::SeededRandom::new(1))).unwrap();
        assert_eq!(c.plan.str_field("", "backend"), Ok("etcd"));
        assert!(c.engine.is_idle());
        assert!(connect(&ClientOptions::new("zookeeper://h"), Box::new(crate::random::SeededRandom::new(2))).is_err());
    }
}
