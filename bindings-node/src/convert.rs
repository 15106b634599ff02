//! Plain conversions between JavaScript values and the engine's: options in, events out. No lock
//! logic lives here (and no backend: requests, replies and notices are `data.rs`'s).

use js_sys::{Array, Object, Reflect};
use lockgate_core::connect::{ClientOptions, Spelling};
use lockgate_core::engine::{Done, LeaderInfo, LeaseId, Measure, OpId, Telemetry, Wait};
use lockgate_core::options::{duration_in_range, Unit, MAX_DURATION, MIN_ENTRY_TTL, MIN_LEASE};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, Event, LockOptions, Result};
use serde_json::{json, Map, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::errors;
use crate::js::{describe, StrCache};

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

/// A lock name: a well-formed string (lone surrogates would collide after UTF-8 conversion).
pub fn name(v: &JsValue) -> Result<String> {
    let s = well_formed("lock name", v)?;
    lockgate_core::options::validate_name(&s)?;
    Ok(s)
}

/// A break's fencing token: `undefined`/`null` for none, else a non-negative safe integer
/// (a number or a bigint).
pub fn fencing_token(v: &JsValue) -> Result<Option<u64>> {
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    let bad = || Error::invalid(format!("token must be a non-negative integer fencing token, got {}", describe(v)));
    if let Some(n) = v.as_f64() {
        if n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&n) {
            return Ok(Some(n as u64));
        }
        return Err(bad());
    }
    if v.is_bigint() {
        let text = js_sys::BigInt::from(v.clone()).to_string(10).map(String::from).unwrap_or_default();
        return text.parse::<u64>().map(Some).map_err(|_| bad());
    }
    Err(bad())
}

/// `v` as a string, which must be well-formed Unicode (`what` names it in errors).
fn well_formed(what: &str, v: &JsValue) -> Result<String> {
    let Some(js) = v.dyn_ref::<js_sys::JsString>() else {
        return Err(Error::invalid(format!("{what} must be a string, got {}", describe(v))));
    };
    if !js.is_valid_utf16() {
        return Err(Error::invalid(format!("{what} must be well-formed Unicode (it has a lone surrogate)")));
    }
    Ok(js.into())
}

