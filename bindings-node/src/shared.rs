//! The JavaScript surface both engines share, written once: the driving methods the drivers'
//! common base (`lib/engine-driver.js`) calls on either (`release`, `extend`, `cancel`,
//! `shutdown`, `leaseValidUntil`, `isIdle`, `handleTimeout`, `pollRequest`, `pollEvent`,
//! `pollTimeout`), and the lease
//! option getters of both lock specs. Each macro emits one more `#[wasm_bindgen]` impl block of
//! the given type, whose `engine` (or `options`) field has those methods (fields).

/// The driving methods of an engine wrapper `$ty` (exported as `$js`) whose `engine` field is a
/// core engine (`Engine` or `RedlockEngine`: the same signatures) and whose `shapes` and
/// `strings` fields build what it hands out: requests with `$request` (`convert::request_to_js`,
/// `convert::node_request_to_js`), events with `$event` (`convert::event_to_js`,
/// `convert::redlock_event_to_js`).
macro_rules! driving_methods {
    ($ty:ident, $js:ident, $request:path, $event:path) => {
        #[wasm_bindgen(js_class = $js)]
        impl $ty {
            /// Releases a lease (owner-only; on every master for Redlock); returns the op id.
            pub fn release(&mut self, now: f64, lease: f64) -> f64 {
                let lease = lockgate_core::engine::LeaseId($crate::convert::id_from_js(lease));
                let op = self.engine.release($crate::convert::instant(now), lease);
                $crate::convert::id_to_js(op.0)
            }

            /// Sets the lease's remaining time to `ms` where it is still held; returns the op id.
            pub fn extend(
                &mut self,
                now: f64,
                lease: f64,
                ms: JsValue,
            ) -> $crate::errors::JsResult<f64> {
                let d = $crate::errors::js($crate::convert::lease_millis("ms", &ms))?;
                let lease = lockgate_core::engine::LeaseId($crate::convert::id_from_js(lease));
                let op = $crate::errors::js(self.engine.extend(
                    $crate::convert::instant(now),
                    lease,
                    d,
                ))?;
                Ok($crate::convert::id_to_js(op.0))
            }

            /// Abandons a pending acquire (it completes with a `CANCELLED` failure).
            pub fn cancel(&mut self, now: f64, op: f64) {
                let op = lockgate_core::engine::OpId($crate::convert::id_from_js(op));
                self.engine.cancel($crate::convert::instant(now), op);
            }

            /// Cancels every pending acquire and releases every lease.
            pub fn shutdown(&mut self, now: f64) {
                self.engine.shutdown($crate::convert::instant(now));
            }

            /// The instant (ms) until which `lease` is certainly valid; `undefined` if not held.
            #[wasm_bindgen(js_name = leaseValidUntil)]
            pub fn lease_valid_until(&self, lease: f64) -> Option<f64> {
                let lease = lockgate_core::engine::LeaseId($crate::convert::id_from_js(lease));
                self.engine
                    .lease_valid_until(lease)
                    .map($crate::convert::millis)
            }

            /// Whether nothing is pending: no acquire, lease, cleanup or request in flight.
            #[wasm_bindgen(js_name = isIdle)]
            pub fn is_idle(&self) -> bool {
                self.engine.is_idle()
            }

            /// Runs the timers due at `now` (early calls are harmless).
            #[wasm_bindgen(js_name = handleTimeout)]
            pub fn handle_timeout(&mut self, now: f64) {
                self.engine.handle_timeout($crate::convert::instant(now));
            }

            /// The next request as a flat array (see `$request`), or `undefined`.
            #[wasm_bindgen(js_name = pollRequest)]
            pub fn poll_request(&mut self) -> Option<Vec<JsValue>> {
                self.engine
                    .poll_request()
                    .map(|r| $request(&r, &mut self.strings))
            }

            /// The next event (`{ kind, ... }`, see `$event`), or `undefined`.
            #[wasm_bindgen(js_name = pollEvent)]
            pub fn poll_event(&mut self) -> JsValue {
                match self.engine.poll_event() {
                    Some(e) => $event(&e, &self.shapes, &mut self.strings),
                    None => JsValue::UNDEFINED,
                }
            }

            /// When (ms) `handleTimeout` next has work, or `undefined`.
            #[wasm_bindgen(js_name = pollTimeout)]
            pub fn poll_timeout(&self) -> Option<f64> {
                self.engine.poll_timeout().map($crate::convert::millis)
            }
        }
    };
}

/// The lease option getters (`leaseMs`, `autoRenew`, `waitTimeoutMs`) of a lock spec `$ty`
/// whose `options` field is a `LockOptions`.
macro_rules! lease_option_getters {
    ($ty:ident) => {
        #[wasm_bindgen]
        impl $ty {
            /// The lock's name.
            #[wasm_bindgen(getter)]
            pub fn name(&self) -> String {
                self.name.clone()
            }

            /// The lease in ms.
            #[wasm_bindgen(getter, js_name = leaseMs)]
            pub fn lease_ms(&self) -> f64 {
                $crate::convert::duration_ms(self.options.lease)
            }

            /// Whether the watchdog renews the lease while held.
            #[wasm_bindgen(getter, js_name = autoRenew)]
            pub fn auto_renew(&self) -> bool {
                self.options.auto_renew
            }

            /// The default wait of `acquire()` in ms; `Infinity` waits without limit.
            #[wasm_bindgen(getter, js_name = waitTimeoutMs)]
            pub fn wait_timeout_ms(&self) -> f64 {
                $crate::convert::wait_ms(self.options.wait_timeout)
            }
        }
    };
}
