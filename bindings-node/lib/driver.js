'use strict';
// The driver: performs the engine's requests with ioredis and keeps its one timer.
//
// It follows the engine's driving contract (core/src/engine/mod.rs): every input is fed with a
// `performance.now()` timestamp, then `pump()` drains requests (performed in emission order on
// the command connection, subscribes on the subscriber connection), drains events (settling the
// caller's promise or aborting a lease's signal), and re-arms the timer at `pollTimeout()`.
// It holds no lock logic: no quorum, token, retry, expiry or queue decisions are made here.
//
// On a Redis Cluster (an ioredis `Cluster` as the command connection) the same holds, with two
// transport differences: the commands of one engine pipeline are sent one by one (each routed
// by ioredis to the primary owning its key's slot; every key of one lock shares a hash tag, but
// a pipeline batches several locks) and their replies handed back in order; and the subscriber
// is a plain connection to one node of the cluster (PUBLISH is cluster-wide), replaced by a
// connection to another node when it drops.

const { performance } = require('node:perf_hooks');
const { makeError } = require('./errors');

const now = () => performance.now();

/** setTimeout's largest delay; a timer that fires early is harmless to the engine. */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** While work is pending but the engine has no timer, this keeps the event loop alive. */
const KEEPALIVE_MS = 60_000;
/** How long `close()` waits for releases to reach the server. */
const CLOSE_GRACE_MS = 2_000;

/** The object factory the engine builds its events with (one call each). */
const SHAPES = {
  event: (kind, op, lease, fencingToken, validUntil, wasHeld, error) => ({
    kind,
    op,
    lease,
    fencingToken,
    validUntil,
    wasHeld,
    error,
  }),
  observed: (op, value, term, remainingMs) => ({
    kind: 'observed',
    op,
    value,
    term,
    remainingMs,
  }),
};

/** The node connections of an ioredis Cluster, or the one connection of a Redis client. */
function connectionsOf(redis) {
  return redis && redis.isCluster ? redis.nodes('all') : [redis];
}

function unrefSocket(redis) {
  for (const r of connectionsOf(redis)) {
    const s = r && r.stream;
    if (s && typeof s.unref === 'function') s.unref();
  }
}

function refSocket(redis) {
  for (const r of connectionsOf(redis)) {
    const s = r && r.stream;
    if (s && typeof s.ref === 'function') s.ref();
  }
}

/** A random element, or undefined for an empty array. */
function sample(items) {
  return items.length ? items[Math.floor(Math.random() * items.length)] : undefined;
}

/**
 * A lease's loss signal. The AbortController is only made when someone asks for the signal
 * (most leases are released without anyone looking at it); a loss before that is remembered.
 */
class LossSignal {
  constructor() {
    this.controller = null;
    this.lostWith = undefined;
  }

  static lost(reason) {
    const s = new LossSignal();
    s.lostWith = reason;
    return s;
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
    if (this.controller !== null) this.controller.abort(reason);
  }
}

class Driver {
  /**
   * @param {import('../pkg/lockgate_node').Engine} engine
   * @param {import('ioredis').Redis | import('ioredis').Cluster} redis the command connection
   * @param {boolean} ownsRedis whether close() quits it (and its sockets may be unref'd)
   */
  constructor(engine, redis, ownsRedis) {
    this.engine = engine;
    this.redis = redis;
    this.ownsRedis = ownsRedis;
    /** Whether `redis` is an ioredis Cluster (commands go one by one, see perform()). */
    this.cluster = redis.isCluster === true;
    /** @type {import('ioredis').Redis | null} created on the engine's first subscribe */
    this.sub = null;
    /** op id -> { resolve, reject, lease?, onSettle?, abortReason? } */
    this.pending = new Map();
    /** lease id -> LossSignal of a lease the engine holds */
    this.leases = new Map();
    this.timer = null;
    this.timerAt = undefined;
    this.timerRef = false;
    this.pumping = false;
    this.again = false;
    this.closed = false;
    this.closing = null;
    this.idleWaiters = [];
    if (ownsRedis && this.cluster) {
      // The same for every node connection of an owned Cluster, including ones opened later
      // (after a MOVED or a failover).
      const watch = (node) => {
        node.on('ready', () => {
          if (!this.closed) unrefSocket(node);
        });
        if (node.status === 'ready') unrefSocket(node);
      };
      for (const node of redis.nodes('all')) watch(node);
      redis.on('+node', watch);
    } else if (ownsRedis) {
      // An idle client must not keep the process alive: the socket is unref'd and a ref'd
      // timer stands in for it while the engine has work (see arm()).
      redis.on('ready', () => unrefSocket(redis));
      if (redis.status === 'ready') unrefSocket(redis);
    }
  }

  // ---- inputs ----

  /** Starts an operation the engine already accepted; resolves with its completion event. */
  track(op, lease, onSettle) {
    return new Promise((resolve, reject) => {
      this.pending.set(op, { resolve, reject, lease, onSettle, abortReason: undefined });
      this.pump();
    });
  }

