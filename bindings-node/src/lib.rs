//! The Node binding's WebAssembly half: lockgate's sans-IO engines exported to JavaScript as ONE
//! `Engine` class, whatever the backend (Redis single or Cluster, Redlock, ZooKeeper). The
//! JavaScript driver (`lib/driver.js`) follows the engines' driving contract: it feeds inputs with
//! `performance.now()` timestamps, hands each request to its backend's transport
//! (`lib/transport/<name>.js`), gives the replies back by request id, delivers events and keeps one
//! timer at `pollTimeout()`. Every export converts arguments, calls the core and maps errors
//! through [`errors::to_js`]; nothing here decides anything about locks.

mod connect;
mod convert;
mod data;
mod errors;
mod random;
mod wire;

use lockgate_core::driving::{Awaiting, Claim, Drive, CLOSE_GRACE};
use lockgate_core::engine::{LeaseId, OpId, RequestId};
use lockgate_core::data::DynEngine;
use lockgate_core::holding::{Holding, Owner};
use lockgate_core::redis::reply::Reply;
use lockgate_core::redis::{EngineConfig, Request, RequestKind};
use lockgate_core::time::Instant;
use lockgate_core::{Backend, Capability, Error, Event, LockOptions, Primitive, Result};
use wasm_bindgen::prelude::*;

use convert::{id_from_js, id_to_js, instant, Shapes, StrCache};
use errors::{js, JsResult};

pub use errors::{error_kinds, set_error_factory};

/// The core engine of one client: the typed Redis engine (single server or Cluster: its
/// pipelines go to the lean RESP socket as bytes, or to ioredis as flat arrays), or, for every
/// other backend, one type-erased engine whose requests, replies and notices are plain data
/// (`lockgate_core::data`), converted by `data.rs`: a new backend adds nothing here.
enum Core {
    Redis(Box<lockgate_core::redis::Engine>),
    Data(Box<dyn DynEngine>),
}

impl Core {
    /// The engine's driving contract, the same for both.
    fn drive(&mut self) -> &mut dyn Drive {
        match self {
            Core::Redis(e) => e.as_mut(),
            Core::Data(e) => e,
        }
    }

    fn get(&self) -> &dyn Drive {
        match self {
            Core::Redis(e) => e.as_ref(),
            Core::Data(e) => e,
        }
    }
}

/// A validated lock name, its primitive and its options, made once per handle
/// (`client.lock(...)`, `client.semaphore(...)`, each half of `client.readWriteLock(...)`, each
/// `election.campaign(...)`) for one engine: its backend decides which primitives exist and what
/// the lease defaults to.
#[wasm_bindgen]
pub struct LockSpec {
    name: String,
    primitive: Primitive,
    options: LockOptions,
    reentrant: bool,
    /// Whether queue entries have a lease of their own (`entryTtlMs`: Redis, not Redlock or
    /// ZooKeeper).
    entry_ttl: bool,
    /// The lease this non-reentrant handle holds (the core's one-lease-per-owner rule; a
    /// Node handle is one owner for every async flow that uses it).
    holding: Holding<()>,
}

#[wasm_bindgen]
impl LockSpec {
    /// A mutex: validates `name` and `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs,
    /// reentrant }` by the client's rules (on Redlock: no `entryTtlMs`, the lease within the
    /// deployment's `maxLeaseMs`, 30 s or `maxLeaseMs` by default).
    pub fn mutex(engine: &Engine, name: JsValue, options: JsValue) -> JsResult<LockSpec> {
        let o = js(engine.handle("lock option", &options, &["reentrant"]))?;
        LockSpec::checked(&name, Primitive::Mutex, o)
    }

    /// One permit of a semaphore with `permits` permits (a whole number, 1 to 1000000).
    pub fn semaphore(engine: &Engine, name: JsValue, permits: JsValue, options: JsValue) -> JsResult<LockSpec> {
        js(engine.require(Capability::Semaphore))?;
        let permits = js(convert::permits(&permits))?;
        let o = js(engine.handle("semaphore option", &options, &[]))?;
        LockSpec::checked(&name, Primitive::Semaphore { permits }, o)
    }

