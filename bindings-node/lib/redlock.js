'use strict';
// Redlock over N independent masters (PROTOCOL.md §8): Redlock -> RedlockLock -> RedlockLease,
// over the core's Redlock engine (WebAssembly) and one ioredis connection per master.
//
// The driver follows the engine's driving contract like lib/driver.js does for the mutex (and
// shares its pump, settlement, loss signals, timer and shutdown: lib/engine-driver.js): every
// input is fed with a `performance.now()` timestamp, then `pump()` performs the requests the
// engine emitted (each names a master and carries one command, sent in emission order on that
// master's connection and answered exactly once), delivers events, and re-arms the one timer at
// `pollTimeout()`. No lock logic lives here: no quorum, validity, drift, retry or undo decision
// is made in JavaScript.
//
// Connections this package opens (from URLs) do not reconnect by themselves and have no offline
// queue: a master that is down (at connect, or since its connection dropped) fails its requests
// at once, and the first request for it starts one connection attempt in the background, as the
// native driver does (core/src/native/redlock.rs). Nothing is retried on a timer, so an idle
// process with a dead master still exits.

const Redis = require('ioredis');
const wasm = require('./wasm');
const errors = require('./errors');
const { EngineDriver, SHAPES, now } = require('./engine-driver');
const { serverOptions } = require('./login');
const { HandleLeases, HeldLease, acquiredOrTimeout, checkSignal, closeOnDispose, disposable, usingLease } = require('./lease');
const {
  checkUrl,
  endpointOf,
  isIoredis,
  redact,
  refSocket,
  unrefSocket,
  urlCommandTimeout,
  urlConnectTimeout,
} = require('./targets');

const { invalid, makeError } = errors;
const INTERNAL = Symbol('lockgate.redlock');
const SCRIPTS = wasm.redlockScripts();

/** One master: its connection, whether this package owns it, and how to name it in messages. */
class Master {
  constructor(redis, owned, label) {
    this.redis = redis;
    this.owned = owned;
    this.label = label;
    /** A background connection attempt in progress (owned connections only). */
    this.connecting = false;
    /** Set by close(): the socket stays ref'd until it is closed. */
    this.keepRef = false;
    /** The 'ready' listener put on a caller's client (removed by close()). */
    this.onReady = undefined;
  }

  /**
   * Whether requests go out on the connection now. A caller's ioredis client always takes them
   * (its own reconnect and offline-queue settings apply); an owned one only when ready.
   */
  get usable() {
    return !this.owned || this.redis.status === 'ready';
  }

  /**
   * Loads the Redlock scripts on the master (on every new connection: a restarted master has
   * lost its script cache). The engine copes with NOSCRIPT by itself (the next call carries the
   * body); preloading only spares a fresh master the one attempt it would otherwise sit out.
   */
  preload() {
    if (this.redis.status !== 'ready') return;
    for (const source of SCRIPTS) this.redis.script('LOAD', source).catch(() => {});
  }

  /** Starts one connection attempt if the owned connection is down and none is under way. */
  reconnect() {
    const status = this.redis.status;
    if (!this.owned || this.connecting || (status !== 'end' && status !== 'wait')) return;
    this.connecting = true;
    this.redis
      .connect()
      .catch(() => {})
      .finally(() => {
        this.connecting = false;
      });
  }

  /** Closes an owned connection (politely if it is up); leaves a caller's client as it was. */
  async close() {
    if (!this.owned) {
      this.redis.removeListener('ready', this.onReady);
      return;
    }
    if (this.redis.status === 'ready') {
      try {
        await this.redis.quit();
        return;
      } catch {
        // fall through
      }
    }
    this.redis.disconnect();
  }
}

class RedlockDriver extends EngineDriver {
  /**
   * @param {import('../pkg/lockgate_node').RedlockEngine} engine
   * @param {Master[]} masters in the engine's master order
   */
  constructor(engine, masters) {
    super(engine, 'Redlock client');
    this.masters = masters;
  }

