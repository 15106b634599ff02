//! Plain conversions between JavaScript values and the engine's data: options in, requests and
//! events out, ioredis replies and errors in. No lock logic lives here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use js_sys::{Array, Object, Reflect, Uint8Array};
use lockgate_core::connect::{ClientOptions, Spelling};
use lockgate_core::engine::{Done, LeaderInfo, LeaseId, OpId, Wait};
use lockgate_core::options::{duration_in_range, Unit, MAX_DURATION, MIN_ENTRY_TTL, MIN_LEASE};
use lockgate_core::redis::reply::{self, Reply};
use lockgate_core::redis::{Request, RequestKind};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, ErrorKind, Event, LockOptions, Result};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::errors;

/// A driver timestamp (`performance.now()`, ms) as an engine instant.
pub fn instant(ms: f64) -> Instant {
    Instant::from_millis_f64(ms)
}

/// An engine instant as `performance.now()` milliseconds.
pub fn millis(i: Instant) -> f64 {
    i.since_origin().as_secs_f64() * 1000.0
}

/// An id the engine minted, as a JS number (ids count up from 1 and stay far below 2^53).
pub fn id_to_js(id: u64) -> f64 {
    id as f64
}

/// A JS number back to an id; anything that is not a non-negative integer maps to an id the
/// engine never issued (0), which every entry point ignores.
pub fn id_from_js(id: f64) -> u64 {
    if id.is_finite() && id >= 1.0 && id.fract() == 0.0 && id <= 9_007_199_254_740_991.0 {
        id as u64
    } else {
        0
    }
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::invalid(msg)
}

pub fn describe(v: &JsValue) -> String {
    if v.is_null() {
        "null".into()
    } else if let Some(s) = v.as_string() {
        let s: String = s.chars().take(40).collect();
        format!("the string {s:?}")
    } else {
        v.js_typeof().as_string().unwrap_or_else(|| "a value".into())
    }
}

/// A lock name: a well-formed string (lone surrogates would collide after UTF-8 conversion).
pub fn name(v: &JsValue) -> Result<String> {
    let Some(js) = v.dyn_ref::<js_sys::JsString>() else {
        return Err(invalid(format!("lock name must be a string, got {}", describe(v))));
    };
    if !js.is_valid_utf16() {
        return Err(invalid("lock name must be well-formed Unicode (it has a lone surrogate)"));
    }
    let s: String = js.into();
    lockgate_core::options::validate_name(&s)?;
    Ok(s)
}

/// A duration in milliseconds given as a JS number, from zero up to 30 days.
pub fn millis_arg(what: &str, v: &JsValue) -> Result<Duration> {
    millis_in(what, v, Duration::ZERO, MAX_DURATION)
}

/// A duration in milliseconds given as a JS number, between `min` and `max`. The core checks
/// it under `what`, the option as the user spelled it, in milliseconds (`leaseMs must be at
/// least 10 ms, got 5 ms`), so no later check has to speak in the core's own names.
pub fn millis_in(what: &str, v: &JsValue, min: Duration, max: Duration) -> Result<Duration> {
    match v.as_f64() {
        Some(ms) => duration_in_range(what, ms, Unit::Millis, min, max),
        None => Err(invalid(format!("{what} must be a number of milliseconds, got {}", describe(v)))),
    }
}

/// A lease in milliseconds (`leaseMs`, `maxLeaseMs`, `extend(ms)`): 10 ms to 30 days.
pub fn lease_millis(what: &str, v: &JsValue) -> Result<Duration> {
    millis_in(what, v, MIN_LEASE, MAX_DURATION)
}

/// Reads the own enumerable keys of an options object, rejecting unknown ones (a misspelt option
/// silently falling back to a default would be worse than an error); `known: None` leaves that
/// to the caller (the core's setter knows the client options).
pub(crate) fn option_entries(what: &str, v: &JsValue, known: Option<&[&str]>) -> Result<Vec<(String, JsValue)>> {
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new());
    }
    if !v.is_object() || Array::is_array(v) || v.is_function() {
        return Err(invalid(format!("{what} must be an object, got {}", describe(v))));
    }
    let obj: &Object = v.unchecked_ref();
    let mut out = Vec::new();
    for key in Object::keys(obj).iter() {
        let key = key.as_string().unwrap_or_default();
        if known.is_some_and(|known| !known.contains(&key.as_str())) {
            return Err(invalid(format!(
                "unknown {what} key {key:?}; expected one of {}",
                known.unwrap_or_default().join(", ")
            )));
        }
        let value = Reflect::get(obj, &JsValue::from_str(&key)).unwrap_or(JsValue::UNDEFINED);
        if !value.is_undefined() {
            out.push((key, value));
        }
    }
    Ok(out)
}

