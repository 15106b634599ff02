//! Redlock over N independent masters (PROTOCOL.md §8) for JavaScript: the core's sans-IO
//! [`RedlockEngine`] behind wasm-bindgen, converting arguments only. `lib/redlock.js` drives it:
//! every request names a master and carries one command, performed in emission order on that
//! master's connection, and gets exactly one reply (or the error that prevented one).

use lockgate_core::engine::{LeaseId, RequestId};
use lockgate_core::redlock::RedlockEngine;
use lockgate_core::LockOptions;
use wasm_bindgen::prelude::*;

use crate::convert::{self, id_from_js, id_to_js, instant, Shapes, StrCache};
use crate::errors::{js, JsResult};
use crate::random;

/// The Lua sources of the Redlock scripts, for the driver to `SCRIPT LOAD` on each master when
/// its connection becomes ready. Only an optimisation: the engine handles `NOSCRIPT` itself (a
/// master that answered it gets the body with its next call), so preloading only spares a fresh
/// master the one quickly decided attempt it would otherwise sit out.
#[wasm_bindgen(js_name = redlockScripts)]
pub fn redlock_scripts() -> Vec<JsValue> {
    lockgate_core::redis::redlock::all()
        .iter()
        .map(|s| JsValue::from_str(s.source))
        .collect()
}

/// A validated Redlock lock name and its lease options (`redlock.lock(name, options)`).
#[wasm_bindgen]
pub struct RedlockSpec {
    name: String,
    options: LockOptions,
}

#[wasm_bindgen]
impl RedlockSpec {
    /// Validates `name` and `{ leaseMs, autoRenew, waitTimeoutMs }` for the deployment of
    /// `engine` (a lease must fit its `maxLeaseMs`; without one it gets 30 s or `maxLeaseMs`).
    #[wasm_bindgen(constructor)]
    pub fn new(name: JsValue, options: JsValue, engine: &WasmRedlockEngine) -> JsResult<RedlockSpec> {
        let name = js(convert::name(&name))?;
        let options = js(convert::redlock_lock_options(&options, engine.engine.config()))?;
        Ok(RedlockSpec { name, options })
    }
}

lease_option_getters!(RedlockSpec);

/// The Redlock engine of one `connectRedlock()` deployment. Ids are JS numbers; times are
/// `performance.now()` milliseconds.
#[wasm_bindgen(js_name = RedlockEngine)]
pub struct WasmRedlockEngine {
    engine: RedlockEngine,
    shapes: Shapes,
    strings: StrCache,
}

#[wasm_bindgen(js_class = RedlockEngine)]
impl WasmRedlockEngine {
    /// An engine for `masters` masters with the Redlock settings in `options` (`keyPrefix`,
    /// `maxLeaseMs`, `nodeTimeoutMs`, `retryDelayMs`, `retryJitterMs`, `driftFactor`,
    /// `driftFixedMs`; the driver's `connectTimeoutMs`, `commandTimeoutMs` and `redisOptions`
    /// are accepted and left to it). `shapes` holds the driver's `event(...)` factory.
    #[wasm_bindgen(constructor)]
    pub fn new(masters: u32, options: JsValue, shapes: Shapes) -> JsResult<WasmRedlockEngine> {
        let config = js(convert::redlock_config(&options, masters as usize))?;
        let rng = Box::new(random::BufferedOsRandom::new());
        let engine = js(RedlockEngine::new(config, rng))?;
        Ok(WasmRedlockEngine {
            engine,
            shapes,
            strings: StrCache::default(),
        })
    }

    /// How many masters there are.
    #[wasm_bindgen(getter)]
    pub fn masters(&self) -> u32 {
        self.engine.config().masters as u32
    }

    /// How many masters must agree (`masters / 2 + 1`).
    #[wasm_bindgen(getter)]
    pub fn quorum(&self) -> u32 {
        self.engine.quorum() as u32
    }

    /// The deployment's maximum lease in ms.
    #[wasm_bindgen(getter, js_name = maxLeaseMs)]
    pub fn max_lease_ms(&self) -> f64 {
        convert::duration_ms(self.engine.config().max_lease)
    }

    /// Starts acquiring `lock`; returns the op id. `options` is `{ timeoutMs, signal }`
    /// (`timeoutMs` absent: the lock's `waitTimeoutMs`); `tryOnce` makes a single attempt.
    pub fn acquire(
        &mut self,
        now: f64,
        lock: &RedlockSpec,
        options: JsValue,
        try_once: bool,
    ) -> JsResult<f64> {
        let wait = js(convert::acquire_wait(
            &options,
            try_once,
            lock.options.wait_timeout,
        ))?;
        let op = js(self
            .engine
            .acquire(instant(now), &lock.name, &lock.options, wait))?;
        Ok(id_to_js(op.0))
    }

    /// Whether `lease` is certainly still valid at `now` (its validity has not run out).
    #[wasm_bindgen(js_name = isHeld)]
    pub fn is_held(&self, now: f64, lease: f64) -> bool {
        self.engine
            .lease_valid_until(LeaseId(id_from_js(lease)))
            .is_some_and(|until| instant(now) < until)
    }

    /// The reply value ioredis resolved request `id` with.
    #[wasm_bindgen(js_name = handleValue)]
    pub fn handle_value(&mut self, now: f64, id: f64, value: JsValue) {
        let reply = convert::single_result(&value).map(|mut v| v.remove(0));
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), reply);
    }

    /// What ioredis rejected request `id` with (a server error reply, or the transport error
    /// that prevented any reply).
    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, now: f64, id: f64, error: JsValue) {
        let reply = convert::single_error(&error);
        self.engine
            .handle_reply(instant(now), RequestId(id_from_js(id)), reply);
    }
}

// `pollRequest` hands out `[id, master, name, ...args]`; events carry no `fencingToken`.
driving_methods!(
    WasmRedlockEngine,
    RedlockEngine,
    convert::node_request_to_js,
    convert::redlock_event_to_js
);