/// A duration in milliseconds given as a JS number, between `min` and `max`. The core checks
/// it under `what`, the option as the user spelled it, in milliseconds (`leaseMs must be at
/// least 10 ms, got 5 ms`), so no later check has to speak in the core's own names.
pub fn millis_in(what: &str, v: &JsValue, min: Duration, max: Duration) -> Result<Duration> {
    match v.as_f64() {
        Some(ms) => duration_in_range(what, ms, Unit::Millis, min, max),
        None => Err(Error::invalid(format!("{what} must be a number of milliseconds, got {}", describe(v)))),
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
        return Err(Error::invalid(format!("{what} must be an object, got {}", describe(v))));
    }
    let obj: &Object = v.unchecked_ref();
    let mut out = Vec::new();
    for key in Object::keys(obj).iter() {
        let key = key.as_string().unwrap_or_default();
        if known.is_some_and(|known| !known.contains(&key.as_str())) {
            return Err(Error::invalid(format!(
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
    v.as_bool().ok_or_else(|| Error::invalid(format!("{what} must be a boolean, got {}", describe(v))))
}

/// `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, minHoldMs, maxHoldMs }` plus the keys in `flags` (`reentrant`,
/// `writersFirst`) → [`HandleOptions`], with the defaults and rules of `client`'s backend
/// (`ClientOptions::lock_options`: e.g. a Redlock lease within its `maxLeaseMs`); `what` names
/// the options in errors.
pub fn handle_options(what: &str, v: &JsValue, flags: &[&str], client: &ClientOptions) -> Result<HandleOptions> {
    let (mut lease, mut renew, mut wait, mut ttl, mut min_hold, mut max_hold) = (None, None, None, None, None, None);
    let mut reentrant = false;
    let mut writers_first = true;
    let known: Vec<&str> =
        ["leaseMs", "autoRenew", "waitTimeoutMs", "entryTtlMs", "minHoldMs", "maxHoldMs"].iter().chain(flags).copied().collect();
    for (key, value) in option_entries(what, v, Some(&known))? {
        match key.as_str() {
            "reentrant" => reentrant = boolean("reentrant", &value)?,
            "writersFirst" => writers_first = boolean("writersFirst", &value)?,
            "leaseMs" => lease = Some(lease_millis("leaseMs", &value)?),
            "autoRenew" => renew = Some(boolean("autoRenew", &value)?),
            "waitTimeoutMs" => wait = wait_millis("waitTimeoutMs", &value)?,
            "entryTtlMs" => ttl = Some(millis_in("entryTtlMs", &value, MIN_ENTRY_TTL, MAX_DURATION)?),
            // Ranges and rules are the core's (`lock_holds`); here only a number of ms.
            "minHoldMs" => min_hold = Some(millis_in("minHoldMs", &value, Duration::ZERO, MAX_DURATION)?),
            "maxHoldMs" => max_hold = Some(millis_in("maxHoldMs", &value, Duration::ZERO, MAX_DURATION)?),
            _ => unreachable!("filtered by option_entries"),
        }
    }
    let lock = client.lock_options(lease, renew, wait, ttl, &Spelling::JS)?;
    let lock = client.lock_holds(lock, min_hold, max_hold, &Spelling::JS)?;
    let entry_ttl = client.capabilities()?.entry_ttl;
    Ok(HandleOptions { lock, reentrant, writers_first, entry_ttl })
}

/// A semaphore's permit count: a whole JS number (the core checks the range).
pub fn permits(v: &JsValue) -> Result<u32> {
    match v.as_f64() {
        Some(n) if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) => Ok(n as u32),
        Some(n) => Err(Error::invalid(format!(
            "permits must be a whole number between 1 and {}, got {n}",
            lockgate_core::options::MAX_PERMITS
        ))),
        None => Err(Error::invalid(format!("permits must be a number, got {}", describe(v)))),
    }
}

/// The value a leader publishes: a well-formed string (the core checks its length).
pub fn leader_value(v: &JsValue) -> Result<String> {
    well_formed("the leader value", v)
}

/// A wait in ms: `Infinity` (or `null`) waits without limit.
fn wait_millis(what: &str, v: &JsValue) -> Result<Option<Duration>> {
    if v.is_null() || v.as_f64() == Some(f64::INFINITY) {
        return Ok(None);
    }
    millis_in(what, v, Duration::ZERO, MAX_DURATION).map(Some)
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
    fn to_js(&self, kind: &'static str, waiter: &JsValue, shapes: &Shapes, cache: &mut StrCache) -> JsValue {
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
                Done::Inspected(snapshot) => return inspected_to_js(*op, snapshot, waiter, cache),
                Done::Broken(broken) => return broken_to_js(*op, broken.as_ref(), waiter, cache),
                Done::Listed(page) => return listed_to_js(*op, page, waiter, cache),
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
        // Kept by `poll_event` for `takeTelemetry`.
        Event::Telemetry(_) => return JsValue::UNDEFINED,
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

/// Telemetry events as `lib/telemetry.js` publishes them, as one JSON array text: `{ event,
/// message, warning, backend, primitive, lock, ...measurements }` with the core's measurement
/// keys in JavaScript's case and durations in milliseconds (`wait_s` -> `waitMs`); only
/// `for_open_telemetry`, the core's metric updates as `metrics: [[instrument, value,
/// attributes]]` and the acquire an event ended as `acquire: { outcome, waitMs, error,
/// attributes }`. One crossing and one `JSON.parse` a batch, where each property set on a
/// JavaScript object would be a crossing of its own.
pub fn telemetry_json(events: &[Telemetry], for_open_telemetry: bool) -> String {
    Value::Array(events.iter().map(|t| telemetry_value(t, for_open_telemetry)).collect()).to_string()
}

/// Metric or span attributes as a JSON object.
fn attributes(pairs: &[(&'static str, String)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), Value::from(v.as_str()))).collect()
}

fn telemetry_value(t: &Telemetry, for_open_telemetry: bool) -> Value {
    let mut o = Map::new();
    o.insert("event".into(), t.what.name().into());
    o.insert("message".into(), t.what.summary().into());
    o.insert("warning".into(), t.what.is_warning().into());
    o.insert("backend".into(), t.backend.into());
    if let Some(p) = t.primitive {
        o.insert("primitive".into(), p.into());
    }
    if let Some(name) = &t.name {
        o.insert("lock".into(), Value::from(&**name));
    }
    for (key, m) in t.what.measurements() {
        let (key, value) = match m {
            Measure::Seconds(d) => (format!("{}Ms", key.trim_end_matches("_s")), duration_ms(d).into()),
            Measure::Flag(b) => (key.to_string(), b.into()),
            Measure::Text(text) => (key.to_string(), text.into()),
            Measure::Count(n) => (key.to_string(), n.into()),
        };
        o.insert(key, value);
    }
    if for_open_telemetry {
        let metrics = t.metric_updates().into_iter().map(|u| json!([u.instrument.name, u.value, attributes(&u.attributes)]));
        o.insert("metrics".into(), Value::Array(metrics.collect()));
        if let Some(ended) = t.ended_acquire() {
            let mut attrs = attributes(&t.attributes());
            attrs.insert("lockgate.outcome".into(), ended.outcome.into());
            let span = json!({ "outcome": ended.outcome, "waitMs": duration_ms(ended.waited), "error": ended.error, "attributes": attrs });
            o.insert("acquire".into(), span);
        }
    }
    Value::Object(o)
}

/// `{ kind: 'inspected', op, snapshot, waiter }`: the snapshot as the core spells it in
/// camelCase (`Snapshot::to_data`), converted generically.
fn inspected_to_js(op: OpId, snapshot: &lockgate_core::inspect::Snapshot, waiter: &JsValue, cache: &mut StrCache) -> JsValue {
    let o = Object::new();
    set(&o, "kind", cache.str("inspected"));
    set(&o, "op", JsValue::from_f64(id_to_js(op.0)));
    set(&o, "snapshot", crate::data::to_js(&snapshot.to_data(true), cache));
    set(&o, "waiter", waiter.clone());
    o.into()
}

/// `{ kind: 'broken', op, broken: { label, fencingToken } | null }`.
fn broken_to_js(op: OpId, broken: Option<&lockgate_core::break_lock::Broken>, waiter: &JsValue, cache: &mut StrCache) -> JsValue {
    let o = Object::new();
    set(&o, "kind", cache.str("broken"));
    set(&o, "op", JsValue::from_f64(id_to_js(op.0)));
    set(&o, "broken", broken.map_or(JsValue::NULL, |b| crate::data::to_js(&b.to_data(true), cache)));
    set(&o, "waiter", waiter.clone());
    o.into()
}

/// `{ kind: 'listed', op, page: { entries, cursor }, waiter }` (see `listing::Page::to_data`).
fn listed_to_js(op: OpId, page: &lockgate_core::listing::Page, waiter: &JsValue, cache: &mut StrCache) -> JsValue {
    let o = Object::new();
    set(&o, "kind", cache.str("listed"));
    set(&o, "op", JsValue::from_f64(id_to_js(op.0)));
    set(&o, "page", crate::data::to_js(&page.to_data(), cache));
    set(&o, "waiter", waiter.clone());
    o.into()
}

/// The message of what a transport threw (an `Error`, else the value described).
pub fn error_message(err: &JsValue) -> String {
    if let Some(e) = err.dyn_ref::<js_sys::Error>() {
        return e.message().into();
    }
    err.as_string().unwrap_or_else(|| format!("non-Error value thrown ({})", describe(err)))
}

/// Sets a plain data property on a fresh object (which cannot fail).
pub fn set(obj: &Object, key: &str, value: JsValue) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value);
}
