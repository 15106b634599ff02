//! The Node binding's WebAssembly half: lockgate's sans-IO [`Engine`](lockgate_core::Engine)
//! exported to JavaScript. The JavaScript driver (`lib/driver.js`) follows the engine's driving
//! contract: it feeds inputs with `performance.now()` timestamps, performs every request with
//! ioredis, hands replies back by request id, delivers events and keeps one timer at
//! `pollTimeout()`. Every export here converts arguments, calls the engine and maps errors
//! through [`errors::to_js`]; nothing here decides anything about locks. [`redlock`] does the
//! same for the core's Redlock engine over N independent masters.

#[macro_use]
mod shared;
mod connect;
mod convert;
mod errors;
mod random;
mod redlock;
mod wire;

use lockgate_core::engine::{EngineConfig, LeaseId, RequestId};
use lockgate_core::{Error, LockOptions, Primitive, Request, RequestKind};
use wasm_bindgen::prelude::*;

use convert::{id_from_js, id_to_js, instant, Shapes, StrCache};
use errors::{js, JsResult};

pub use connect::{client_settings, parse_url};
pub use errors::{error_kinds, set_error_factory};
pub use redlock::{redlock_scripts, RedlockSpec, WasmRedlockEngine};

/// A validated lock name, its primitive and its options, made once per handle
/// (`client.lock(...)`, `client.semaphore(...)`, each half of `client.readWriteLock(...)`, each
/// `election.campaign(...)`).
#[wasm_bindgen]
pub struct LockSpec {
    name: String,
    primitive: Primitive,
    options: LockOptions,
    reentrant: bool,
}

#[wasm_bindgen]
impl LockSpec {
    /// A mutex: validates `name` and `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs,
    /// reentrant }`.
    #[wasm_bindgen(constructor)]
    pub fn new(name: JsValue, options: JsValue) -> JsResult<LockSpec> {
        let name = js(convert::name(&name))?;
        let o = js(convert::handle_options(
            "lock option",
            &options,
            &["reentrant"],
        ))?;
        Ok(LockSpec {
            name,
            primitive: Primitive::Mutex,
            options: o.lock,
            reentrant: o.reentrant,
        })
    }

    /// One permit of a semaphore with `permits` permits (a whole number, 1 to 1000000).
    pub fn semaphore(name: JsValue, permits: JsValue, options: JsValue) -> JsResult<LockSpec> {
        let name = js(convert::name(&name))?;
        let permits = js(convert::permits(&permits))?;
        let o = js(convert::handle_options("semaphore option", &options, &[]))?;
        LockSpec::checked(name, Primitive::Semaphore { permits }, o.lock, false)
    }

    /// One half of a read-write lock (`write`: the exclusive one); options as for a mutex plus
    /// `writersFirst`.
    #[wasm_bindgen(js_name = readWrite)]
    pub fn read_write(name: JsValue, options: JsValue, write: bool) -> JsResult<LockSpec> {
        let name = js(convert::name(&name))?;
        let flags = ["reentrant", "writersFirst"];
        let o = js(convert::handle_options(
            "read-write lock option",
            &options,
            &flags,
        ))?;
        let primitive = if write {
            Primitive::Write
        } else {
            Primitive::Read {
                writers_first: o.writers_first,
            }
        };
        LockSpec::checked(name, primitive, o.lock, o.reentrant)
    }

    /// An election (leadership with an empty value until `campaign(value)`).
    pub fn election(name: JsValue, options: JsValue) -> JsResult<LockSpec> {
        let name = js(convert::name(&name))?;
        let o = js(convert::handle_options("election option", &options, &[]))?;
        let primitive = Primitive::Leader {
            value: String::new(),
        };
        LockSpec::checked(name, primitive, o.lock, false)
    }

    /// This election's leadership, published as `value` (at most 4096 bytes of UTF-8).
    pub fn campaign(&self, value: JsValue) -> JsResult<LockSpec> {
        let value = js(convert::leader_value(&value))?;
        let primitive = Primitive::Leader { value };
        LockSpec::checked(self.name.clone(), primitive, self.options.clone(), false)
    }

    /// `mutex`, `semaphore`, `read`, `write` or `leader`.
    #[wasm_bindgen(getter)]
    pub fn kind(&self) -> String {
        match self.primitive {
            Primitive::Mutex => "mutex",
            Primitive::Semaphore { .. } => "semaphore",
            Primitive::Read { .. } => "read",
            Primitive::Write => "write",
            Primitive::Leader { .. } => "leader",
        }
        .into()
    }

    /// A semaphore's permit count (`undefined` for other kinds).
    #[wasm_bindgen(getter)]
    pub fn permits(&self) -> Option<u32> {
        match self.primitive {
            Primitive::Semaphore { permits } => Some(permits),
            _ => None,
        }
    }

    /// Whether a queued writer blocks later readers (`undefined` except for a read half).
    #[wasm_bindgen(getter, js_name = writersFirst)]
    pub fn writers_first(&self) -> Option<bool> {
        match self.primitive {
            Primitive::Read { writers_first } => Some(writers_first),
            _ => None,
        }
    }