/// The options of one lock handle: the lease options, plus the flags some handles take.
pub struct HandleOptions {
    pub lock: LockOptions,
    /// `reentrant` (mutexes and read-write locks; default false).
    pub reentrant: bool,
    /// `writersFirst` (read-write locks; default true).
    pub writers_first: bool,
    /// Whether waiters' queue entries have a lease of their own (`entryTtlMs` applies: Redis).
    pub entry_ttl: bool,
}

fn boolean(what: &str, v: &JsValue) -> Result<bool> {
    v.as_bool().ok_or_else(|| invalid(format!("{what} must be a boolean, got {}", describe(v))))
}

/// `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }` plus the keys in `flags` (`reentrant`,
/// `writersFirst`) → [`HandleOptions`], with the defaults and rules of `client`'s backend
/// (`ClientOptions::lock_options`: e.g. a Redlock lease within its `maxLeaseMs`); `what` names
/// the options in errors.
pub fn handle_options(what: &str, v: &JsValue, flags: &[&str], client: &ClientOptions) -> Result<HandleOptions> {
    let (mut lease, mut renew, mut wait, mut ttl) = (None, None, None, None);
    let mut reentrant = false;
    let mut writers_first = true;
    let known: Vec<&str> =
        ["leaseMs", "autoRenew", "waitTimeoutMs", "entryTtlMs"].iter().chain(flags).copied().collect();
    for (key, value) in option_entries(what, v, Some(&known))? {
        match key.as_str() {
            "reentrant" => reentrant = boolean("reentrant", &value)?,
            "writersFirst" => writers_first = boolean("writersFirst", &value)?,
            "leaseMs" => lease = Some(lease_millis("leaseMs", &value)?),
            "autoRenew" => renew = Some(boolean("autoRenew", &value)?),
            "waitTimeoutMs" => wait = wait_millis("waitTimeoutMs", &value)?,
            "entryTtlMs" => ttl = Some(millis_in("entryTtlMs", &value, MIN_ENTRY_TTL, MAX_DURATION)?),
            _ => unreachable!("filtered by option_entries"),
        }
    }
    let lock = client.lock_options(lease, renew, wait, ttl, &Spelling::JS)?;
    let entry_ttl = client.capabilities()?.entry_ttl;
    Ok(HandleOptions { lock, reentrant, writers_first, entry_ttl })
}

/// A semaphore's permit count: a whole JS number (the core checks the range).
pub fn permits(v: &JsValue) -> Result<u32> {
    match v.as_f64() {
        Some(n) if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) => Ok(n as u32),
        Some(n) => Err(invalid(format!(
            "permits must be a whole number between 1 and {}, got {n}",
            lockgate_core::options::MAX_PERMITS
        ))),
        None => Err(invalid(format!("permits must be a number, got {}", describe(v)))),
    }
}

/// The value a leader publishes: a well-formed string (the core checks its length).
pub fn leader_value(v: &JsValue) -> Result<String> {
    let Some(js) = v.dyn_ref::<js_sys::JsString>() else {
        return Err(invalid(format!("the leader value must be a string, got {}", describe(v))));
    };
    if !js.is_valid_utf16() {
        return Err(invalid("the leader value must be well-formed Unicode (it has a lone surrogate)"));
    }
    Ok(js.into())
}

/// A wait in ms: `Infinity` (or `null`) waits without limit.
fn wait_millis(what: &str, v: &JsValue) -> Result<Option<Duration>> {
    if v.is_null() || v.as_f64() == Some(f64::INFINITY) {
        return Ok(None);
    }
    millis_arg(what, v).map(Some)
}

/// How an acquire waits: one attempt (`tryOnce`), else the `timeoutMs` of `options` (`{
/// timeoutMs, signal }`; `signal` is the JavaScript layer's) or, absent, the lock's default wait.
pub fn acquire_wait(options: &JsValue, try_once: bool, default: Option<Duration>) -> Result<Wait> {
    let mut timeout = default;
    for (key, value) in option_entries("acquire option", options, Some(&["timeoutMs", "signal"]))? {
        if key == "timeoutMs" {
            timeout = wait_millis("timeoutMs", &value)?;
        }
    }
    Ok(match (try_once, timeout) {
        (true, _) => Wait::Try,
        (false, Some(d)) => Wait::For(d),
        (false, None) => Wait::Forever,
    })
}

