'use strict';
// lockgate for Node.js: Client -> Lock -> Lease, over the core engine (WebAssembly) and ioredis.

const Redis = require('ioredis');
const wasm = require('./wasm');
const errors = require('./errors');
const { Driver, SHAPES } = require('./driver');
const {
  checkUrl,
  clientSettings,
  endpointOf,
  isIoredis,
  redact,
  urlCommandTimeout,
  urlConnectTimeout,
} = require('./targets');
const { wireEligible } = require('./wire');
const { loginOptions, serverOptions } = require('./login');
const { HandleLeases, HeldLease, acquiredOrTimeout, checkSignal, closeOnDispose, disposable, usingLease } = require('./lease');
const redlock = require('./redlock');

const { invalid, makeError } = errors;
const INTERNAL = Symbol('lockgate.internal');

/**
 * Connects to Redis and returns a Client. `target` is a `redis://` / `rediss://` URL (the
 * client then owns one command connection, plus one subscriber connection opened on the first
 * waiting acquire; with `cluster: true` the URL is one seed node of a Redis Cluster and the
 * client owns an ioredis `Cluster`), or an existing ioredis client or `Cluster` (left open by
 * `close()`; the subscriber connection is made with `duplicate()`, for a Cluster from one of its
 * nodes).
 */
async function connect(target, options) {
  const url = typeof target === 'string' ? checkUrl(target) : undefined;
  if (url === undefined && !isIoredis(target)) {
    throw invalid('connect() takes a redis:// or rediss:// URL, an ioredis client or an ioredis Cluster');
  }
  // The core checks and defaults every option (src/connect.rs); the rest is plumbing.
  const settings = clientSettings(target, options);
  const opts = options || {};
  const cluster = settings.cluster;
  // On a cluster every script call is its own request (a pipeline cannot span slots), so a
  // node that fails fails only the calls routed to it.
  const engine = new wasm.Engine(settings.keyPrefix, SHAPES, settings.replicaAcks, cluster);
  if (url !== undefined && !cluster && wireEligible(opts)) {
    const driver = new Driver(engine, {
      url,
      options: opts,
      makeSubscriber: () => ownSubscriber(url, opts),
    });
    try {
      await driver.wire.open();
    } catch (err) {
      engine.free();
      throw connectError(err, url.href);
    }
    return new Client(INTERNAL, driver);
  }
  let redis;
  let owns;
  if (url !== undefined) {
    try {
      const own = cluster ? ownCluster(url, opts) : ownConnection(url, opts);
      redis = own.redis;
      owns = true;
      await connectOwn(own, url.href, opts);
    } catch (err) {
      engine.free();
      throw err;
    }
  } else {
    redis = target;
    owns = false;
  }
  return new Client(INTERNAL, new Driver(engine, { redis, owns }));
}

/**
 * An ioredis Cluster for a seed URL this package owns. Like ownConnection(), it neither
 * reconnects nor times commands out until the first connection is ready (connectOwn).
 */
function ownCluster(url, opts) {
  const ro = opts.redisOptions || {};
  const state = { connected: false, cluster: true, commandTimeout: urlCommandTimeout(opts) };
  const nodeOptions = {
    maxRetriesPerRequest: 2,
    ...loginOptions(url, ro),
    connectTimeout: urlConnectTimeout(opts),
    commandTimeout: undefined,
  };
  const { host, port } = endpointOf(url);
  const redis = new Redis.Cluster([{ host, port }], {
    redisOptions: nodeOptions,
    lazyConnect: true,
    clusterRetryStrategy: (times) => (state.connected ? Math.min(100 + times * 2, 2000) : null),
  });
  return { redis, state };
}

/**
 * An ioredis client for a checked URL this package owns. It does not reconnect or time commands
 * out until the first connection is ready (connectOwn), so a failed connect leaves no timer
 * behind (ioredis keeps a command timer and a reconnect timer alive past a failed first
 * attempt). It logs in without ioredis knowing the password (lib/login.js).
 */
