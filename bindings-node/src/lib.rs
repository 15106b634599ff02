//! The Node binding's WebAssembly half: lockgate's sans-IO engine exported to JavaScript as ONE
//! `Engine` class, whatever the backend: the core's data engine (`lockgate_core::data`), whose
//! requests, replies and notices are plain data, converted once by `data.rs`. The JavaScript
//! driver (`lib/driver.js`) follows the engine's driving contract: it feeds inputs with
//! `performance.now()` timestamps, hands each request to its backend's transport
//! (`lib/transport/<name>.js`), gives the replies back by request id, delivers events and keeps one
//! timer at `pollTimeout()`. Every export converts arguments, calls the core and maps errors
//! through [`errors::to_js`]; nothing here decides anything about locks, nor names a backend.

mod connect;
mod convert;
mod data;
mod errors;
mod js;

use lockgate_core::driving::{Awaiting, Claim, Drive, CLOSE_GRACE};
use lockgate_core::engine::metrics::{Instrument, INSTRUMENTS};
use lockgate_core::engine::{EventKind, LeaseId, OpId, RequestId, Telemetry, EVENTS};
use lockgate_core::connect::Spelling;
use lockgate_core::data::{capabilities_data, measure_key, millis, telemetry_row, Data, DynEngine};
use lockgate_core::handle::{self, Handle};
use lockgate_core::{Capability, Error, ErrorKind, Event};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

use convert::{id_from_js, id_to_js, instant, Shapes};
use js::StrCache;
use js_sys::{Array, Reflect};
use errors::{js, JsResult};

pub use errors::{error_kinds, set_error_factory};

/// One lock handle (`client.lock(...)`, `client.semaphore(...)`, each half of
/// `client.readWriteLock(...)`, each candidate of an election) for one engine: the core's
/// [`Handle`] (its backend decides which primitives exist and what the lease defaults to), shared
/// with the engine while one of its acquires is in flight, which settles it.
#[wasm_bindgen]
pub struct LockSpec(Rc<RefCell<Handle>>);

#[wasm_bindgen]
impl LockSpec {
    /// A handle of `kind` (`mutex`, `semaphore` of `permits` permits, `read`, `write`,
    /// `election`) on lock `name` with `options` (see `lockgate_core::handle::Handle::make`).
    pub fn make(engine: &Engine, kind: &str, name: JsValue, options: JsValue, permits: JsValue) -> JsResult<LockSpec> {
        let name = js(convert::name(&name))?;
        let given = js(convert::given(handle::options_name(kind), &options))?;
        let handle = Handle::make(&engine.client.options, kind, name, &given, &convert::value(&permits), &Spelling::JS);
        js(handle).map(LockSpec::from)
    }

    /// The handle of the lease `identity` names (`lease.identity()` of another client), with
    /// this client's `{ leaseMs, autoRenew }`.
    pub fn adopted(engine: &Engine, identity: JsValue, options: JsValue) -> JsResult<LockSpec> {
        let identity = js(identity.as_string().ok_or_else(|| Error::invalid("identity must be a string from lease.identity()")))?;
        let given = js(convert::given("adopt option", &options))?;
        js(Handle::adopted(&engine.client.options, &identity, &given, &Spelling::JS)).map(LockSpec::from)
    }

    /// This election's candidate publishing `value` (at most 4096 bytes of UTF-8).
    pub fn campaign(&self, value: JsValue) -> JsResult<LockSpec> {
        let value = js(convert::leader_value(&value))?;
        js(self.0.borrow().candidate(value)).map(LockSpec::from)
    }

    /// What the handle is, read once by JavaScript (`Handle::info`): `{ name, kind, reentrant,
    /// options }` plus `permits`, `writersFirst` or `value`.
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> JsValue {
        data::to_js(&self.0.borrow().info(), &mut StrCache::default())
    }

    /// Frees the place of `lease` (released through the handle): the handle may acquire again.
    pub fn free(&self, lease: f64) {
        self.0.borrow_mut().free(LeaseId(id_from_js(lease)));
    }
}

impl From<Handle> for LockSpec {
    fn from(h: Handle) -> LockSpec {
        LockSpec(Rc::new(RefCell::new(h)))
    }
}