/// A duration in ms as a JS number.
pub fn duration_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A wait in ms as a JS number: `Infinity` for no limit.
pub fn wait_ms(d: Option<Duration>) -> f64 {
    d.map_or(f64::INFINITY, duration_ms)
}

#[wasm_bindgen]
extern "C" {
    /// Factories the JavaScript driver supplies for the objects it receives: one call builds
    /// one object (cheaper than setting its properties one by one across the boundary).
    pub type Shapes;

    /// `{ kind, op, lease, fencingToken, validUntil, wasHeld, error }` (unused fields `undefined`).
    #[wasm_bindgen(method)]
    #[allow(clippy::too_many_arguments)]
    fn event(
        this: &Shapes,
        kind: &JsValue,
        op: &JsValue,
        lease: &JsValue,
        fencing_token: &JsValue,
        valid_until: &JsValue,
        was_held: &JsValue,
        error: &JsValue,
        waiter: &JsValue,
    ) -> JsValue;

    /// `{ kind: 'observed', op, value, term, remainingMs, waiter }`; `value` is `undefined` when
    /// the election has no leader.
    #[wasm_bindgen(method)]
    fn observed(this: &Shapes, op: &JsValue, value: &JsValue, term: &JsValue, remaining_ms: &JsValue, waiter: &JsValue) -> JsValue;
}

/// JavaScript strings for byte strings the engine sends again and again (command names, script
/// digests, keys, channels, tokens between acquire and release): each is decoded once.
#[derive(Default)]
pub struct StrCache {
    map: HashMap<Box<[u8]>, JsValue, BuildHasherDefault<Fx>>,
}

/// An Fx-style word-at-a-time hash: the cache's keys are short and a collision only costs a
/// comparison, so SipHash's cost buys nothing here.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }
}

impl StrCache {
    const MAX_ENTRIES: usize = 1024;

    /// The argument as a JS string when it is UTF-8 (all of lockgate's are), else a Uint8Array.
    fn arg(&mut self, bytes: &[u8]) -> JsValue {
        if let Some(v) = self.map.get(bytes) {
            return v.clone();
        }
        let v = match std::str::from_utf8(bytes) {
            Ok(s) => JsValue::from_str(s),
            Err(_) => return Uint8Array::from(bytes).into(),
        };
        if self.map.len() >= Self::MAX_ENTRIES {
            self.map.clear();
        }
        self.map.insert(bytes.into(), v.clone());
        v
    }

    fn str(&mut self, s: &str) -> JsValue {
        self.arg(s.as_bytes())
    }
}

/// The driver's view of a Redis request, as one flat array (handed over in a single boundary
/// crossing, with no nested arrays to build): `[id, 0, n, argc₁, name₁, args₁…, argc₂, …]` for
/// a pipeline of `n` commands, `[id, 0, -1, channel]` for a subscription, `[id, 0, -2,
/// description]` for a kind this binding does not know (the driver fails it).
pub fn request_to_js(r: &Request, cache: &mut StrCache) -> Vec<JsValue> {
    let id = JsValue::from_f64(id_to_js(r.id.0));
    match &r.kind {
        RequestKind::Pipeline(commands) => {
            let len = 3 + commands.iter().map(|c| 1 + c.0.len()).sum::<usize>();
            let mut out = Vec::with_capacity(len);
            out.push(id);
            out.push(JsValue::from_f64(0.0));
            out.push(JsValue::from_f64(commands.len() as f64));
            for c in commands {
                out.push(JsValue::from_f64(c.0.len() as f64));
                out.extend(c.0.iter().map(|a| cache.arg(a)));
            }
            out
        }
        RequestKind::Subscribe(channel) => {
            vec![id, JsValue::from_f64(0.0), JsValue::from_f64(-1.0), cache.str(channel)]
        }
        other => vec![id, JsValue::from_f64(0.0), JsValue::from_f64(-2.0), JsValue::from_str(&format!("{other:?}"))],
    }
}

/// The arguments of one `shapes.event(kind, ...)` call besides `kind`; `None` is `undefined`.
#[derive(Default)]
struct EventFields<'a> {
    op: Option<OpId>,
    lease: Option<LeaseId>,
    fencing_token: Option<u64>,
    valid_until: Option<Instant>,
    was_held: Option<bool>,
    error: Option<&'a Error>,
}