    /// What a leader publishes (`undefined` except for leadership).
    #[wasm_bindgen(getter)]
    pub fn value(&self) -> Option<String> {
        match &self.primitive {
            Primitive::Leader { value } => Some(value.clone()),
            _ => None,
        }
    }

    /// Whether acquiring again through a handle that holds it re-enters its lease.
    #[wasm_bindgen(getter)]
    pub fn reentrant(&self) -> bool {
        self.reentrant
    }

    /// The lease of a waiter's queue entry in ms.
    #[wasm_bindgen(getter, js_name = entryTtlMs)]
    pub fn entry_ttl_ms(&self) -> f64 {
        convert::duration_ms(self.options.entry_ttl)
    }
}

lease_option_getters!(LockSpec);

impl LockSpec {
    fn checked(
        name: String,
        primitive: Primitive,
        options: LockOptions,
        reentrant: bool,
    ) -> JsResult<LockSpec> {
        js(lockgate_core::options::validate_primitive(&primitive))?;
        Ok(LockSpec {
            name,
            primitive,
            options,
            reentrant,
        })
    }
}

/// The engine of one client. Ids (`op`, `lease`, request `id`) are JS numbers; times are
/// `performance.now()` milliseconds.
#[wasm_bindgen(js_name = Engine)]
pub struct WasmEngine {
    engine: lockgate_core::Engine,
    shapes: Shapes,
    strings: StrCache,
    /// The RESP codec of the lean transport (`pollWireRequests`, `handleWireData`).
    wire: wire::Wire,
    /// A request `pollWireRequests` took from the engine but could not put in its batch (a
    /// subscribe after pipelines): handed out by the next call.
    stash: Option<Request>,
}

#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// A new engine with its own client channel; `keyPrefix` defaults to `lockgate:`. `shapes`
    /// holds the driver's `event(...)` object factory. `replicaAcks` (`{ replicas, timeoutMs }`
    /// or `undefined`) turns on the replica-acknowledged mode (PROTOCOL.md §4): the engine itself
    /// appends `WAIT` to its pipelines and counts only confirmed grants. `splitPipelines` (for a
    /// Redis Cluster) makes every script call its own request.
    #[wasm_bindgen(constructor)]
    pub fn new(key_prefix: JsValue, shapes: Shapes, replica_acks: JsValue, split_pipelines: bool) -> JsResult<WasmEngine> {
        let mut config = EngineConfig { split_pipelines, ..EngineConfig::default() };
        if let Some(p) = js(convert::key_prefix(&key_prefix))? {
            config.key_prefix = p;
        }
        config.replica_acks = js(convert::replica_acks(&replica_acks))?;
        let rng = Box::new(random::BufferedOsRandom::new());
        let engine = js(lockgate_core::Engine::new(config, rng))?;
        Ok(WasmEngine {
            engine,
            shapes,
            strings: StrCache::default(),
            wire: wire::Wire::default(),
            stash: None,
        })
    }

    /// The pub/sub channel this engine's grants arrive on.
    #[wasm_bindgen(getter)]
    pub fn channel(&self) -> String {
        self.engine.channel().to_string()
    }

    /// Starts an acquire of `lock` (any primitive); returns its op id. `options` is `{ timeoutMs, signal }`
    /// (`timeoutMs` absent: the lock's `waitTimeoutMs`); `tryOnce` makes a single attempt.
    pub fn acquire(
        &mut self,
        now: f64,
        lock: &LockSpec,
        options: JsValue,
        try_once: bool,
    ) -> JsResult<f64> {
        let wait = js(convert::acquire_wait(
            &options,
            try_once,
            lock.options.wait_timeout,
        ))?;
        let op = js(self.engine.acquire_primitive(
            instant(now),
            &lock.name,
            &lock.primitive,
            &lock.options,
            wait,
        ))?;
        Ok(id_to_js(op.0))
    }

    /// Re-enters a held lease (reentrant handles): completes at once as `acquired` with the same
    /// lease and fencing token and one more hold, or `failed` (`NOT_HELD`); returns the op id.
    pub fn reacquire(&mut self, now: f64, lease: f64) -> f64 {
        let op = self
            .engine
            .reacquire(instant(now), LeaseId(id_from_js(lease)));
        id_to_js(op.0)
    }

    /// Reads the leader of election `name`; completes as `observed`. Returns the op id.
    pub fn observe(&mut self, now: f64, name: JsValue) -> JsResult<f64> {
        let name = js(convert::name(&name))?;
        let op = js(self.engine.observe_leader(instant(now), &name))?;
        Ok(id_to_js(op.0))
    }

    /// Whether `lease` is held at `now` by the engine's knowledge.
    #[wasm_bindgen(js_name = isHeld)]
    pub fn is_held(&self, now: f64, lease: f64) -> bool {
        self.engine
            .is_held(instant(now), LeaseId(id_from_js(lease)))
    }

    /// Hands back ioredis results for request `id`: `[[err, value], ...]` for a pipeline
    /// (server errors stay in place), `[]` for a confirmed subscribe.
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(&mut self, now: f64, id: f64, results: JsValue) {
        let replies = convert::pipeline_results(&results);
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), replies);
    }

    /// Hands back the successful ioredis result of a one-command request `id` (the same as
    /// `handleReply(now, id, [[null, value]])`, without the wrapping).
    #[wasm_bindgen(js_name = handleValue)]
    pub fn handle_value(&mut self, now: f64, id: f64, value: JsValue) {
        let replies = convert::single_result(&value);
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), replies);
    }

    /// Hands back the error that prevented any answer to request `id`.
    #[wasm_bindgen(js_name = handleReplyError)]
    pub fn handle_reply_error(&mut self, now: f64, id: f64, error: JsValue) {
        let e = convert::client_error(&error);
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), Err(e));
    }

    /// Fails request `id`, whose kind this binding cannot perform.
    #[wasm_bindgen(js_name = rejectRequest)]
    pub fn reject_request(&mut self, now: f64, id: f64, why: String) {
        let e = Error::protocol(format!("the Node driver cannot perform {why}"));
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), Err(e));
    }

    /// A pub/sub message (`channel`, `payload` as strings or Buffers).
    #[wasm_bindgen(js_name = handleNotification)]
    pub fn handle_notification(&mut self, now: f64, channel: JsValue, payload: JsValue) {
        if let (Some(c), Some(p)) = (convert::bytes(&channel), convert::bytes(&payload)) {
            self.engine.handle_notification(instant(now), &c, &p);
        }
    }

    /// The subscriber connection dropped (grants may have been missed).
    #[wasm_bindgen(js_name = handleDisconnect)]
    pub fn handle_disconnect(&mut self, now: f64) {
        self.engine.handle_disconnect(instant(now));
    }
}

