'use strict';
// The driver of one client's engine, the same for every backend. It follows the engine's
// driving contract (core/src/engine/mod.rs): every input is fed with a `performance.now()`
// timestamp, then `pump()` drains requests (each handed to the backend's transport, in emission
// order), drains events (settling the caller's promise or aborting a lease's loss signal), and
// re-arms the one timer at `pollTimeout()`. It holds no lock logic: no quorum, token, retry,
// expiry or queue decision is made here.
//
// A transport (lib/transport/<backend>.js) performs requests and hands back what came of them:
// `perform(req)` with a plain object `{ id, ... }`, answered through `answer(id, reply)` or
// `failed(id, err)`, and it hands pushed notices to `notice(data)`; the forms are the core's
// (lockgate_core::<backend>::data). Optionally `performRequests()` instead (it polls the engine
// itself, e.g. for its bytes); `holdOpen()` and `close()` for shutdown.

const { performance } = require('node:perf_hooks');
const { makeError } = require('./errors');
const exit = require('./exit');
const telemetry = require('./telemetry');
const wasm = require('./wasm');

const now = () => performance.now();

/** setTimeout's largest delay; a timer that fires early is harmless to the engine. */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** While work is pending but the engine has no timer, this keeps the event loop alive. */
const KEEPALIVE_MS = 60_000;
/** How long `close()` waits for releases to reach the server(s): the core's. */
const CLOSE_GRACE_MS = wasm.closeGraceMs();

/**
 * The object factory the engine builds its events with (one call each; the fields are the core's,
 * `data` what a read found); `waiter`: the op's pending promise.
 */
const SHAPES = {
  event: (kind, op, lease, fencingToken, validUntil, wasHeld, error, data, waiter) => ({ kind, op, lease, fencingToken, validUntil, wasHeld, error, data, waiter }),
};

/**
 * A lease's signals: its loss (an AbortSignal) and its spells at risk (the engine cannot confirm
 * it now: `atRisk` events, each spell ended by `renewed`). The AbortController is only made when
 * someone asks for the signal (most leases are released without anyone looking at it); a loss
 * before that is remembered.
 */
class LeaseSignals {
  constructor(lostWith) {
    this.controller = null;
    this.lostWith = lostWith;
    this.atRisk = false;
    /** `lease.onAtRisk` callbacks, each called at the start of every spell until the lease ends. */
    this.riskCallbacks = [];
  }

  get signal() {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.lostWith !== undefined) this.controller.abort(this.lostWith);
    }
    return this.controller.signal;
  }

  abort(reason) {
    if (this.lostWith !== undefined) return;
    this.lostWith = reason;
    this.atRisk = false;
    this.riskCallbacks = [];
    if (this.controller !== null) this.controller.abort(reason);
  }

  /** A spell at risk starts (`on`) or ends. */
  risk(on) {
    if (on && !this.atRisk) for (const callback of this.riskCallbacks) queueMicrotask(callback);
    this.atRisk = on;
  }

  onAtRisk(callback) {
    if (this.lostWith !== undefined) return;
    this.riskCallbacks.push(callback);
    if (this.atRisk) queueMicrotask(callback);
  }
}

class Driver {
  /** @param {import('../pkg/lockgate_node').Engine} engine */
  constructor(engine) {
    this.engine = engine;
    /** Set by connect() once the transport is open. */
    this.transport = null;
    /** lease id -> LeaseSignals of a lease the engine holds */
    this.leases = new Map();
    this.timer = null;
    this.timerAt = undefined;
    this.timerRef = false;
    this.pumping = false;
    this.again = false;
    this.closed = false;
    this.closing = null;
    this.idleWaiters = [];
    /** This driver for lib/exit.js (weakly: an unreachable idle client is still collected). */
    this.exitRef = new WeakRef(this);
    /** Whether lib/exit.js cleans it up at process exit (from its first acquire until close()). */
    this.exitRegistered = false;
    /** Whether the engine raises telemetry (on once a lockgate channel had a subscriber). */
    this.telemetryOn = false;
  }

  /** Turns the engine's telemetry on once anyone subscribes to a lockgate channel. */
  watchTelemetry() {
    if (this.telemetryOn || !telemetry.wanted()) return;
    this.telemetryOn = true;
    this.engine.enableTelemetry();
  }

  /** Publishes the telemetry the engine raised since the last call, in order. */
  publishTelemetry() {
    if (!this.telemetryOn) return;
    const batch = this.engine.takeTelemetry(telemetry.instrumented());
    if (batch === undefined) return;
    for (const row of typeof batch === 'string' ? JSON.parse(batch) : batch) telemetry.publish(row);
  }

  // ---- inputs ----