/// The engine of one client, for any backend. Ids (`op`, `lease`, request `id`) are JS numbers;
/// times are `performance.now()` milliseconds.
#[wasm_bindgen]
pub struct Engine {
    core: Box<dyn DynEngine>,
    /// What the core made of connect()'s target and options (rules for every handle).
    client: connect::Connected,
    shapes: Shapes,
    strings: StrCache,
    /// The encoding buffer of `pollWire`, reused between batches.
    out: Vec<u8>,
    /// A request `pollWire` got after bytes (one that travels elsewhere): handed out next.
    stash: Option<Data>,
    /// What the transport opens, from the core (see [`Engine::plan`]).
    plan: JsValue,
    /// The driver's pending promises by op id (see [`Engine::wait`]).
    waiting: Awaiting<JsValue>,
    /// Telemetry raised and not converted yet: the driver takes it after each round of events
    /// (see [`Engine::take_telemetry`]).
    telemetry: Vec<Telemetry>,
    /// The handle of each acquire in flight, which its completion settles (`Handle::settle`).
    handles: HashMap<OpId, Rc<RefCell<Handle>>>,
}

#[wasm_bindgen]
impl Engine {
    /// Connects, as data: the core parses `url` (or, for a caller's ioredis connection(s),
    /// `given`, see `connect::connect`), checks and defaults `options`, and builds the engine of
    /// the backend the scheme selects. `shapes` holds the driver's event factories.
    pub fn connect(url: JsValue, options: JsValue, given: JsValue, shapes: Shapes) -> JsResult<Engine> {
        let client = js(connect::connect(&url, &options, &given))?;
        let rng = Box::new(lockgate_core::random::BufferedOsRandom::new());
        let connected = js(lockgate_core::data::connect(&client.options, rng))?;
        let connected = js(connected.ok_or_else(|| Error::unsupported("this backend has no data form for the Node binding")))?;
        js(client.check_transport(connected.plan.get("transport").and_then(Data::as_str).unwrap_or_default()))?;
        Ok(Engine {
            core: connected.engine,
            client,
            shapes,
            strings: StrCache::default(),
            out: Vec::new(),
            stash: None,
            plan: data::to_js(&connected.plan, &mut StrCache::default()),
            waiting: Awaiting::default(),
            telemetry: Vec::new(),
            handles: HashMap::new(),
        })
    }

    /// What the transport opens, from the core: its backend's data module documents the form
    /// (`lockgate_core::<backend>::data::plan`); `transport` names `lib/transport/<transport>.js`.
    #[wasm_bindgen(getter)]
    pub fn plan(&self) -> JsValue {
        self.plan.clone()
    }

    /// The URL with its passwords redacted, as the core shows it (what `client.url` and
    /// `String(client)` show, as Python's and Java's clients do); `undefined` for a caller's
    /// own ioredis connection(s), which have no URL.
    #[wasm_bindgen(getter)]
    pub fn url(&self) -> Option<String> {
        self.client.options.target().ok().map(|t| t.to_string())
    }

    /// What this client's backend offers (see `connect::Connected::capabilities`).
    #[wasm_bindgen(getter)]
    pub fn capabilities(&self) -> JsResult<JsValue> {
        js(self.client.options.capabilities()).map(|c| data::to_js(&capabilities_data(&c, true), &mut StrCache::default()))
    }

    /// Starts an acquire through `lock` (`Handle::acquire`: a reentrant handle holding its
    /// lease re-enters it; a non-reentrant one holding a live lease is `ALREADY_HELD`, sending
    /// nothing); returns its op id. `options` is `{ timeoutMs, signal }` (`timeoutMs` absent: the
    /// lock's `waitTimeoutMs`); `tryOnce` makes a single attempt.
    pub fn acquire(&mut self, now: f64, lock: &LockSpec, options: JsValue, try_once: bool) -> JsResult<f64> {
        let given = js(convert::given("acquire option", &options))?;
        let mut handle = lock.0.borrow_mut();
        let wait = js(handle::acquire_wait(&given, &["signal"], try_once, handle.options.wait_timeout, &Spelling::JS))?;
        let op = js(handle.acquire(&mut self.core, instant(now), wait))?;
        self.handles.insert(op, lock.0.clone());
        Ok(id_to_js(op.0))
    }

    /// Reads the leader of election `name`; completes as `observed`. Returns the op id.
    pub fn observe(&mut self, now: f64, name: JsValue) -> JsResult<f64> {
        js(self.client.options.capabilities().and_then(|c| c.require(Capability::Observe)))?;
        let name = js(convert::name(&name))?;
        // Each engine refuses what its backend cannot do (UNSUPPORTED): never a panic in wasm.
        let op = js(self.core.observe_leader(instant(now), &name))?;
        Ok(id_to_js(op.0))
    }