  ensureOpen() {
    if (this.closed) throw makeError('CLOSED', 'the client is closed');
  }

  acquire(spec, options, tryOnce, signal) {
    this.ensureOpen();
    if (signal && signal.aborted) {
      throw makeError('CANCELLED', 'the acquire was cancelled before it started');
    }
    const op = this.engine.acquire(now(), spec, options, tryOnce);
    let onSettle;
    let entry;
    if (signal) {
      const onAbort = () => {
        entry = this.pending.get(op);
        if (entry) entry.abortReason = signal.reason;
        this.engine.cancel(now(), op);
        this.pump();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      onSettle = () => signal.removeEventListener('abort', onAbort);
    }
    return this.track(op, undefined, onSettle);
  }

  /** Re-enters a held lease (reentrant handles); completes at once, `acquired` or NOT_HELD. */
  reacquire(lease) {
    this.ensureOpen();
    return this.track(this.engine.reacquire(now(), lease), undefined, undefined);
  }

  /** Reads the leader of election `name`; resolves with the `observed` event. */
  observe(name) {
    this.ensureOpen();
    return this.track(this.engine.observe(now(), name), undefined, undefined);
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

  /** The loss signal of `lease`, made when its acquisition was delivered. */
  lossSignal(lease) {
    const held = this.leases.get(lease);
    return held || LossSignal.lost(makeError('NOT_HELD', 'the lease is no longer held'));
  }

  /** Feeds one input (a reply, a message, a timer) and drains the outputs. */
  input(feed) {
    if (this.closing && this.closing.done) return;
    feed();
    this.pump();
  }

  /** Whether inputs are still fed (not after close() finished). */
  get accepting() {
    return this.closing === null || !this.closing.done;
  }

  /** The one-command fast path of input(): a reply value (no closure, no wrapping). */
  replied(id, value) {
    if (!this.accepting) return;
    this.engine.handleValue(now(), id, value);
    this.pump();
  }

  /** The one-command fast path of input(): a command that failed (a server or transport error). */
  failed(id, err) {
    if (!this.accepting) return;
    this.engine.handleReply(now(), id, [[err, null]]);
    this.pump();
  }

  // ---- outputs ----

  pump() {
    if (this.pumping) {
      this.again = true; // an abort listener fed an input while we were delivering
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        let req;
        while ((req = this.engine.pollRequest()) !== undefined) this.perform(req);
        let ev;
        while ((ev = this.engine.pollEvent()) !== undefined) this.deliver(ev);
      } while (this.again);
    } finally {
      this.pumping = false;
    }
    this.arm();
  }

  /**
   * Performs one request, given flat (see pollRequest in src/lib.rs): `[id, n, argc, name,
   * ...args, ...]` for a pipeline of n commands, `[id, -1, channel]` for a subscribe,
   * `[id, -2, description]` for a kind this driver cannot perform.
   */
  perform(req) {
    const id = req[0];
    const n = req[1];
    if (n === 1) {
      // One command: no pipeline object, and its reply goes back without [[err, value]] wrapping.
      this.redis.call(...req.slice(3, 3 + req[2])).then(
        (value) => this.replied(id, value),
        (err) => this.failed(id, err),
      );
    } else if (n >= 0 && this.cluster) {
      // A cluster pipeline must stay in one slot, and the engine batches scripts of several
      // locks: each command goes on its own (still issued in order), replies are collected in
      // the pipeline's order. Server errors stay in place (NOSCRIPT is the engine's to handle);
      // a transport error on any command fails the request, as with a pipeline.
      const sends = [];
      for (let i = 2, c = 0; c < n; c++) {
        const argc = req[i];
        sends.push(
          this.redis.call(...req.slice(i + 1, i + 1 + argc)).then(
            (value) => [null, value],
            (err) => [err, null],
          ),
        );
        i += 1 + argc;
      }
      Promise.all(sends).then((results) =>
        this.input(() => this.engine.handleReply(now(), id, results)),
      );
    } else if (n >= 0) {
      const p = this.redis.pipeline();
      for (let i = 2, c = 0; c < n; c++) {
        const argc = req[i];
        p.call(...req.slice(i + 1, i + 1 + argc));
        i += 1 + argc;
      }
      p.exec().then(
        (results) => this.input(() => this.engine.handleReply(now(), id, results)),
        (err) => this.input(() => this.engine.handleReplyError(now(), id, err)),
      );
    } else if (n === -1) {
      this.subscribe(req[2]).then(
          () => this.input(() => this.engine.handleReply(now(), id, [])),
          (err) => this.input(() => this.engine.handleReplyError(now(), id, err)),
        );
    } else {
      this.engine.rejectRequest(now(), id, String(req[2]));
    }
  }

  /** Subscribes the subscriber connection (made if needed) to `channel`. */
  async subscribe(channel) {
    const sub = this.cluster ? await this.clusterSubscriber() : this.subscriber();
    await sub.subscribe(channel);
  }

  /**
   * The one subscriber connection of this client, opened on the engine's first subscribe (and
   * again if the previous one ended for good).
   */
  subscriber() {
    if (this.sub && this.sub.status !== 'end') return this.sub;
    return this.watchSubscriber(this.redis.duplicate());
  }

  /**
   * On a Cluster: a connection to one node (a ready one if any), made like that node's own
   * connection (credentials, TLS, NAT mapping) but not reconnecting: when it drops, the engine
   * learns of it (handleDisconnect), subscribes again, and this picks a node that is up.
   */
  async clusterSubscriber() {
    if (this.sub && this.sub.status !== 'end') return this.sub;
    if (this.redis.nodes('all').length === 0) {
      // A Cluster that has not connected yet knows no node; a round trip makes it connect.
      await this.redis.ping();
    }
    if (this.closed) throw makeError('CLOSED', 'the client is closed');
    if (this.sub && this.sub.status !== 'end') return this.sub;
    const nodes = this.redis.nodes('all');
    const node = sample(nodes.filter((n) => n.status === 'ready')) || sample(nodes);
    if (!node) throw makeError('CONNECTION', 'no node of the Redis Cluster is reachable');
    return this.watchSubscriber(
      node.duplicate({ lazyConnect: true, retryStrategy: null, readOnly: false, enableOfflineQueue: true }),
    );
  }

  /** Wires a new subscriber connection's messages and disconnects to the engine. */
  watchSubscriber(sub) {
    let ready = false;
    sub.on('message', (channel, message) =>
      this.input(() => this.engine.handleNotification(now(), channel, message)),
    );
    sub.on('ready', () => {
      ready = true;
      if (!this.closed) unrefSocket(sub);
    });
    sub.on('close', () => {
      if (!ready) return;
      ready = false;
      this.input(() => this.engine.handleDisconnect(now()));
    });
    // Connection errors reach callers through the engine (failed subscribes, retries).
    sub.on('error', () => {});
    this.sub = sub;
    return sub;
  }

  deliver(ev) {
    switch (ev.kind) {
      case 'lost': {
        const loss = this.leases.get(ev.lease);
        if (loss) {
          this.leases.delete(ev.lease);
          loss.abort(ev.error);
        }
        return;
      }
      case 'renewed':
        return;
      default:
        break;
    }
    const p = this.pending.get(ev.op);
    if (!p) {
      // Nobody waits for this operation (one started by shutdown, or a grant whose caller is
      // gone): undo an acquisition, as the native driver does.
      if (ev.kind === 'acquired') {
        this.engine.release(now(), ev.lease);
        this.again = true;
      }
      return;
    }
    this.pending.delete(ev.op);
    if (p.onSettle) p.onSettle();
    switch (ev.kind) {
      case 'acquired':
        // A re-entered lease keeps the loss signal of its first hold.
        if (!this.leases.has(ev.lease)) this.leases.set(ev.lease, new LossSignal());
        p.resolve(ev);
        break;
      case 'released':
        if (this.engine.leaseValidUntil(p.lease) === undefined) this.leases.delete(p.lease);
        p.resolve(ev);
        break;
      case 'failed':
        // A failed release may still have ended the lease (the engine dropped it).
        if (p.lease !== undefined && this.engine.leaseValidUntil(p.lease) === undefined) {
          this.leases.delete(p.lease);
        }
        if (p.abortReason !== undefined && ev.error.code === 'CANCELLED') {
          Object.defineProperty(ev.error, 'cause', {
            value: p.abortReason,
            writable: true,
            configurable: true,
          });
        }
        p.reject(ev.error);
        break;
      default:
        p.resolve(ev);
    }
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

  /** Releases every lease, cancels every wait, then closes the connections this client owns. */
  close() {
    if (this.closing) return this.closing.promise;
    this.closed = true;
    const closing = { done: false, promise: null };
    this.closing = closing;
    // Keep the process alive until the releases are answered and the connections closed.
    if (this.ownsRedis) refSocket(this.redis);
    if (this.sub) refSocket(this.sub);
    closing.promise = (async () => {
      this.engine.shutdown(now());
      const idle = new Promise((resolve) => this.idleWaiters.push(resolve));
      this.pump();
      let grace;
      await Promise.race([
        idle,
        new Promise((resolve) => {
          grace = setTimeout(resolve, CLOSE_GRACE_MS);
        }),
      ]);
      clearTimeout(grace);
      closing.done = true;
      this.clearTimer();
      for (const [op, p] of this.pending) {
        this.pending.delete(op);
        if (p.onSettle) p.onSettle();
        p.reject(makeError('CLOSED', 'the client was closed before the operation completed'));
      }
      for (const [lease, loss] of this.leases) {
        this.leases.delete(lease);
        loss.abort(makeError('CLOSED', 'the client was closed, which released the lease'));
      }
      if (this.sub) this.sub.disconnect();
      if (this.ownsRedis) {
        try {
          await this.redis.quit();
        } catch {
          this.redis.disconnect();
        }
      }
    })();
    return closing.promise;
  }
}

module.exports = { Driver, LossSignal, SHAPES, now };