    /// One half of a read-write lock (`write`: the exclusive one); options as for a mutex plus
    /// `writersFirst`.
    #[wasm_bindgen(js_name = readWrite)]
    pub fn read_write(engine: &Engine, name: JsValue, options: JsValue, write: bool) -> JsResult<LockSpec> {
        js(engine.require(Capability::ReadWrite))?;
        let o = js(engine.handle("read-write lock option", &options, &["reentrant", "writersFirst"]))?;
        let primitive = if write { Primitive::Write } else { Primitive::Read { writers_first: o.writers_first } };
        LockSpec::checked(&name, primitive, o)
    }

    /// An election (leadership with an empty value until `campaign(value)`).
    pub fn election(engine: &Engine, name: JsValue, options: JsValue) -> JsResult<LockSpec> {
        js(engine.require(Capability::Election))?;
        let o = js(engine.handle("election option", &options, &[]))?;
        LockSpec::checked(&name, Primitive::Leader { value: String::new() }, o)
    }

    /// This election's leadership, published as `value` (at most 4096 bytes of UTF-8).
    pub fn campaign(&self, value: JsValue) -> JsResult<LockSpec> {
        let value = js(convert::leader_value(&value))?;
        let primitive = Primitive::Leader { value };
        js(lockgate_core::options::validate_primitive(&primitive))?;
        Ok(LockSpec {
            name: self.name.clone(),
            primitive,
            options: self.options.clone(),
            reentrant: false,
            entry_ttl: self.entry_ttl,
            holding: Holding::default(),
        })
    }

    /// What the handle is, read once by JavaScript: `{ name, kind, reentrant, options }` plus
    /// `permits` (a semaphore), `writersFirst` (a read half) or `value` (leadership). `kind` is
    /// `mutex`, `semaphore`, `read`, `write` or `leader`; `options` the effective lease options
    /// `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }` (`entryTtlMs` only where queue entries
    /// have a lease of their own: Redis).
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> js_sys::Object {
        let (o, set) = (&self.options, convert::set);
        let options = js_sys::Object::new();
        set(&options, "leaseMs", convert::duration_ms(o.lease).into());
        set(&options, "autoRenew", o.auto_renew.into());
        set(&options, "waitTimeoutMs", convert::wait_ms(o.wait_timeout).into());
        if self.entry_ttl {
            set(&options, "entryTtlMs", convert::duration_ms(o.entry_ttl).into());
        }
        let out = js_sys::Object::new();
        let kind = match &self.primitive {
            Primitive::Mutex => "mutex",
            Primitive::Semaphore { permits } => {
                set(&out, "permits", (*permits).into());
                "semaphore"
            }
            Primitive::Read { writers_first } => {
                set(&out, "writersFirst", (*writers_first).into());
                "read"
            }
            Primitive::Write => "write",
            Primitive::Leader { value } => {
                set(&out, "value", value.into());
                "leader"
            }
        };
        set(&out, "name", self.name.as_str().into());
        set(&out, "kind", kind.into());
        set(&out, "reentrant", self.reentrant.into());
        set(&out, "options", options.into());
        out
    }
}

#[wasm_bindgen]
impl LockSpec {
    /// Frees the place of `lease` (released through the handle): the handle may acquire again.
    pub fn free(&mut self, lease: f64) {
        self.holding.free(LeaseId(id_from_js(lease)));
    }

    /// The AlreadyHeldError of acquiring again through this handle (the core's message), for a
    /// wait that another acquire through the handle beat.
    #[wasm_bindgen(js_name = alreadyHeld)]
    pub fn already_held(&self) -> JsValue {
        errors::to_js(&lockgate_core::holding::already_held(&self.name, &self.primitive, Owner::HANDLE))
    }
}

impl LockSpec {
    fn checked(name: &JsValue, primitive: Primitive, o: convert::HandleOptions) -> JsResult<LockSpec> {
        let name = js(convert::name(name))?;
        js(lockgate_core::options::validate_primitive(&primitive))?;
        Ok(LockSpec { name, primitive, options: o.lock, reentrant: o.reentrant, entry_ttl: o.entry_ttl, holding: Holding::default() })
    }
}