    /// Reads lock `name` as `kind` (`mutex`, `rw`, `semaphore`, `election`; the core checks
    /// both); completes as `inspected` with the snapshot. Returns the op id.
    pub fn inspect(&mut self, now: f64, name: JsValue, kind: JsValue) -> JsResult<f64> {
        let name = js(convert::name(&name))?;
        let kind = js(lockgate_core::inspect::Kind::parse(&kind.as_string().unwrap_or_default()))?;
        let op = js(self.core.inspect_as(instant(now), &name, &kind.primitive()))?;
        Ok(id_to_js(op.0))
    }

    /// Breaks lock `name` read as `kind` (PROTOCOL.md §15): removes its holder's entry — only
    /// the one whose fencing token is `token` when it is a number — and wakes the next
    /// waiter; completes as `broken` with what was removed, or `null`. Returns the op id.
    #[wasm_bindgen(js_name = breakLock)]
    pub fn break_lock(&mut self, now: f64, name: JsValue, kind: JsValue, token: JsValue) -> JsResult<f64> {
        let name = js(convert::name(&name))?;
        let kind = js(lockgate_core::inspect::Kind::parse(&kind.as_string().unwrap_or_default()))?;
        let token = js(handle::fencing_token(&convert::token(&token)))?;
        let op = js(self.core.break_lock(instant(now), &name, kind, token))?;
        Ok(id_to_js(op.0))
    }

    /// Lists one page of the locks under `prefix` (`limit` and `cursor` may be `undefined`;
    /// the core checks and caps them); completes as `listed` with the page. Returns the op id.
    pub fn list(&mut self, now: f64, prefix: JsValue, limit: JsValue, cursor: JsValue) -> JsResult<f64> {
        let (prefix, limit, cursor) = js(handle::list_args(&convert::value(&prefix), &convert::value(&limit), &convert::value(&cursor)))?;
        let op = js(self.core.list(instant(now), &prefix, limit, cursor.as_deref()))?;
        Ok(id_to_js(op.0))
    }

    /// Reads the lock of handle `lock` (a semaphore handle's permits inform a backend that
    /// stores none); completes as `inspected`. Returns the op id.
    #[wasm_bindgen(js_name = inspectLock)]
    pub fn inspect_lock(&mut self, now: f64, lock: &LockSpec) -> JsResult<f64> {
        let handle = lock.0.borrow();
        let op = js(self.core.inspect_as(instant(now), &handle.name, &handle.primitive))?;
        Ok(id_to_js(op.0))
    }

    /// Adopts the lease `identity` names with `lock`'s options (made by `LockSpec.adopted`):
    /// completes as `acquired` (the same fencing token) or `failed` (`NOT_HELD`). Returns the op id.
    pub fn adopt(&mut self, now: f64, identity: String, lock: &LockSpec) -> JsResult<f64> {
        let op = js(self.core.adopt(instant(now), &identity, &lock.0.borrow().options))?;
        Ok(id_to_js(op.0))
    }

    /// The identity of held lease `lease`, for another client to adopt (PROTOCOL.md §17).
    #[wasm_bindgen(js_name = leaseIdentity)]
    pub fn lease_identity(&self, now: f64, lease: f64) -> JsResult<String> {
        js(self.core.export(instant(now), LeaseId(id_from_js(lease))))
    }

    /// Releases a lease (owner-only; on every master for Redlock); returns the op id.
    pub fn release(&mut self, now: f64, lease: f64) -> f64 {
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        id_to_js(self.core.release(now, lease).0)
    }

    /// Sets the lease's remaining time to `ms` where it is still held; returns the op id.
    pub fn extend(&mut self, now: f64, lease: f64, ms: JsValue) -> JsResult<f64> {
        let d = js(handle::extension("ms", &convert::value(&ms), &Spelling::JS))?;
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        let op = js(self.core.extend(now, lease, d))?;
        Ok(id_to_js(op.0))
    }

    /// Abandons a pending acquire (it completes with a `CANCELLED` failure).
    pub fn cancel(&mut self, now: f64, op: f64) {
        let (now, op) = (instant(now), OpId(id_from_js(op)));
        self.core.cancel(now, op)
    }