  /** What ioredis rejected request `id` with (a server error reply or a transport error). */
  failed(id, err) {
    if (!this.accepting) return;
    this.engine.handleError(now(), id, err);
    this.pump();
  }

  /** Performs one request, given flat: `[id, master, name, ...args]`. */
  perform(req) {
    const id = req[0];
    const master = this.masters[req[1]];
    if (!master.usable) {
      // Down: answer at once (after this pump) and try to connect in the background.
      if (!this.closed) master.reconnect();
      const err = makeError('CONNECTION', `master ${master.label} is not connected`);
      Promise.resolve().then(() => this.failed(id, err));
      return;
    }
    master.redis.call(...req.slice(2)).then(
      (value) => this.replied(id, value),
      (err) => this.failed(id, err),
    );
  }

  /** Keeps the masters' connections ref'd while close() releases. */
  holdOpen() {
    for (const m of this.masters) {
      m.keepRef = true;
      if (m.owned) refSocket(m.redis);
    }
  }

  async closeConnections() {
    await Promise.all(this.masters.map((m) => m.close()));
  }
}

// ---- connecting ----

/** `host:port/db` of an ioredis client's server. */
function clientIdentity(redis) {
  const o = redis.options || {};
  if (o.path) return `${o.path}/${o.db || 0}`;
  return `${String(o.host || 'localhost').toLowerCase()}:${o.port || 6379}/${o.db || 0}`;
}

/** `host:port` for messages (no credentials). */
function labelOf(identity) {
  return identity.replace(/\/0$/, '');
}

/**
 * An ioredis client for one master URL: no automatic reconnect and no offline queue (a master
 * that is down fails fast and is reconnected on demand, see Master.reconnect), its socket
 * unref'd whenever it is ready (the driver's timer keeps the process alive while there is work).
 */
function ownMaster(url, opts) {
  const ro = opts.redisOptions || {};
  const redis = new Redis({
    ...serverOptions(url, ro),
    connectTimeout: urlConnectTimeout(opts),
    commandTimeout: urlCommandTimeout(opts),
    lazyConnect: true,
    enableOfflineQueue: false,
    retryStrategy: null,
  });
  const master = new Master(redis, true, '');
  master.lastError = undefined;
  // Failures reach callers through the engine (failed votes, connection errors).
  redis.on('error', (err) => {
    master.lastError = err;
  });
  redis.on('ready', () => {
    if (!master.keepRef) unrefSocket(redis);
    master.preload();
  });
  return master;
}