impl EventFields<'_> {
    fn to_js(&self, kind: &str, waiter: &JsValue, shapes: &Shapes, cache: &mut StrCache) -> JsValue {
        let id = |x: Option<u64>| x.map_or(JsValue::UNDEFINED, |x| JsValue::from_f64(id_to_js(x)));
        shapes.event(
            &cache.str(kind),
            &id(self.op.map(|o| o.0)),
            &id(self.lease.map(|l| l.0)),
            &self.fencing_token.map_or(JsValue::UNDEFINED, JsValue::from),
            &self.valid_until.map_or(JsValue::UNDEFINED, |t| JsValue::from_f64(millis(t))),
            &self.was_held.map_or(JsValue::UNDEFINED, JsValue::from_bool),
            &self.error.map_or(JsValue::UNDEFINED, errors::to_js),
            waiter,
        )
    }
}

/// An engine's event (its outcome in the backend-neutral [`Done`]) as one flat object with a
/// `kind`: `acquired`, `notAcquired`, `released`, `extended`, `observed`, `failed` (these carry
/// `op`), `renewed`, `atRisk` and `lost` (these carry `lease`). `fencingToken` is `undefined`
/// where the backend issues none (Redlock).
pub fn event_to_js(ev: &Event<Done>, waiter: &JsValue, shapes: &Shapes, cache: &mut StrCache) -> JsValue {
    let none = EventFields::default();
    let (kind, fields) = match ev {
        Event::Completed { op, outcome } => {
            let (kind, fields) = match outcome {
                Done::Acquired { lease, fencing_token, valid_until } => {
                    let (lease, valid_until) = (Some(*lease), Some(*valid_until));
                    ("acquired", EventFields { lease, fencing_token: *fencing_token, valid_until, ..none })
                }
                Done::NotAcquired => ("notAcquired", none),
                Done::Released { was_held } => ("released", EventFields { was_held: Some(*was_held), ..none }),
                Done::Extended { valid_until } => ("extended", EventFields { valid_until: Some(*valid_until), ..none }),
                Done::Failed(e) => ("failed", EventFields { error: Some(e), ..none }),
                Done::Observed(leader) => return observed_to_js(*op, leader.as_ref(), waiter, shapes),
            };
            (kind, EventFields { op: Some(*op), ..fields })
        }
        Event::Renewed { lease, valid_until } => {
            ("renewed", EventFields { lease: Some(*lease), valid_until: Some(*valid_until), ..none })
        }
        Event::AtRisk { lease, valid_until } => {
            ("atRisk", EventFields { lease: Some(*lease), valid_until: Some(*valid_until), ..none })
        }
        Event::Lost { lease, error } => ("lost", EventFields { lease: Some(*lease), error: Some(error), ..none }),
    };
    fields.to_js(kind, waiter, shapes, cache)
}

/// `{ kind: 'observed', op, value, term, remainingMs }` (no leader: `value` etc. `undefined`).
fn observed_to_js(op: OpId, leader: Option<&LeaderInfo>, waiter: &JsValue, shapes: &Shapes) -> JsValue {
    let op = JsValue::from_f64(id_to_js(op.0));
    let none = JsValue::UNDEFINED;
    match leader {
        None => shapes.observed(&op, &none, &none, &none, waiter),
        Some(leader) => shapes.observed(
            &op,
            &JsValue::from_str(&leader.value),
            &JsValue::from(leader.term),
            &JsValue::from_f64(duration_ms(leader.remaining)),
            waiter,
        ),
    }
}

/// Bytes of a channel or payload given as a string or a Buffer.
pub fn bytes(v: &JsValue) -> Option<Vec<u8>> {
    if let Some(s) = v.as_string() {
        return Some(s.into_bytes());
    }
    v.dyn_ref::<Uint8Array>().map(|b| b.to_vec())
}

const MAX_DEPTH: usize = 32;

