//! The core's connection rules for JavaScript (`lockgate_core::connect`): the Redis URL grammar
//! and the client options, so `connect()` and `connectRedlock()` accept, default and refuse
//! exactly what the native, Python and JVM clients do, with the same messages in Node's names
//! and milliseconds. `lib/targets.js` calls these; the JavaScript keeps only the ioredis and
//! socket plumbing.

use js_sys::{Object, Reflect};
use lockgate_core::connect::{ClientOptions, RedisUrl, Spelling, DEFAULT_TIMEOUT};
use lockgate_core::options::{positive_duration_from_f64, Unit, MAX_DURATION};
use lockgate_core::{Error, Result};
use wasm_bindgen::prelude::*;

use crate::convert;
use crate::errors::{js, JsResult};

/// Every key of `connect(target, options)`.
const CLIENT_KEYS: [&str; 6] = ["keyPrefix", "connectTimeoutMs", "commandTimeoutMs", "redisOptions", "cluster", "replicaAcks"];

fn set(obj: &Object, key: &str, value: JsValue) {
    // Setting a plain data property on a fresh object cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value);
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn opt_str(s: Option<String>) -> JsValue {
    s.map_or(JsValue::UNDEFINED, |s| JsValue::from_str(&s))
}

/// Parses `url` by the core's grammar (`redis[s]://[[user]:password@]host[:port][/db]
/// [?protocol=resp2|resp3]`, core/src/connect/url.rs) and returns where it points:
/// `{ host, port, username, password, db, tls, redacted, identity }` (credentials decoded,
/// `undefined` when absent; `redacted` is the URL with its password as `***`; `identity` is
/// `host:port/db`). Throws `InvalidArgumentError`, whose message never holds the password.
#[wasm_bindgen(js_name = parseUrl)]
pub fn parse_url(url: JsValue) -> JsResult<Object> {
    let Some(text) = url.as_string() else {
        return Err(crate::errors::to_js(&Error::invalid("a Redis URL must be a string")));
    };
    let parsed = js(RedisUrl::parse(&text))?;
    let e = parsed.endpoint();
    let out = Object::new();
    set(&out, "host", JsValue::from_str(&e.host));
    set(&out, "port", JsValue::from_f64(f64::from(e.port)));
    set(&out, "username", opt_str(e.username));
    set(&out, "password", opt_str(e.password));
    set(&out, "db", JsValue::from_f64(f64::from(e.db)));
    set(&out, "tls", JsValue::from_bool(e.tls));
    set(&out, "redacted", JsValue::from_str(&parsed.to_string()));
    set(&out, "identity", JsValue::from_str(&parsed.identity()));
    Ok(out)
}

/// A positive number of milliseconds (`connectTimeoutMs`, `commandTimeoutMs`), `None` when absent.
fn timeout_ms(what: &str, v: &JsValue) -> Result<Option<lockgate_core::time::Duration>> {
    if v.is_undefined() {
        return Ok(None);
    }
    match v.as_f64() {
        Some(ms) => positive_duration_from_f64(what, ms, Unit::Millis).map(Some),
        None => Err(Error::invalid(format!("{what} must be a positive number of milliseconds"))),
    }
}

/// Checks the client options of `connect(target, options)` by the core's rules and returns
/// them with the defaults filled in: `{ keyPrefix, connectTimeoutMs, commandTimeoutMs,
/// cluster, replicaAcks }` (`replicaAcks` is `{ replicas, timeoutMs }` with the shared 1000 ms
/// default, or `undefined`). `url` is the target when it is a URL string, else `undefined`
/// (an ioredis client or Cluster: `isCluster` says which, `ownCommandTimeoutMs` is that client's
/// own command timeout or `undefined` for none). Unknown keys and wrong types are refused too.
#[wasm_bindgen(js_name = clientSettings)]
pub fn client_settings(url: JsValue, options: JsValue, is_cluster: bool, own_command_timeout_ms: JsValue) -> JsResult<Object> {
    js(settings(url, options, is_cluster, own_command_timeout_ms))
}

fn settings(url: JsValue, options: JsValue, is_cluster: bool, own_command_timeout_ms: JsValue) -> Result<Object> {
    let spelling = &Spelling::JS;
    let entries = convert::option_entries("client option", &options, &CLIENT_KEYS)?;
    let is_url = url.is_string();
    let mut o = ClientOptions::new(url.as_string().unwrap_or_default());
    let mut command = None;
    let mut cluster = None;
    let mut redis_options = JsValue::UNDEFINED;
    for (key, value) in entries {
        match key.as_str() {
            "keyPrefix" => {
                if let Some(p) = convert::key_prefix(&value)? {
                    o.key_prefix = p;
                }
            }
            "connectTimeoutMs" => o.connect_timeout = timeout_ms("connectTimeoutMs", &value)?.unwrap_or(DEFAULT_TIMEOUT),
            "commandTimeoutMs" => command = timeout_ms("commandTimeoutMs", &value)?,
            "cluster" => {
                cluster = Some(value.as_bool().ok_or_else(|| Error::invalid("cluster must be a boolean"))?);
            }
            "redisOptions" => {
                if !value.is_object() || js_sys::Array::is_array(&value) || value.is_function() {
                    return Err(Error::invalid("redisOptions must be an object of ioredis options"));
                }
                redis_options = value;
            }
            "replicaAcks" => o.replica_acks = convert::replica_acks(&value)?,
            _ => unreachable!("filtered by option_entries"),
        }
    }
    if is_url {
        o.cluster = cluster.unwrap_or(false);
        // The command timeout of the connections this package opens: `commandTimeoutMs`, else
        // `redisOptions.commandTimeout`, else the core's default.
        let from_ioredis = get(&redis_options, "commandTimeout").as_f64();
        o.response_timeout = match (command, from_ioredis) {
            (Some(t), _) => t,
            (None, Some(ms)) => positive_duration_from_f64("redisOptions.commandTimeout", ms, Unit::Millis)?,
            (None, None) => DEFAULT_TIMEOUT,
        };
        o.validate_as(spelling)?;
        let parsed = RedisUrl::parse(&url.as_string().unwrap_or_default())?;
        if o.cluster && parsed.endpoint().db != 0 {
            return Err(Error::invalid("a Redis Cluster has only database 0: remove the database from the URL"));
        }
    } else {
        if cluster.is_some() {
            return Err(Error::invalid(
                "the cluster option is for URLs; an ioredis client is a Cluster or not by itself",
            ));
        }
        o.cluster = is_cluster;
        // The given client's own command timeout bounds WAIT; none means no limit.
        o.response_timeout = match own_command_timeout_ms.as_f64() {
            Some(ms) if ms > 0.0 => positive_duration_from_f64(spelling.response_timeout, ms, Unit::Millis)?,
            _ => command.unwrap_or(MAX_DURATION),
        };
        o.validate_settings(spelling)?;
    }
    let out = Object::new();
    set(&out, "keyPrefix", JsValue::from_str(&o.key_prefix));
    set(&out, "connectTimeoutMs", JsValue::from_f64(convert::duration_ms(o.connect_timeout)));
    set(&out, "commandTimeoutMs", JsValue::from_f64(convert::duration_ms(o.response_timeout)));
    set(&out, "cluster", JsValue::from_bool(o.cluster));
    let acks = match o.replica_acks {
        Some(r) => {
            let a = Object::new();
            set(&a, "replicas", JsValue::from_f64(f64::from(r.replicas)));
            set(&a, "timeoutMs", JsValue::from_f64(convert::duration_ms(r.timeout)));
            a.into()
        }
        None => JsValue::UNDEFINED,
    };
    set(&out, "replicaAcks", acks);
    Ok(out)
}