function ownConnection(url, opts) {
  const ro = opts.redisOptions || {};
  const userRetry = ro.retryStrategy;
  const state = { connected: false, commandTimeout: urlCommandTimeout(opts) };
  const redis = new Redis({
    maxRetriesPerRequest: 2,
    ...serverOptions(url, ro),
    connectTimeout: urlConnectTimeout(opts),
    lazyConnect: true,
    commandTimeout: undefined,
    retryStrategy: (times) => {
      if (!state.connected) return null;
      return userRetry ? userRetry(times) : Math.min(times * 50, 2000);
    },
  });
  return { redis, state };
}

/**
 * The subscriber connection of a client whose commands use the lean connection: made like
 * ownConnection() (it is what `duplicate()` of that would give), but reconnecting from the start.
 */
function ownSubscriber(url, opts) {
  const own = ownConnection(url, opts);
  markConnected(own);
  return own.redis;
}

/** A failed first connection as a ConnectionError or AuthenticationError naming the URL (without its password). */
function connectError(cause, url) {
  const e = wasm.clientError(cause);
  e.message = `${e.message} (connecting to ${redact(url)})`;
  return e;
}

/** Connects an ownConnection(); a failure becomes a ConnectionError or AuthenticationError. */
async function connectOwn({ redis, state }, url, opts) {
  // While connecting, the emitted error (e.g. a refused AUTH) says more than connect()'s own
  // "Connection is closed."; afterwards failures surface as rejected operations.
  let lastError;
  redis.on('error', (err) => {
    lastError = err;
  });
  const limitMs = urlConnectTimeout(opts) + state.commandTimeout;
  let timer;
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no ready connection within ${limitMs} ms`)),
          limitMs,
        );
      }),
    ]);
  } catch (err) {
    if (redis.status !== 'end') redis.disconnect();
    // A Cluster reports "Failed to refresh slots cache." and keeps the node's own error aside.
    const cause = lastError && lastError.lastNodeError ? lastError.lastNodeError : lastError;
    throw connectError(cause ?? err, url);
  } finally {
    clearTimeout(timer);
  }
  markConnected({ redis, state });
}

/** From now on an ownConnection() or ownCluster() reconnects and times its commands out. */
function markConnected({ redis, state }) {
  state.connected = true;
  if (state.cluster) {
    // Nodes connected later copy redisOptions; the ones already open get it directly.
    redis.options.redisOptions.commandTimeout = state.commandTimeout;
    for (const node of redis.nodes('all')) node.options.commandTimeout = state.commandTimeout;
  } else {
    redis.options.commandTimeout = state.commandTimeout;
  }
}

/** Each client's driver, kept out of sight of users and of util.inspect. */
const drivers = new WeakMap();

/** A connection to one Redis server, shared by every lock made from it. */
class Client {
  constructor(token, driver) {
    if (token !== INTERNAL) throw new TypeError('use lockgate.connect() to create a Client');
    drivers.set(this, driver);
  }

  /**
   * A mutex named `name`; the name and options are validated here. With `reentrant: true`,
   * acquiring it again through this handle while it holds the lock re-enters the same lease (same
   * fencing token, one more hold); only the last release frees it.
   * @param {string} name
   * @param {object} [options] `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, reentrant }`
   * @returns {Lock}
   */
  lock(name, options) {
    drivers.get(this).ensureOpen();
    return new Lock(INTERNAL, this, new wasm.LockSpec(name, options));
  }

  /**
   * A counting semaphore named `name` with `permits` permits: each acquisition takes one permit
   * as a Lease, which returns by itself within one lease if its holder dies. Every client of one
   * name must use the same `permits`.
   * @param {string} name
   * @param {number} permits a whole number from 1 to 1000000
   * @param {object} [options] `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`
   * @returns {Semaphore}
   */
  semaphore(name, permits, options) {
    drivers.get(this).ensureOpen();
    return new Semaphore(INTERNAL, this, wasm.LockSpec.semaphore(name, permits, options));
  }

  /**
   * A read-write lock named `name`: many holders of `.readLock` or one of `.writeLock`. By
   * default a queued writer blocks readers that arrive after it (`writersFirst: false` lets
   * readers join current readers past queued writers).
   * @param {string} name
   * @param {object} [options] `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, reentrant, writersFirst }`
   * @returns {ReadWriteLock}
   */
  readWriteLock(name, options) {
    drivers.get(this).ensureOpen();
    const read = wasm.LockSpec.readWrite(name, options, false);
    const write = wasm.LockSpec.readWrite(name, options, true);
    return new ReadWriteLock(INTERNAL, this, read, write);
  }

  /**
   * A leader election named `name`. `leaseMs` bounds how long a crashed leader keeps
   * leadership; the watchdog renews it while the leader lives.
   * @param {string} name
   * @param {object} [options] `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`
   * @returns {Election}
   */
  election(name, options) {
    drivers.get(this).ensureOpen();
    return new Election(INTERNAL, this, wasm.LockSpec.election(name, options));
  }

  /** Whether close() was called. */
  get closed() {
    return drivers.get(this).closed;
  }

  /**
   * Releases every lease, cancels every pending acquire, and closes the connections this client
   * opened. Later calls on the client and its locks and leases fail with ClosedError.
   */
  close() {
    return drivers.get(this).close();
  }
}

function baseOptions(spec) {
  return {
    leaseMs: spec.leaseMs,
    autoRenew: spec.autoRenew,
    waitTimeoutMs: spec.waitTimeoutMs,
    entryTtlMs: spec.entryTtlMs,
  };
}

/**
 * A handle on a named lock: a mutex (`client.lock`), a semaphore permit (`client.semaphore`),
 * one half of a read-write lock, or (inside `election.campaign`) leadership. Holding it is a
 * Lease, owned by the object that holds it, never by a call stack.
 */
class Lock {
  #client;
  #spec;
  #election;
  /** The lease id this reentrant handle holds (or last held). */
  #current = undefined;
  /** `spec.reentrant`, read once: every acquire asks, and the spec lives in WebAssembly. */
  #reentrant;
  /** The leases granted through this handle (a non-reentrant handle never waits for itself). */
  #leases = new HandleLeases();

  constructor(token, client, spec, election) {
    if (token !== INTERNAL) throw new TypeError('use client.lock() to create a Lock');
    this.#client = client;
    this.#spec = spec;
    this.#election = election;
    this.#reentrant = spec.reentrant;
  }

  /** The client this lock was made from. */
  get client() {
    return this.#client;
  }

  /** The lock's name. */
  get name() {
    return this.#spec.name;
  }

  /** What this handle acquires: `mutex`, `semaphore`, `read`, `write` or `leader`. */
  get kind() {
    return this.#spec.kind;
  }

  /** Whether acquiring again while this handle holds the lock re-enters its lease. */
  get reentrant() {
    return this.#reentrant;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`. */
  get options() {
    return baseOptions(this.#spec);
  }

  /**
   * The most recent Lease acquired through this handle that is still held, or null. The handle
   * keeps it reachable, so a lease whose acquire() result was dropped can still be released
   * (`lock.lease.release()`); nothing releases a lease because it became unreachable.
   */
  get lease() {
    return this.#leases.current();
  }

  /**
   * Waits for the lock and resolves with a Lease. Rejects with TimeoutError after `timeoutMs`
   * (default: the lock's `waitTimeoutMs`, else no limit) and with CancelledError when `signal`
   * aborts; either way nothing is left queued on the server. A reentrant handle that holds the
   * lock resolves at once with the same lease (one more hold); a non-reentrant one rejects at
   * once with AlreadyHeldError.
   */
  async acquire(options) {
    const driver = drivers.get(this.#client);
    const signal = checkSignal(options);
    if (this.#reentrant) {
      const entered = await this.#reenter(driver, signal);
      if (entered) return entered;
      const ev = acquiredOrTimeout(await driver.acquire(this.#spec, options, false, signal));
      return this.#granted(driver, ev);
    }
    this.#leases.check(this);
    const ev = await this.#leases.waiting(this, signal, (s) => driver.acquire(this.#spec, options, false, s));
    return this.#granted(driver, acquiredOrTimeout(ev));
  }

  /**
   * One attempt: a Lease, or null if the lock is held (or others queue for it). Through a
   * non-reentrant handle that holds the lock it rejects with AlreadyHeldError.
   */
  async tryAcquire() {
    const driver = drivers.get(this.#client);
    if (this.#reentrant) {
      const entered = await this.#reenter(driver, undefined);
      if (entered) return entered;
    } else {
      this.#leases.check(this);
    }
    const ev = await driver.acquire(this.#spec, undefined, true, undefined);
    return ev.kind === 'acquired' ? this.#granted(driver, ev) : null;
  }

  /**
   * Acquires, runs `fn(lease)`, and releases even if `fn` throws. Resolves with `fn`'s result
   * only if the lease was still held when `fn` finished; otherwise rejects with NotHeldError,
   * because the work may have overlapped another holder.
   */
  async using(fn, options) {
    return usingLease(this, fn, options, 'lease');
  }

  /** For a reentrant handle holding its lease: that lease with one more hold; else null. */
  async #reenter(driver, signal) {
    if (!this.#reentrant || this.#current === undefined) return null;
    if (signal && signal.aborted) {
      throw makeError('CANCELLED', 'the acquire was cancelled before it started');
    }
    let ev;
    try {
      ev = await driver.reacquire(this.#current);
    } catch (err) {
      if (!(err instanceof errors.NotHeldError)) throw err;
      this.#current = undefined; // released or lost: acquire afresh
      return null;
    }
    return this.#granted(driver, ev);
  }

  #granted(driver, ev) {
    if (this.#reentrant) this.#current = ev.lease;
    const lease =
      this.#election !== undefined
        ? new Leadership(INTERNAL, this, driver, ev, this.#election, this.#spec.value)
        : new Lease(INTERNAL, this, driver, ev);
    const refused = this.#leases.add(lease, this, !this.#reentrant);
    if (refused) {
      // Another acquire through this handle won first (e.g. two tryAcquire() at once).
      lease.release().catch(() => {});
      throw refused;
    }
    return lease;
  }
}

/** A counting semaphore: `acquire()` takes one of `permits` permits as a Lease. */
class Semaphore extends Lock {
  /** How many holders may hold a permit at once. */
  get permits() {
    return this.#permits;
  }

  #permits;

  constructor(token, client, spec) {
    super(token, client, spec);
    this.#permits = spec.permits;
  }
}

/** A read-write lock: two Lock handles on one name, `readLock` (shared) and `writeLock`. */
class ReadWriteLock {
  #client;
  #read;
  #write;
  #writersFirst;

  constructor(token, client, readSpec, writeSpec) {
    if (token !== INTERNAL) throw new TypeError('use client.readWriteLock() to create a ReadWriteLock');
    this.#client = client;
    this.#writersFirst = readSpec.writersFirst;
    this.#read = new Lock(INTERNAL, client, readSpec);
    this.#write = new Lock(INTERNAL, client, writeSpec);
  }

  /** The client this lock was made from. */
  get client() {
    return this.#client;
  }

  /** The lock's name. */
  get name() {
    return this.#read.name;
  }

  /** The shared half: many readers hold it at once, never beside a writer. */
  get readLock() {
    return this.#read;
  }

  /** The exclusive half; its grants carry fencing tokens larger than every earlier grant's. */
  get writeLock() {
    return this.#write;
  }

  /** Whether a queued writer blocks readers that arrive after it. */
  get writersFirst() {
    return this.#writersFirst;
  }

  /** Whether both halves are reentrant. */
  get reentrant() {
    return this.#read.reentrant;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`. */
  get options() {
    return this.#read.options;
  }
}

/**
 * A leader election: candidates `campaign()` (wait to lead), the leader resigns by releasing its
 * Leadership, and anyone can `observe()` the current leader and its term.
 */
class Election {
  #client;
  #spec;

  constructor(token, client, spec) {
    if (token !== INTERNAL) throw new TypeError('use client.election() to create an Election');
    this.#client = client;
    this.#spec = spec;
  }

  /** The client this election was made from. */
  get client() {
    return this.#client;
  }

  /** The election's name. */
  get name() {
    return this.#spec.name;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`. */
  get options() {
    return baseOptions(this.#spec);
  }

  /**
   * Waits to become leader, publishing `value` (at most 4096 bytes) to observers. Resolves with
   * the Leadership: its fencing token is the term, its signal aborts when leadership is lost,
   * and releasing it resigns. Rejects like `lock.acquire()` (TimeoutError, CancelledError).
   */
  async campaign(value, options) {
    return this.candidate(value).acquire(options);
  }

  /** One attempt to become leader: the Leadership, or null if someone leads (or queues). */
  async tryCampaign(value) {
    return this.candidate(value).tryAcquire();
  }

  /**
   * A candidate publishing `value` (validated here: at most 4096 bytes of UTF-8): a Lock whose
   * `acquire()`, `tryAcquire()` and `using()` campaign and whose leases are Leadership.
   * @param {string} value
   * @returns {Candidate}
   */
  candidate(value) {
    drivers.get(this.#client).ensureOpen();
    return new Candidate(INTERNAL, this.#client, this.#spec.campaign(value), this);
  }

  /**
   * The current leader as `{ value, term, remainingMs }` (`term` a bigint: the leader's fencing
   * token; `remainingMs` its lease left on the server), or null if nobody leads.
   */
  async observe() {
    const ev = await drivers.get(this.#client).observe(this.#spec.name);
    if (ev.value === undefined) return null;
    return { value: ev.value, term: ev.term, remainingMs: ev.remainingMs };
  }
}

/** A candidate of an election: a Lock (kind `leader`) whose leases are Leadership. */
class Candidate extends Lock {
  #election;
  #value;

  constructor(token, client, spec, election) {
    super(token, client, spec, election);
    this.#election = election;
    this.#value = spec.value;
  }

  /** The election this candidate campaigns in. */
  get election() {
    return this.#election;
  }

  /** The value it publishes while it leads. */
  get value() {
    return this.#value;
  }
}

/**
 * Proof of holding a lock: the fencing token, the loss signal, release and extend. Releasing a
 * re-entered lease gives back one hold; the last one frees the lock.
 */
class Lease extends HeldLease {
  constructor(token, lock, driver, ev) {
    if (token !== INTERNAL) throw new TypeError('leases come from lock.acquire()');
    super(lock, driver, ev);
    /** Strictly greater than every token issued before for this lock name. */
    this.fencingToken = ev.fencingToken;
  }
}

/**
 * Leadership of an election: a Lease whose fencing token is the term. Its signal aborts when
 * leadership is lost; `release()` resigns.
 */
class Leadership extends Lease {
  #election;
  #value;

  constructor(token, lock, driver, ev, election, value) {
    super(token, lock, driver, ev);
    this.#election = election;
    this.#value = value;
  }

  /** The leader's term (the same bigint as `fencingToken`), larger for every later leader. */
  get term() {
    return this.fencingToken;
  }

  /** The value this leader publishes to observers. */
  get value() {
    return this.#value;
  }

  /** The election this leadership belongs to. */
  get election() {
    return this.#election;
  }

  /** Gives up leadership (the same as `release()`). */
  resign() {
    return this.release();
  }
}

disposable(Client, closeOnDispose);

module.exports = {
  connect,
  connectRedlock: redlock.connectRedlock,
  Redlock: redlock.Redlock,
  RedlockLock: redlock.RedlockLock,
  RedlockLease: redlock.RedlockLease,
  Client,
  Lock,
  Semaphore,
  ReadWriteLock,
  Election,
  Candidate,
  Lease,
  Leadership,
  LockError: errors.LockError,
  InvalidArgumentError: errors.InvalidArgumentError,
  TimeoutError: errors.TimeoutError,
  NotHeldError: errors.NotHeldError,
  ConnectionError: errors.ConnectionError,
  AuthenticationError: errors.AuthenticationError,
  ProtocolError: errors.ProtocolError,
  CancelledError: errors.CancelledError,
  ClosedError: errors.ClosedError,
  AlreadyHeldError: errors.AlreadyHeldError,
};