/// The engine of one client, for any backend. Ids (`op`, `lease`, request `id`) are JS numbers;
/// times are `performance.now()` milliseconds.
#[wasm_bindgen]
pub struct Engine {
    core: Core,
    /// What the core made of connect()'s target and options (rules for every handle).
    client: connect::Connected,
    shapes: Shapes,
    strings: StrCache,
    /// The RESP codec of the lean Redis transport (`pollWireRequests`, `handleWireData`).
    wire: wire::Wire,
    /// A request `pollWireRequests` took from the engine but could not put in its batch (a
    /// subscribe after pipelines): handed out by the next call.
    stash: Option<Request>,
    /// What the transport opens, from the core (see [`Engine::plan`]).
    plan: JsValue,
    /// The driver's pending promises by op id (see [`Engine::wait`]).
    waiting: Awaiting<JsValue>,
}

#[wasm_bindgen]
impl Engine {
    /// Connects, as data: the core parses `url` (or, for a caller's ioredis connection(s),
    /// `given`, see `connect::connect`), checks and defaults `options`, and builds the engine of
    /// the backend the scheme selects. `shapes` holds the driver's event factories.
    pub fn connect(url: JsValue, options: JsValue, given: JsValue, shapes: Shapes) -> JsResult<Engine> {
        let client = js(connect::connect(&url, &options, &given))?;
        let o = &client.options;
        // Every backend but the Redis ones: one engine speaking plain data, with its plan.
        if let Some(erased) = js(lockgate_core::data::connect(o, Box::new(random::BufferedOsRandom::new())))? {
            let plan = data::to_js(&erased.plan);
            return Ok(Engine::with(Core::Data(erased.engine), plan, client, shapes));
        }
        let config = EngineConfig {
            key_prefix: o.key_prefix.clone(),
            replica_acks: o.replica_acks,
            split_pipelines: client.backend == Backend::RedisCluster,
            ..EngineConfig::default()
        };
        let engine = js(lockgate_core::redis::Engine::new(config, Box::new(random::BufferedOsRandom::new())))?;
        let plan = data::to_js(&js(lockgate_core::redlock::data::plan(o))?);
        Ok(Engine::with(Core::Redis(Box::new(engine)), plan, client, shapes))
    }

    /// What the transport opens, from the core: its backend's data module documents the form
    /// (`lockgate_core::redlock::data::plan` for every Redis-protocol URL,
    /// `lockgate_core::zookeeper::data::plan`); `transport` names `lib/transport/<transport>.js`.
    #[wasm_bindgen(getter)]
    pub fn plan(&self) -> JsValue {
        self.plan.clone()
    }