    /// Cancels every pending acquire and releases every lease.
    pub fn shutdown(&mut self, now: f64) {
        self.core.shutdown(instant(now))
    }

    /// The instant (ms) until which `lease` is certainly valid; `undefined` if not held.
    #[wasm_bindgen(js_name = leaseValidUntil)]
    pub fn lease_valid_until(&self, lease: f64) -> Option<f64> {
        self.core.lease_valid_until(LeaseId(id_from_js(lease))).map(convert::millis)
    }

    /// Whether `lease` is held at `now` by the engine's knowledge.
    #[wasm_bindgen(js_name = isHeld)]
    pub fn is_held(&self, now: f64, lease: f64) -> bool {
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        self.core.is_held(now, lease)
    }

    /// Whether nothing is pending: no acquire, lease, cleanup or request in flight.
    #[wasm_bindgen(js_name = isIdle)]
    pub fn is_idle(&self) -> bool {
        self.core.is_idle()
    }

    /// Turns the core's telemetry events on (`takeTelemetry` then yields them), with the lock's
    /// name if the client option `telemetryLockNames` asked for it.
    #[wasm_bindgen(js_name = enableTelemetry)]
    pub fn enable_telemetry(&mut self) -> JsResult<()> {
        self.core.enable_telemetry(js(self.client.options.telemetry_config())?);
        Ok(())
    }

    /// Runs the timers due at `now` (early calls are harmless).
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now: f64) {
        self.core.handle_timeout(instant(now))
    }

    /// When (ms) `handleTimeout` next has work, or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.core.poll_timeout().map(convert::millis)
    }

    /// The next event (`{ kind, ... }`, see `convert::event_to_js`) with the `waiter` given to
    /// [`Engine::wait`] for its op (taken), or `undefined`. A completion nobody waits for is
    /// skipped, but a grant among them is released (the core's rule, see `Awaiting::claim`) and
    /// `null` says so: the release's requests are queued, to perform after the events.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self, now: f64) -> JsValue {
        while let Some(ev) = self.core.poll_event() {
            let mut ev = match ev {
                // Raised once the driver turned telemetry on (lib/telemetry.js: a
                // diagnostics_channel subscriber); nobody waits for it: kept for
                // `takeTelemetry`.
                Event::Telemetry(t) => {
                    self.telemetry.push(t);
                    continue;
                }
                ev => ev,
            };
            let waiter = match &mut ev {
                Event::Completed { op, outcome } => {
                    if let Some(handle) = self.handles.remove(op) {
                        handle.borrow_mut().settle(&mut self.core, instant(now), *op, outcome);
                    }
                    match self.waiting.claim(&mut self.core, instant(now), *op, outcome) {
                        Claim::Waiter(w) => w,
                        Claim::GaveBack { .. } => return JsValue::NULL,
                        Claim::Nobody => continue,
                    }
                }
                _ => JsValue::UNDEFINED,
            };
            return convert::event_to_js(&ev, &waiter, &self.shapes, &mut self.strings);
        }
        JsValue::UNDEFINED
    }

    /// The telemetry raised since the last call, in order, as the core's compact rows
    /// (`lockgate_core::data::telemetry_row`) that `lib/telemetry.js` publishes, or `undefined`
    /// if none. `forOpenTelemetry`: each row also carries its metric updates and ended acquire,
    /// and the batch comes as one JSON text (their attribute maps would each cost a crossing per
    /// key as objects); otherwise as arrays of plain values, made in one crossing per array.
    #[wasm_bindgen(js_name = takeTelemetry)]
    pub fn take_telemetry(&mut self, for_open_telemetry: bool) -> JsValue {
        if self.telemetry.is_empty() {
            return JsValue::UNDEFINED;
        }
        let rows = Data::List(self.telemetry.drain(..).map(|t| telemetry_row(&t, for_open_telemetry)).collect());
        match for_open_telemetry {
            true => JsValue::from_str(&serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into())),
            false => data::to_js(&rows, &mut self.strings),
        }
    }

    /// Records `waiter` (the driver's pending promise) as who waits for `op`.
    pub fn wait(&mut self, op: f64, waiter: JsValue) {
        self.waiting.wait(OpId(id_from_js(op)), waiter);
    }

    /// Takes every waiter (the client closed: each is failed).
    #[wasm_bindgen(js_name = takeWaiters)]
    pub fn take_waiters(&mut self) -> Vec<JsValue> {
        self.waiting.take_all().collect()
    }

    /// Request `id` failed in the transport before any answer: `error` as a `LockError` keeps
    /// its code; anything else is read by the backend's rules (`serverReply`: it is the server's
    /// own error reply).
    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, now: f64, id: f64, error: JsValue, server_reply: bool) {
        let e = self.failure(&error, server_reply);
        self.core.handle_failure(instant(now), RequestId(id_from_js(id)), e);
    }

    /// A failure the transport's client library reported (e.g. while connecting) as a
    /// `LockError`, read as for `handleError`.
    #[wasm_bindgen(js_name = transportError)]
    pub fn transport_error(&self, error: JsValue, server_reply: bool) -> JsValue {
        errors::to_js(&self.failure(&error, server_reply))
    }

    /// The notification connection dropped (notices may have been missed).
    #[wasm_bindgen(js_name = handleDisconnect)]
    pub fn handle_disconnect(&mut self, now: f64) {
        self.core.handle_disconnect(instant(now))
    }
}