/// The lean transport (`lib/wire.js`, for clients connected from a URL): the engine's pipelines
/// leave as RESP bytes and the replies come back as the bytes the socket read, so one socket
/// write and one call per read is all the JavaScript side does. `pollRequest` and the
/// `handle*Reply*` methods above serve the ioredis path instead; a driver uses one or the other.
#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// The engine's next requests: the RESP of every pipeline it has queued, to be written in
    /// order on the command connection (each now waits for its replies) — a string when that is
    /// valid UTF-8 (to be written as UTF-8), else a `Uint8Array` —, or a request in
    /// `pollRequest`'s flat form (an array) for anything else (a subscribe), or `undefined`.
    #[wasm_bindgen(js_name = pollWireRequests)]
    pub fn poll_wire_requests(&mut self, now: f64) -> JsValue {
        self.wire.begin();
        loop {
            let Some(r) = self.stash.take().or_else(|| self.engine.poll_request()) else {
                break;
            };
            match &r.kind {
                RequestKind::Pipeline(commands) => {
                    if let Some((id, result)) = self.wire.encode(r.id, commands) {
                        self.engine.handle_reply(instant(now), id, result);
                    }
                }
                _ if self.wire.batch().is_empty() => {
                    let flat = convert::request_to_js(&r, &mut self.strings);
                    return flat.into_iter().collect::<js_sys::Array>().into();
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

    /// Bytes the command connection read. Every request whose replies are now complete goes to
    /// the engine. Returns how many requests still wait for replies, or -1 if the stream broke
    /// (a malformed or unexpected reply): those requests have failed, and the driver must drop
    /// the connection.
    #[wasm_bindgen(js_name = handleWireData)]
    pub fn handle_wire_data(&mut self, now: f64, data: &[u8]) -> i32 {
        let now = instant(now);
        let engine = &mut self.engine;
        match self
            .wire
            .feed(data, |(id, r)| engine.handle_reply(now, id, r))
        {
            Ok(()) => i32::try_from(self.wire.in_flight()).unwrap_or(i32::MAX),
            Err(e) => {
                self.wire
                    .fail_all(&e, |(id, r)| engine.handle_reply(now, id, r));
                -1
            }
        }
    }

    /// The command connection is gone (`error`: why, as the socket reported it): every request
    /// written to it and not answered fails with a retryable error.
    #[wasm_bindgen(js_name = handleWireClosed)]
    pub fn handle_wire_closed(&mut self, now: f64, error: JsValue) {
        let e = convert::client_error(&error);
        let engine = &mut self.engine;
        self.wire
            .fail_all(&e, |(id, r)| engine.handle_reply(instant(now), id, r));
    }
}

// `pollRequest` hands out `[id, n, argc, name, ...args, ...]` for a pipeline of `n` commands,
// `[id, -1, channel]` for a subscribe, `[id, -2, description]` for a kind the driver must reject.
driving_methods!(
    WasmEngine,
    Engine,
    convert::request_to_js,
    convert::event_to_js
);

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