    /// Whether requests come from `pollData` as plain objects (answered through `handleData`,
    /// notices through `handleNoticeData`) rather than from `pollRequest` as flat arrays.
    #[wasm_bindgen(getter, js_name = speaksData)]
    pub fn speaks_data(&self) -> bool {
        matches!(self.core, Core::Data(_))
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
    pub fn capabilities(&self) -> JsResult<js_sys::Object> {
        js(self.client.capabilities())
    }

    /// Starts an acquire of `lock`; returns its op id. `options` is `{ timeoutMs, signal }`
    /// (`timeoutMs` absent: the lock's `waitTimeoutMs`); `tryOnce` makes a single attempt.
    pub fn acquire(&mut self, now: f64, lock: &LockSpec, options: JsValue, try_once: bool) -> JsResult<f64> {
        let wait = js(convert::acquire_wait(&options, try_once, lock.options.wait_timeout))?;
        let (now, o) = (instant(now), &lock.options);
        let op = js(self.core.drive().acquire(now, &lock.name, &lock.primitive, o, wait))?;
        Ok(id_to_js(op.0))
    }

    /// Re-enters a held lease (reentrant handles): completes at once as `acquired` with the same
    /// lease and fencing token and one more hold, or `failed` (`NOT_HELD`); returns the op id.
    pub fn reacquire(&mut self, now: f64, lease: f64) -> JsResult<f64> {
        js(self.require(Capability::Reentrant))?;
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        Ok(id_to_js(self.core.drive().reacquire(now, lease).0))
    }

    /// Reads the leader of election `name`; completes as `observed`. Returns the op id.
    pub fn observe(&mut self, now: f64, name: JsValue) -> JsResult<f64> {
        js(self.require(Capability::Observe))?;
        let name = js(convert::name(&name))?;
        // Each engine refuses what its backend cannot do (UNSUPPORTED): never a panic in wasm.
        let op = js(self.core.drive().observe_leader(instant(now), &name))?;
        Ok(id_to_js(op.0))
    }

    /// Releases a lease (owner-only; on every master for Redlock); returns the op id.
    pub fn release(&mut self, now: f64, lease: f64) -> f64 {
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        id_to_js(self.core.drive().release(now, lease).0)
    }

    /// Sets the lease's remaining time to `ms` where it is still held; returns the op id.
    pub fn extend(&mut self, now: f64, lease: f64, ms: JsValue) -> JsResult<f64> {
        let d = js(convert::lease_millis("ms", &ms))?;
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        let op = js(self.core.drive().extend(now, lease, d))?;
        Ok(id_to_js(op.0))
    }

    /// Abandons a pending acquire (it completes with a `CANCELLED` failure).
    pub fn cancel(&mut self, now: f64, op: f64) {
        let (now, op) = (instant(now), OpId(id_from_js(op)));
        self.core.drive().cancel(now, op)
    }

    /// Cancels every pending acquire and releases every lease.
    pub fn shutdown(&mut self, now: f64) {
        self.core.drive().shutdown(instant(now))
    }

    /// The instant (ms) until which `lease` is certainly valid; `undefined` if not held.
    #[wasm_bindgen(js_name = leaseValidUntil)]
    pub fn lease_valid_until(&self, lease: f64) -> Option<f64> {
        self.valid_until(lease).map(convert::millis)
    }

    /// Whether `lease` is held at `now` by the engine's knowledge.
    #[wasm_bindgen(js_name = isHeld)]
    pub fn is_held(&self, now: f64, lease: f64) -> bool {
        let (now, lease) = (instant(now), LeaseId(id_from_js(lease)));
        self.core.get().is_held(now, lease)
    }

    /// Whether nothing is pending: no acquire, lease, cleanup or request in flight.
    #[wasm_bindgen(js_name = isIdle)]
    pub fn is_idle(&self) -> bool {
        self.core.get().is_idle()
    }

    /// Runs the timers due at `now` (early calls are harmless).
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now: f64) {
        self.core.drive().handle_timeout(instant(now))
    }