/** The first connection of an owned master; rejects with a LockError naming the master. */
async function firstConnect(master, url, opts) {
  const limitMs = urlConnectTimeout(opts) + 1000;
  let timer;
  try {
    master.connecting = true;
    await Promise.race([
      master.redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no ready connection within ${limitMs} ms`)), limitMs);
      }),
    ]);
  } catch (err) {
    master.redis.disconnect();
    const e = wasm.clientError(master.lastError ?? err);
    e.message = `${e.message} (connecting to ${redact(url)})`;
    throw e;
  } finally {
    master.connecting = false;
    clearTimeout(timer);
  }
}

/**
 * Connects to N independent Redis masters for Redlock. `targets` lists each master once, as a
 * `redis://` / `rediss://` URL (the Redlock then owns one connection to it) or an existing
 * ioredis client (left open by `close()`). Masters that cannot be reached now count as failed
 * votes and are connected again when next needed; it fails only if none is reachable or a
 * master refuses the credentials.
 */
async function connectRedlock(targets, options) {
  if (!Array.isArray(targets)) {
    throw invalid('connectRedlock() takes an array of redis:// or rediss:// URLs or ioredis clients, one per master');
  }
  // The engine checks the Redlock settings, the connection timeouts, unknown option names and
  // the number of masters (the core's rules, src/convert.rs).
  const engine = new wasm.RedlockEngine(targets.length, options, SHAPES);
  const opts = options || {};
  const masters = [];
  try {
    const seen = new Set();
    for (const target of targets) {
      let identity;
      let master;
      let url;
      if (typeof target === 'string') {
        url = checkUrl(target);
        identity = endpointOf(url).identity; // the core's host:port/db
      } else if (isIoredis(target) && target.isCluster !== true) {
        identity = clientIdentity(target);
      } else {
        throw invalid('each Redlock master must be a redis:// or rediss:// URL or an ioredis client (not a Cluster)');
      }
      if (seen.has(identity) || (typeof target !== 'string' && masters.some((m) => m.redis === target))) {
        throw invalid(`master ${labelOf(identity)} is listed twice; Redlock needs independent masters`);
      }
      seen.add(identity);
      if (url !== undefined) {
        master = ownMaster(url, opts);
        master.label = labelOf(identity);
        master.url = url.href;
      } else {
        master = new Master(target, false, labelOf(identity));
        master.onReady = () => master.preload();
      }
      masters.push(master);
    }
  } catch (err) {
    engine.free();
    throw err;
  }
  // Only once every target is valid: nothing is opened for a call that throws.
  const connects = masters.filter((m) => m.owned).map((m) => firstConnect(m, m.url, opts));
  const results = await Promise.allSettled(connects);
  const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
  const refused = failures.find((e) => e && e.code === 'AUTHENTICATION');
  const noneUp = connects.length > 0 && failures.length === masters.length;
  if (refused || noneUp) {
    for (const m of masters) if (m.owned) m.redis.disconnect();
    engine.free();
    if (refused) throw refused;
    const first = failures[0];
    throw makeError('CONNECTION', `no master is reachable: ${first && first.message}`);
  }
  for (const m of masters) {
    if (m.owned) continue;
    m.preload();
    m.redis.on('ready', m.onReady);
  }
  return new Redlock(INTERNAL, new RedlockDriver(engine, masters));
}

// ---- the public classes ----

/** Each Redlock's driver, kept out of sight of users and of util.inspect. */
const drivers = new WeakMap();

/**
 * A Redlock deployment: N independent masters, a lock held while a majority grants it. Grants
 * carry no fencing token (PROTOCOL.md §8): use the mutex of `connect()` where the protected
 * resource needs one.
 */
class Redlock {
  constructor(token, driver) {
    if (token !== INTERNAL) throw new TypeError('use lockgate.connectRedlock() to create a Redlock');
    drivers.set(this, driver);
  }

  /**
   * A lock named `name` on every master; the name and options are validated here, the lease
   * against `maxLeaseMs` too (without `leaseMs`: 30 s, or `maxLeaseMs` if shorter).
   * @param {string} name
   * @param {object} [options] `{ leaseMs, autoRenew, waitTimeoutMs }`
   * @returns {RedlockLock}
   */
  lock(name, options) {
    drivers.get(this).ensureOpen();
    return new RedlockLock(INTERNAL, this, new wasm.RedlockSpec(name, options, drivers.get(this).engine));
  }

  /** How many masters there are. */
  get masters() {
    return drivers.get(this).masters.length;
  }

  /** How many masters must grant a lock: `masters / 2 + 1` (rounded down). */
  get quorum() {
    return drivers.get(this).engine.quorum;
  }

  /** Whether close() was called. */
  get closed() {
    return drivers.get(this).closed;
  }

  /**
   * Releases every lease, cancels every pending acquire, closes the connections this Redlock
   * opened (ioredis clients passed in stay open).
   */
  close() {
    return drivers.get(this).close();
  }
}

/** A handle on one named Redlock; holding it is a RedlockLease. */
class RedlockLock {
  #redlock;
  #spec;
  /** The leases granted through this handle (it never waits for itself). */
  #leases = new HandleLeases();

  constructor(token, redlock, spec) {
    if (token !== INTERNAL) throw new TypeError('use redlock.lock() to create a RedlockLock');
    this.#redlock = redlock;
    this.#spec = spec;
  }

  /** The Redlock this lock was made from. */
  get redlock() {
    return this.#redlock;
  }

  /** The lock's name. */
  get name() {
    return this.#spec.name;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs }`. */
  get options() {
    const s = this.#spec;
    return { leaseMs: s.leaseMs, autoRenew: s.autoRenew, waitTimeoutMs: s.waitTimeoutMs };
  }

  /** What this handle acquires (for messages): always `redlock`. */
  get kind() {
    return 'redlock';
  }

  /**
   * The most recent RedlockLease acquired through this handle that is still held, or null; the
   * handle keeps it reachable (see Lock.lease).
   */
  get lease() {
    return this.#leases.current();
  }

  /**
   * Tries until a majority grants it (attempts are retried after a jittered pause) and resolves
   * with a RedlockLease. Rejects with TimeoutError after `timeoutMs` (default: the lock's
   * `waitTimeoutMs`, else no limit; `0`: one attempt) and with CancelledError when `signal`
   * aborts; whatever an attempt set on the masters is removed either way. Rejects at once with
   * AlreadyHeldError while this handle holds the lock.
   */
  async acquire(options) {
    const driver = drivers.get(this.#redlock);
    const signal = checkSignal(options);
    this.#leases.check(this);
    const ev = await this.#leases.waiting(this, signal, (s) => driver.acquire(this.#spec, options, false, s));
    return this.#granted(driver, acquiredOrTimeout(ev));
  }

  /**
   * One attempt: a RedlockLease, or null if the lock is held. Rejects with a (retryable)
   * ConnectionError when too few masters could vote, and with AlreadyHeldError while this
   * handle holds the lock.
   */
  async tryAcquire() {
    const driver = drivers.get(this.#redlock);
    this.#leases.check(this);
    const ev = await driver.acquire(this.#spec, undefined, true, undefined);
    return ev.kind === 'acquired' ? this.#granted(driver, ev) : null;
  }

  #granted(driver, ev) {
    const lease = new RedlockLease(INTERNAL, this, driver, ev);
    const refused = this.#leases.add(lease, this, true);
    if (refused) {
      // Another acquire through this handle won first (e.g. two tryAcquire() at once).
      lease.release().catch(() => {});
      throw refused;
    }
    return lease;
  }

  /**
   * Acquires, runs `fn(lease)`, releases even if `fn` throws. Resolves with `fn`'s result only if
   * a majority still held the lock when `fn` finished; otherwise rejects with NotHeldError.
   */
  async using(fn, options) {
    return usingLease(this, fn, options, 'Redlock');
  }
}

/**
 * Proof that a majority of masters holds the lock for us. No fencing token: a majority of
 * independent masters is not a linearizable counter, so any token read from it could go
 * backwards (PROTOCOL.md §8). Finish the protected work within `remainingMs`.
 */
class RedlockLease extends HeldLease {
  constructor(token, lock, driver, ev) {
    if (token !== INTERNAL) throw new TypeError('leases come from redlockLock.acquire()');
    super(lock, driver, ev);
  }

  // Inherited: `signal` aborts, with a NotHeldError reason, when the lease is lost (a majority
  // refused a renewal or its validity ran out), or with a ClosedError when `redlock.close()`
  // released it; never on `release()`. `isHeld` and `remainingMs` are the validity left (drift
  // deducted). `release()` resolves true if a majority still held it, false if not (or on a
  // second call), and rejects with a ConnectionError if too few masters confirmed (the others
  // keep the key until its lease ends). `extend(ms)` sets the remaining lease on every master
  // still holding it (at most the deployment's `maxLeaseMs`); it needs a majority and never
  // re-acquires: NotHeldError (and the lease is lost) if a majority lost it.
}

disposable(Redlock, closeOnDispose);

module.exports = { connectRedlock, Redlock, RedlockLock, RedlockLease };