  /**
   * Starts an operation the engine already accepted; resolves with its completion event. The
   * engine keeps the pending promise as the op's waiter (see pollEvent); `signal` cancels it.
   */
  track(op, lease, signal) {
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, lease, onSettle: undefined, abortReason: undefined };
      if (signal) {
        const onAbort = () => {
          waiter.abortReason = signal.reason;
          this.engine.cancel(now(), op);
          this.pump();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        waiter.onSettle = () => signal.removeEventListener('abort', onAbort);
      }
      this.engine.wait(op, waiter);
      this.pump();
    });
  }

  /** From the first acquire or adoption (only they leave anything on the server), lib/exit.js cleans this client up at exit. */
  registerExit() {
    if (this.exitRegistered) return;
    this.exitRegistered = true;
    exit.register(this);
  }

  ensureOpen() {
    if (this.closed) throw makeError('CLOSED', 'the client is closed');
  }

  acquire(spec, options, tryOnce, signal) {
    this.ensureOpen();
    if (signal && signal.aborted) throw makeError('CANCELLED', 'the acquire was cancelled before it started');
    this.watchTelemetry();
    const op = this.engine.acquire(now(), spec, options, tryOnce);
    this.registerExit();
    return this.track(op, undefined, signal);
  }

  /**
   * Starts a read, `start(engine, now)` returning the op the engine accepted (observe, inspect,
   * inspectLock, breakLock, list); resolves with its completion event, whose `data` is what it found.
   */
  read(start) {
    this.ensureOpen();
    return this.track(start(this.engine, now()), undefined, undefined);
  }

  /** Adopts the lease `identity` names with the options of `spec` (LockSpec.adopted); resolves with the `acquired` event. */
  adopt(identity, spec) {
    this.ensureOpen();
    this.watchTelemetry();
    const op = this.engine.adopt(now(), identity, spec);
    this.registerExit();
    return this.track(op, undefined, undefined);
  }

  /** The identity of held lease `lease` (NotHeldError if it is not held). */
  identity(lease) {
    this.ensureOpen();
    return this.engine.leaseIdentity(now(), lease);
  }

  release(lease) {
    this.ensureOpen();
    return this.track(this.engine.release(now(), lease), lease, undefined);
  }

  extend(lease, ms) {
    this.ensureOpen();
    return this.track(this.engine.extend(now(), lease, ms), lease, undefined);
  }

  isHeld(lease) {
    return !this.closed && this.engine.isHeld(now(), lease);
  }

  remainingMs(lease) {
    if (this.closed) return 0;
    const until = this.engine.leaseValidUntil(lease);
    return until === undefined ? 0 : Math.max(0, until - now());
  }

  /** The signals of `lease`, made when its acquisition was delivered. */
  signals(lease) {
    return this.leases.get(lease) || new LeaseSignals(makeError('NOT_HELD', 'the lease is no longer held'));
  }

  /** Feeds one input (a reply, a message, a timer) and drains the outputs. */
  input(feed) {
    if (!this.accepting) return;
    feed();
    this.pump();
  }

  /** Whether inputs are still fed (not after close() finished). */
  get accepting() {
    return this.closing === null || !this.closing.done;
  }

  /** The transport error that prevented any answer to request `id` (a LockError keeps its code). */
  failed(id, err) {
    if (!this.accepting) return;
    this.engine.handleError(now(), id, err, false);
    this.pump();
  }

  /** The reply to data request `id`, a plain object in the core's form for its backend. */
  answer(id, reply) {
    if (!this.accepting) return;
    this.engine.handleData(now(), id, reply);
    this.pump();
  }

  /** A notice the server pushed (a watch, a session change), a plain object in the core's form. */
  notice(data) {
    if (!this.accepting) return;
    this.engine.handleNoticeData(now(), data);
    this.pump();
  }

  // ---- outputs ----

  pump() {
    if (this.pumping) {
      this.again = true; // an abort listener fed an input while we were delivering
      return;
    }
    this.pumping = true;
    this.watchTelemetry();
    try {
      do {
        this.again = false;
        this.performRequests();
        let ev;
        while ((ev = this.engine.pollEvent(now())) !== undefined) {
          if (ev === null) this.again = true; // the engine released a grant nobody waits for
          else this.deliver(ev);
        }
        this.publishTelemetry();
      } while (this.again);
    } finally {
      this.pumping = false;
    }
    this.arm();
  }

  /** Hands every request the engine has queued to the transport. */
  performRequests() {
    const t = this.transport;
    if (t === null) return;
    if (t.performRequests) return t.performRequests();
    let req;
    while ((req = this.engine.pollData()) !== undefined) t.perform(req);
  }

  deliver(ev) {
    // A lease's signals run their listeners at once, inside deliver: the telemetry raised before
    // the event (its lease.lost, lease.at_risk) is published first, so a listener sees it.
    // Settled promises run theirs later, after the pump's own publish.
    if (ev.kind === 'lost' || ev.kind === 'renewed' || ev.kind === 'atRisk') this.publishTelemetry();
    if (ev.kind === 'lost') {
      const loss = this.leases.get(ev.lease);
      if (loss) {
        this.leases.delete(ev.lease);
        loss.abort(ev.error);
      }
      return;
    }
    if (ev.kind === 'renewed' || ev.kind === 'atRisk') {
      const signals = this.leases.get(ev.lease);
      if (signals) signals.risk(ev.kind === 'atRisk');
      return;
    }
    // Completions nobody waits for never come here: the engine releases such a grant itself.
    const p = ev.waiter;
    if (p.onSettle) p.onSettle();
    // A released or failed operation on a lease may have ended it (a re-entered lease that gave
    // back one hold is still held).
    if (p.lease !== undefined && this.engine.leaseValidUntil(p.lease) === undefined) this.leases.delete(p.lease);
    if (ev.kind === 'failed') {
      if (p.abortReason !== undefined && ev.error.code === 'CANCELLED') {
        Object.defineProperty(ev.error, 'cause', { value: p.abortReason, writable: true, configurable: true });
      }
      p.reject(ev.error);
      return;
    }
    // A re-entered lease keeps the loss signal of its first hold.
    if (ev.kind === 'acquired' && !this.leases.has(ev.lease)) this.leases.set(ev.lease, new LeaseSignals());
    p.resolve(ev);
  }

  /**
   * One timer, at or before the engine's next deadline, ref'd only while the engine has work.
   * A timer that is already due earlier is kept (firing early is harmless: the engine does
   * nothing and the timer is re-armed), so an acquire/release cycle does not churn timers.
   */
  arm() {
    if (this.closing && this.closing.done) return this.clearTimer();
    const due = this.engine.pollTimeout();
    const idle = this.engine.isIdle();
    if (idle && this.idleWaiters.length) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
    const busy = !idle || this.closing !== null;
    if (due === undefined && !busy) {
      if (this.timer !== null && this.timerRef) this.setRef(false);
      return;
    }
    const at = due !== undefined ? due : now() + KEEPALIVE_MS;
    if (this.timer !== null && this.timerAt <= at) {
      if (busy !== this.timerRef) this.setRef(busy);
      return;
    }
    this.clearTimer();
    this.timerAt = at;
    const delay = Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil(at - now())));
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = undefined;
      this.input(() => this.engine.handleTimeout(now()));
    }, delay);
    this.timerRef = true;
    if (!busy) this.setRef(false);
  }

  setRef(ref) {
    this.timerRef = ref;
    if (ref) this.timer.ref();
    else this.timer.unref();
  }

  clearTimer() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = undefined;
  }

  // ---- shutdown ----

  /**
   * At process exit (lib/exit.js), where only synchronous code runs: asks the engine to release
   * every lease and withdraw every wait, and writes what it emits to the connections at once,
   * without waiting for a reply. Best effort; nothing else is done with this driver afterwards.
   */
  abandon() {
    if (this.closed) return;
    this.closed = true;
    try {
      this.engine.shutdown(now());
      this.pump();
    } catch {
      // The process is ending: what was not sent expires on the server by itself.
    }
  }

  /**
   * Releases every lease, cancels every wait (waiting up to CLOSE_GRACE_MS for the engine to
   * finish), fails what is still pending, aborts the loss signals of what is still held, then
   * closes the transport's connections; until then they keep the process alive (`holdOpen()`).
   */
  close() {
    if (this.closing) return this.closing.promise;
    this.closed = true;
    if (this.exitRegistered) exit.unregister(this);
    const closing = { done: false, promise: null };
    this.closing = closing;
    this.transport.holdOpen();
    closing.promise = (async () => {
      this.engine.shutdown(now());
      const idle = new Promise((resolve) => this.idleWaiters.push(resolve));
      this.pump();
      await exit.within(idle, CLOSE_GRACE_MS);
      closing.done = true;
      this.clearTimer();
      for (const p of this.engine.takeWaiters()) {
        if (p.onSettle) p.onSettle();
        p.reject(makeError('CLOSED', 'the client was closed before the operation completed'));
      }
      for (const [lease, loss] of this.leases) {
        this.leases.delete(lease);
        loss.abort(makeError('CLOSED', 'the client was closed, which released the lease'));
      }
      await this.transport.close();
    })();
    return closing.promise;
  }
}

module.exports = { Driver, SHAPES, now };