/// One ioredis reply value as an engine [`Reply`]. Bulk strings arrive as strings (or Buffers),
/// integers as numbers; an integer beyond 2^53 has lost precision and is refused.
fn reply_from_js(v: &JsValue, depth: usize) -> Reply {
    // Most frequent first: integers (flags, TTLs), then bulk strings.
    if let Some(n) = v.as_f64() {
        return if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_991.0 {
            Reply::Int(n as i64)
        } else {
            Reply::Other(format!("number {n} (not an integer below 2^53)"))
        };
    }
    if let Some(s) = v.as_string() {
        return Reply::Data(s.into_bytes());
    }
    if let Some(a) = v.dyn_ref::<Array>() {
        if depth >= MAX_DEPTH {
            return Reply::Other("array nested too deeply".into());
        }
        return Reply::Array(a.iter().map(|x| reply_from_js(&x, depth + 1)).collect());
    }
    if v.is_null() || v.is_undefined() {
        return Reply::Nil;
    }
    if let Some(b) = v.dyn_ref::<Uint8Array>() {
        return Reply::Data(b.to_vec());
    }
    if v.is_bigint() {
        return match i64::try_from(v.clone()) {
            Ok(i) => Reply::Int(i),
            Err(_) => Reply::Other("integer outside 64 bits".into()),
        };
    }
    if let Some(e) = v.dyn_ref::<js_sys::Error>() {
        return Reply::Error(e.message().into());
    }
    Reply::Other(v.js_typeof().as_string().unwrap_or_else(|| "unknown".into()))
}

fn error_message(err: &JsValue) -> String {
    if let Some(e) = err.dyn_ref::<js_sys::Error>() {
        return e.message().into();
    }
    err.as_string().unwrap_or_else(|| format!("non-Error value thrown ({})", describe(err)))
}

fn is_reply_error(err: &JsValue) -> bool {
    Reflect::get(err, &"name".into()).ok().and_then(|n| n.as_string()).is_some_and(|n| n == "ReplyError")
}

/// A server error reply (ioredis `ReplyError`, or one parsed by `wire.rs`) that must fail the
/// whole request rather than stay in place as [`Reply::Error`]: refused credentials and an
/// unavailable server.
pub(crate) fn request_level(message: &str) -> Option<ErrorKind> {
    if reply::is_auth_refused(message) {
        Some(ErrorKind::Authentication)
    } else if reply::is_transient_error(message) {
        // The core's list (PROTOCOL.md §4): BUSY, LOADING, TRYAGAIN, MASTERDOWN, CLUSTERDOWN, ...
        Some(ErrorKind::Connection)
    } else {
        None
    }
}

/// An error the Redis client threw (connect failure, closed connection, command timeout, or a
/// server error outside a pipeline) as a lockgate error.
pub fn client_error(err: &JsValue) -> Error {
    let message = error_message(err);
    let kind = if is_reply_error(err) {
        request_level(&message).unwrap_or(ErrorKind::Protocol)
    } else if reply::mentions_auth_refused(&message) {
        ErrorKind::Authentication
    } else {
        ErrorKind::Connection
    };
    Error::new(kind, message)
}

/// The successful reply of a one-command request (the driver's fast path: no `[[null, value]]`
/// wrapping to build and unpack).
pub fn single_result(value: &JsValue) -> Result<Vec<Reply>> {
    Ok(vec![reply_from_js(value, 0)])
}

/// ioredis pipeline results `[[err, value], ...]` as one reply per command. A transport error on
/// any command fails the whole request (the engine then treats every command as unanswered).
pub fn pipeline_results(results: &JsValue) -> Result<Vec<Reply>> {
    let Some(items) = results.dyn_ref::<Array>() else {
        return Err(Error::protocol(format!("pipeline results must be an array, got {}", describe(results))));
    };
    let mut out = Vec::with_capacity(items.length() as usize);
    for item in items.iter() {
        let Some(pair) = item.dyn_ref::<Array>() else {
            return Err(Error::protocol("each pipeline result must be [error, value]"));
        };
        let err = pair.get(0);
        if err.is_null() || err.is_undefined() {
            out.push(reply_from_js(&pair.get(1), 0));
        } else {
            out.push(single_error(&err)?);
        }
    }
    Ok(out)
}

/// Sets a plain data property on a fresh object (which cannot fail).
pub fn set(obj: &Object, key: &str, value: JsValue) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value);
}

/// What ioredis rejected a one-command request with, as the engine's one reply: a server error
/// reply stays a reply (`NOSCRIPT` is the engine's to handle), except refused credentials and
/// an unavailable server, which fail the request like transport errors do.
pub fn single_error(err: &JsValue) -> Result<Reply> {
    if is_reply_error(err) {
        let message = error_message(err);
        if let Some(kind) = request_level(&message) {
            return Err(Error::new(kind, message));
        }
        return Ok(Reply::Error(message));
    }
    Err(client_error(err))
}