    /// When (ms) `handleTimeout` next has work, or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.core.get().poll_timeout().map(convert::millis)
    }

    /// The next request as one flat array, or `undefined`: `[id, 0, n, argc₁, name₁, args₁…,
    /// argc₂, …]` for `n` commands to send in order, `[id, 0, -1, channel]` for a subscription,
    /// `[id, 0, -2, description]` for a kind the driver cannot perform.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self) -> Option<Vec<JsValue>> {
        match &mut self.core {
            Core::Redis(e) => e.poll_request().map(|r| convert::request_to_js(&r, &mut self.strings)),
            Core::Data(_) => None,
        }
    }

    /// The next event (`{ kind, ... }`, see `convert::event_to_js`) with the `waiter` given to
    /// [`Engine::wait`] for its op (taken), or `undefined`. A completion nobody waits for is
    /// skipped, but a grant among them is released (the core's rule, see `Awaiting::claim`) and
    /// `null` says so: the release's requests are queued, to perform after the events.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self, now: f64) -> JsValue {
        while let Some(ev) = self.core.drive().poll_event() {
            let waiter = match &ev {
                Event::Completed { op, outcome } => {
                    match self.waiting.claim(self.core.drive(), instant(now), *op, outcome) {
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

    /// Records `waiter` (the driver's pending promise) as who waits for `op`.
    pub fn wait(&mut self, op: f64, waiter: JsValue) {
        self.waiting.wait(OpId(id_from_js(op)), waiter);
    }

    /// Takes every waiter (the client closed: each is failed).
    #[wasm_bindgen(js_name = takeWaiters)]
    pub fn take_waiters(&mut self) -> Vec<JsValue> {
        self.waiting.take_all().collect()
    }

    /// `ALREADY_HELD` if the non-reentrant handle of `lock` holds a live lease (the core's
    /// one-lease-per-owner rule); nothing is sent then.
    #[wasm_bindgen(js_name = checkHold)]
    pub fn check_hold(&self, now: f64, lock: &LockSpec) -> JsResult<()> {
        let live = |id: LeaseId, _: &()| self.core.get().is_held(instant(now), id);
        js(lock.holding.check(&lock.name, &lock.primitive, Owner::HANDLE, live))
    }

    /// Records `lease` as what the handle of `lock` holds; `ALREADY_HELD` (the caller gives
    /// the lease back) if another acquire through the handle won first.
    pub fn hold(&self, now: f64, lock: &mut LockSpec, lease: f64) -> JsResult<()> {
        let live = |id: LeaseId, _: &()| self.core.get().is_held(instant(now), id);
        let (id, p) = (LeaseId(id_from_js(lease)), &lock.primitive);
        js(lock.holding.hold(&lock.name, p, Owner::HANDLE, id, (), live))
    }

    /// Hands back the results of request `id`: `[[err, value], ...]`, one per command (server
    /// errors stay in place), `[]` for a confirmed subscribe.
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(&mut self, now: f64, id: f64, results: JsValue) {
        self.deliver(instant(now), id, convert::pipeline_results(&results));
    }

    /// The value the one command of request `id` was answered with (`handleReply(now, id,
    /// [[null, value]])` without the wrapping).
    #[wasm_bindgen(js_name = handleValue)]
    pub fn handle_value(&mut self, now: f64, id: f64, value: JsValue) {
        self.deliver(instant(now), id, convert::single_result(&value));
    }

    /// What the one command of request `id` was rejected with: a server error reply (stays a
    /// reply: `NOSCRIPT` is the engine's to handle) or the transport error that prevented one.
    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, now: f64, id: f64, error: JsValue) {
        self.deliver(instant(now), id, convert::single_error(&error).map(|r| vec![r]));
    }

    /// The transport error that prevented any answer to request `id`.
    #[wasm_bindgen(js_name = handleReplyError)]
    pub fn handle_reply_error(&mut self, now: f64, id: f64, error: JsValue) {
        self.deliver(instant(now), id, Err(convert::client_error(&error)));
    }

    /// Fails request `id`, whose kind this binding cannot perform.
    #[wasm_bindgen(js_name = rejectRequest)]
    pub fn reject_request(&mut self, now: f64, id: f64, why: String) {
        self.deliver(instant(now), id, Err(Error::protocol(format!("the Node driver cannot perform {why}"))));
    }

    /// A pub/sub message (`channel`, `payload` as strings or Buffers).
    #[wasm_bindgen(js_name = handleNotification)]
    pub fn handle_notification(&mut self, now: f64, channel: JsValue, payload: JsValue) {
        if let (Core::Redis(e), Some(c), Some(p)) = (&mut self.core, convert::bytes(&channel), convert::bytes(&payload))
        {
            e.handle_notification(instant(now), &c, &p);
        }
    }

    /// The subscriber connection dropped (grants may have been missed).
    #[wasm_bindgen(js_name = handleDisconnect)]
    pub fn handle_disconnect(&mut self, now: f64) {
        self.core.drive().handle_disconnect(instant(now))
    }
}

/// A data engine's side (`speaksData`): its requests leave as plain objects and what came of
/// them comes back as plain objects, in the forms its backend's data module in the core
/// documents (`lockgate_core::zookeeper::data` for ZooKeeper).
#[wasm_bindgen]
impl Engine {
    /// The next request as a plain object with its `id`, or `undefined`.
    #[wasm_bindgen(js_name = pollData)]
    pub fn poll_data(&mut self) -> JsValue {
        match &mut self.core {
            Core::Data(e) => e.poll_request().map_or(JsValue::UNDEFINED, |r| data::to_js(&r)),
            _ => JsValue::UNDEFINED,
        }
    }

    /// The reply to request `id` as a plain object; one that is no plain data is a `PROTOCOL`
    /// failure of the request.
    #[wasm_bindgen(js_name = handleData)]
    pub fn handle_data(&mut self, now: f64, id: f64, reply: JsValue) {
        let (now, id) = (instant(now), RequestId(id_from_js(id)));
        if let Core::Data(e) = &mut self.core {
            match data::from_js(&reply) {
                Ok(d) => e.handle_reply(now, id, &d),
                Err(why) => e.handle_failure(now, id, Error::protocol(format!("the transport's reply: {why}"))),
            }
        }
    }

    /// A notice the server pushed, as a plain object (anything else is ignored).
    #[wasm_bindgen(js_name = handleNoticeData)]
    pub fn handle_notice_data(&mut self, now: f64, notice: JsValue) {
        if let (Core::Data(e), Ok(d)) = (&mut self.core, data::from_js(&notice)) {
            e.handle_notice(instant(now), &d);
        }
    }
}

/// The lean Redis transport (`lib/transport/redis-wire.js`): the engine's pipelines leave as
/// RESP bytes and the replies come back as the bytes the socket read, so one socket write and
/// one call per read is all the JavaScript side does. `pollRequest` and the `handle*` methods
/// above serve the ioredis transport instead; a driver uses one or the other.
#[wasm_bindgen]
impl Engine {
    /// The RESP of every pipeline queued, to write in order on the command connection (a UTF-8
    /// string, else a `Uint8Array`), or a request in `pollRequest`'s form (a subscribe), or `undefined`.
    #[wasm_bindgen(js_name = pollWireRequests)]
    pub fn poll_wire_requests(&mut self, now: f64) -> JsValue {
        let Core::Redis(engine) = &mut self.core else { return JsValue::UNDEFINED };
        self.wire.begin();
        while let Some(r) = self.stash.take().or_else(|| engine.poll_request()) {
            match &r.kind {
                RequestKind::Pipeline(commands) => {
                    if let Some((id, result)) = self.wire.encode(r.id, commands) {
                        engine.handle_reply(instant(now), id, result);
                    }
                }
                _ if self.wire.batch().is_empty() => {
                    return convert::request_to_js(&r, &mut self.strings).into_iter().collect::<js_sys::Array>().into();
                }
                _ => {
                    self.stash = Some(r);
                    break;
                }
            }
        }
        let batch = self.wire.batch();
        if batch.is_empty() {
            return JsValue::UNDEFINED;
        }
        // A string when the bytes are UTF-8 (they are whenever every argument came from a JS
        // string, i.e. always today): V8 makes it on its own heap and the socket writes it from a
        // stack buffer, where a Uint8Array costs a fresh ArrayBuffer per request.
        match std::str::from_utf8(batch) {
            Ok(text) => JsValue::from_str(text),
            Err(_) => js_sys::Uint8Array::from(batch).into(),
        }
    }

    /// Bytes the command connection read; complete replies go to the engine. Returns how many
    /// requests still wait, or -1 if the stream broke (they failed; the connection must go).
    #[wasm_bindgen(js_name = handleWireData)]
    pub fn handle_wire_data(&mut self, now: f64, data: &[u8]) -> i32 {
        let Core::Redis(engine) = &mut self.core else { return -1 };
        let now = instant(now);
        match self.wire.feed(data, |(id, r)| engine.handle_reply(now, id, r)) {
            Ok(()) => i32::try_from(self.wire.in_flight()).unwrap_or(i32::MAX),
            Err(e) => {
                self.wire.fail_all(&e, |(id, r)| engine.handle_reply(now, id, r));
                -1
            }
        }
    }

    /// The command connection is gone (`error`: why, as the socket reported it): every request
    /// written to it and not answered fails with a retryable error.
    #[wasm_bindgen(js_name = handleWireClosed)]
    pub fn handle_wire_closed(&mut self, now: f64, error: JsValue) {
        let Core::Redis(engine) = &mut self.core else { return };
        let e = convert::client_error(&error);
        self.wire.fail_all(&e, |(id, r)| engine.handle_reply(instant(now), id, r));
    }
}

impl Engine {
    fn with(core: Core, plan: JsValue, client: connect::Connected, shapes: Shapes) -> Engine {
        let (strings, wire) = (StrCache::default(), wire::Wire::default());
        Engine { core, client, shapes, strings, wire, stash: None, plan, waiting: Awaiting::default() }
    }

    fn valid_until(&self, lease: f64) -> Option<Instant> {
        let lease = LeaseId(id_from_js(lease));
        self.core.get().lease_valid_until(lease)
    }

    /// Hands the replies of request `id` to the engine.
    fn deliver(&mut self, now: Instant, id: f64, replies: Result<Vec<Reply>>) {
        let id = RequestId(id_from_js(id));
        match &mut self.core {
            Core::Redis(e) => e.handle_reply(now, id, replies),
            // A data engine's transport answers through handleData; an error is a failure.
            Core::Data(e) => match replies {
                Err(error) => e.handle_failure(now, id, error),
                Ok(_) => e.handle_failure(now, id, Error::protocol("a data engine's reply must come through handleData")),
            },
        }
    }

    /// `Ok` where the backend offers `what`, else `UNSUPPORTED` naming the backend (the core's
    /// capabilities).
    fn require(&self, what: Capability) -> Result<()> {
        self.client.options.capabilities()?.require(what)
    }

    /// A handle's options by the client's rules (`flags`: the extra keys this handle takes).
    fn handle(&self, what: &str, options: &JsValue, flags: &[&str]) -> Result<convert::HandleOptions> {
        let o = convert::handle_options(what, options, flags, &self.client.options)?;
        if o.reentrant {
            self.require(Capability::Reentrant)?;
        }
        Ok(o)
    }
}

/// Classifies an error the Redis client threw (e.g. while connecting) as a `LockError`.
#[wasm_bindgen(js_name = clientError)]
pub fn client_error(error: JsValue) -> JsValue {
    errors::to_js(&convert::client_error(&error))
}

/// A `LockError` of `code` with `message`, for conditions the JavaScript layer detects itself
/// (a closed client, a bad `signal` argument). Unknown codes become `PROTOCOL`.
#[wasm_bindgen(js_name = makeError)]
pub fn make_error(code: &str, message: &str) -> JsValue {
    let kind = lockgate_core::ErrorKind::ALL
        .into_iter()
        .find(|k| k.code() == code)
        .unwrap_or(lockgate_core::ErrorKind::Protocol);
    errors::to_js(&Error::new(kind, message))
}

/// How long process exit waits for open clients' releases (the core's one grace for every
/// binding, `lockgate_core::exit::EXIT_GRACE`), in milliseconds.
#[wasm_bindgen(js_name = exitGraceMs)]
pub fn exit_grace_ms() -> f64 {
    convert::duration_ms(lockgate_core::exit::EXIT_GRACE)
}

/// How long `client.close()` waits for its releases (`lockgate_core::driving::CLOSE_GRACE`), in ms.
#[wasm_bindgen(js_name = closeGraceMs)]
pub fn close_grace_ms() -> f64 {
    convert::duration_ms(CLOSE_GRACE)
}

/// Leaving `lock.using(fn)` once its release answered `wasHeld`: `NOT_HELD` if the lease had
/// been lost and no exception is already leaving (the core's rule, `lockgate_core::scope::leave`).
#[wasm_bindgen(js_name = leaveScope)]
pub fn leave_scope(name: &str, token: Option<u64>, was_held: bool, exception_in_flight: bool, lost: Option<String>) -> JsResult<()> {
    js(lockgate_core::scope::leave(name, token, was_held, exception_in_flight, lost.as_deref()))
}