/// Every kind of telemetry event, in the order compact rows refer to them (the core's
/// `EVENTS`): `[name, summary, warning, measurementKeys]`, keys as JavaScript shows them
/// (`waitMs`), for lib/telemetry.js to make one diagnostics_channel per event and build each
/// event's object from its row.
#[wasm_bindgen(js_name = telemetryEvents)]
pub fn telemetry_events() -> JsValue {
    let kind = |k: &EventKind| {
        let keys = k.measures.iter().map(|m| Data::Str(measure_key(m))).collect();
        Data::List(vec![k.name.into(), k.summary.into(), k.warning.into(), Data::List(keys)])
    };
    data::to_js(&Data::List(EVENTS.iter().map(kind).collect()), &mut StrCache::default())
}

/// Every metric instrument the core's telemetry records, as `[name, kind, unit, description]`
/// (kind `histogram`, `counter` or `up_down_counter`), for lib/telemetry.js to create them in
/// OpenTelemetry.
#[wasm_bindgen(js_name = metricInstruments)]
pub fn metric_instruments() -> Array {
    let row = |i: &Instrument| [i.name, i.kind.name(), i.unit, i.description].iter().map(|s| JsValue::from_str(s)).collect::<Array>();
    INSTRUMENTS.iter().map(row).collect()
}

/// Requests leave as plain objects and what came of them comes back as plain objects, in the
/// forms its backend's data module in the core documents (`lockgate_core::<backend>::data`).
#[wasm_bindgen]
impl Engine {
    /// The next request as a plain object with its `id`, or `undefined`.
    #[wasm_bindgen(js_name = pollData)]
    pub fn poll_data(&mut self) -> JsValue {
        self.core.poll_request().map_or(JsValue::UNDEFINED, |r| data::to_js(&r, &mut self.strings))
    }

    /// The reply to request `id` as a plain object; one that is no plain data is a `PROTOCOL`
    /// failure of the request.
    #[wasm_bindgen(js_name = handleData)]
    pub fn handle_data(&mut self, now: f64, id: f64, reply: JsValue) {
        let (now, id) = (instant(now), RequestId(id_from_js(id)));
        match data::from_js(&reply, 0) {
            Ok(d) => self.core.handle_reply(now, id, &d),
            Err(why) => self.core.handle_failure(now, id, Error::protocol(format!("the transport's reply: {why}"))),
        }
    }

    /// A notice the server pushed, as a plain object (anything else is ignored).
    #[wasm_bindgen(js_name = handleNoticeData)]
    pub fn handle_notice_data(&mut self, now: f64, notice: JsValue) {
        if let Ok(d) = data::from_js(&notice, 0) {
            self.core.handle_notice(instant(now), &d);
        }
    }
}

/// The byte wire of a connection the transport owns (where the engine has one, see
/// `DynEngine::poll_wire`; Redis's lean socket, `lib/transport/redis-wire.js`): requests
/// leave as the bytes to write and the replies come back as the bytes the socket read, so one
/// write and one call per read is all the JavaScript side does. A transport uses this or
/// `pollData`, not both.
#[wasm_bindgen]
impl Engine {
    /// The bytes of every request queued, to write in order (a UTF-8 string, else a
    /// `Uint8Array`), or a request that travels elsewhere as `pollData` gives it, or `undefined`.
    #[wasm_bindgen(js_name = pollWire)]
    pub fn poll_wire(&mut self, now: f64) -> JsValue {
        if let Some(r) = self.stash.take() {
            return data::to_js(&r, &mut self.strings);
        }
        self.out.clear();
        let elsewhere = self.core.poll_wire(instant(now), &mut self.out);
        if self.out.is_empty() {
            return elsewhere.map_or(JsValue::UNDEFINED, |r| data::to_js(&r, &mut self.strings));
        }
        self.stash = elsewhere;
        // A string when the bytes are UTF-8 (they are whenever every argument came from a JS
        // string, i.e. always today): V8 makes it on its own heap and the socket writes it from a
        // stack buffer, where a Uint8Array costs a fresh ArrayBuffer per request.
        match std::str::from_utf8(&self.out) {
            Ok(text) => JsValue::from_str(text),
            Err(_) => js_sys::Uint8Array::from(&self.out[..]).into(),
        }
    }

    /// Bytes the connection read; whole replies go to the engine. Returns how many requests
    /// still wait, or -1 if the stream broke (they failed; the connection must go).
    #[wasm_bindgen(js_name = handleWireData)]
    pub fn handle_wire_data(&mut self, now: f64, bytes: &[u8]) -> i32 {
        match self.core.handle_wire(instant(now), bytes) {
            Ok(waiting) => i32::try_from(waiting).unwrap_or(i32::MAX),
            Err(_) => -1,
        }
    }

    /// The connection is gone (`error`: why, as the socket reported it; `serverReply`: the
    /// server's own error reply, e.g. to a handshake's AUTH): every request written to it and
    /// not answered fails.
    #[wasm_bindgen(js_name = handleWireClosed)]
    pub fn handle_wire_closed(&mut self, now: f64, error: JsValue, server_reply: bool) {
        let e = self.failure(&error, server_reply);
        self.core.wire_closed(instant(now), e);
    }
}

impl Engine {
    /// A JavaScript error as the core's: a `LockError` keeps its code; anything else is read by
    /// the backend's rules ([`DynEngine::transport_error`]).
    fn failure(&self, error: &JsValue, server_reply: bool) -> Error {
        let message = convert::error_message(error);
        let code = Reflect::get(error, &"code".into()).ok().and_then(|c| c.as_string());
        match code.as_deref().and_then(errors::kind) {
            Some(kind) => Error::new(kind, message),
            None => self.core.transport_error(&message, server_reply),
        }
    }
}

/// A `LockError` of `code` with `message`, for conditions the JavaScript layer detects itself
/// (a closed client, a bad `signal` argument). Unknown codes become `PROTOCOL`.
#[wasm_bindgen(js_name = makeError)]
pub fn make_error(code: &str, message: &str) -> JsValue {
    errors::to_js(&Error::new(errors::kind(code).unwrap_or(ErrorKind::Protocol), message))
}

/// How long process exit waits for open clients' releases (the core's one grace for every
/// binding, `lockgate_core::exit::EXIT_GRACE`), in milliseconds.
#[wasm_bindgen(js_name = exitGraceMs)]
pub fn exit_grace_ms() -> f64 {
    millis(lockgate_core::exit::EXIT_GRACE)
}

/// How long `client.close()` waits for its releases (`lockgate_core::driving::CLOSE_GRACE`), in ms.
#[wasm_bindgen(js_name = closeGraceMs)]
pub fn close_grace_ms() -> f64 {
    millis(CLOSE_GRACE)
}

/// Leaving `lock.using(fn)` once its release answered `wasHeld`: `NOT_HELD` if the lease had
/// been lost and no exception is already leaving (the core's rule, `lockgate_core::scope::leave`).
#[wasm_bindgen(js_name = leaveScope)]
pub fn leave_scope(name: &str, token: Option<u64>, was_held: bool, exception_in_flight: bool, lost: Option<String>) -> JsResult<()> {
    js(lockgate_core::scope::leave(name, token, was_held, exception_in_flight, lost.as_deref()))
}

/// This process's host name and pid, for the core's default holder label `<hostname>:<pid>`
/// (`lockgate_core::label`): the wasm core cannot ask the OS. `lib/index.js` calls it once at load.
#[wasm_bindgen(js_name = setProcessIdentity)]
pub fn set_process_identity(hostname: &str, pid: u32) {
    lockgate_core::label::set_process_identity(hostname, pid);
}
