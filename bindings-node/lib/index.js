'use strict';
// lockgate for Node.js: Client -> Lock -> Lease, over the core engine (WebAssembly) and ioredis.

const Redis = require('ioredis');
const wasm = require('./wasm');
const errors = require('./errors');
const { Driver, SHAPES } = require('./driver');

const { makeError } = errors;
const INTERNAL = Symbol('lockgate.internal');

const CLIENT_OPTIONS = ['keyPrefix', 'connectTimeoutMs', 'commandTimeoutMs', 'redisOptions'];

function invalid(message) {
  return makeError('INVALID_ARGUMENT', message);
}

function checkClientOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`client options must be an object, got ${typeof options}`);
  }
  for (const key of Object.keys(options)) {
    if (!CLIENT_OPTIONS.includes(key)) {
      throw invalid(`unknown client option ${JSON.stringify(key)}; expected one of ${CLIENT_OPTIONS.join(', ')}`);
    }
  }
  for (const key of ['connectTimeoutMs', 'commandTimeoutMs']) {
    const v = options[key];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) {
      throw invalid(`${key} must be a positive number of milliseconds`);
    }
  }
  const ro = options.redisOptions;
  if (ro !== undefined && (typeof ro !== 'object' || ro === null || Array.isArray(ro))) {
    throw invalid('redisOptions must be an object of ioredis options');
  }
  return options;
}

/** The URL without its password, for messages. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<invalid URL>';
  }
}

function isIoredis(x) {
  return (
    x instanceof Redis ||
    (x !== null &&
      typeof x === 'object' &&
      typeof x.call === 'function' &&
      typeof x.pipeline === 'function' &&
      typeof x.duplicate === 'function')
  );
}

/**
 * Connects to Redis and returns a Client. `target` is a `redis://` / `rediss://` URL (the
 * client then owns one command connection, plus one subscriber connection opened on the first
 * waiting acquire), or an existing ioredis client (left open by `close()`; the subscriber
 * connection is made with `duplicate()`).
 */
async function connect(target, options) {
  const opts = checkClientOptions(options);
  const engine = new wasm.Engine(opts.keyPrefix, SHAPES);
  let redis;
  let owns;
  if (typeof target === 'string') {
    let url;
    try {
      url = new URL(target);
    } catch {
      throw invalid('the Redis URL is not a valid URL');
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw invalid(`the Redis URL must start with redis:// or rediss://, got ${url.protocol}//`);
    }
    const own = ownConnection(target, opts);
    redis = own.redis;
    owns = true;
    await connectOwn(own, target, opts);
  } else if (isIoredis(target)) {
    if (target.isCluster) {
      throw invalid('Redis Cluster clients are not supported by the Node binding yet');
    }
    redis = target;
    owns = false;
  } else {
    throw invalid('connect() takes a redis:// or rediss:// URL or an ioredis client');
  }
  return new Client(INTERNAL, new Driver(engine, redis, owns));
}

/**
 * An ioredis client for a URL this package owns. It does not reconnect or time commands out
 * until the first connection is ready (connectOwn), so a failed connect leaves no timer behind
 * (ioredis keeps a command timer and a reconnect timer alive past a failed first attempt).
 */
function ownConnection(url, opts) {
  const ro = opts.redisOptions || {};
  const userRetry = ro.retryStrategy;
  const state = { connected: false, commandTimeout: opts.commandTimeoutMs ?? ro.commandTimeout ?? 5000 };
  const redis = new Redis(url, {
    connectTimeout: opts.connectTimeoutMs ?? 5000,
    maxRetriesPerRequest: 2,
    ...ro,
    lazyConnect: true,
    commandTimeout: undefined,
    retryStrategy: (times) => {
      if (!state.connected) return null;
      return userRetry ? userRetry(times) : Math.min(times * 50, 2000);
    },
  });
  return { redis, state };
}

/** Connects an ownConnection(); a failure becomes a ConnectionError or AuthenticationError. */
async function connectOwn({ redis, state }, url, opts) {
  // While connecting, the emitted error (e.g. a refused AUTH) says more than connect()'s own
  // "Connection is closed."; afterwards failures surface as rejected operations.
  let lastError;
  redis.on('error', (err) => {
    lastError = err;
  });
  const limitMs = (opts.connectTimeoutMs ?? 5000) + state.commandTimeout;
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
    const e = wasm.clientError(lastError ?? err);
    e.message = `${e.message} (connecting to ${redact(url)})`;
    throw e;
  } finally {
    clearTimeout(timer);
  }
  state.connected = true;
  redis.options.commandTimeout = state.commandTimeout;
}

/** Each client's driver, kept out of sight of users and of util.inspect. */
const drivers = new WeakMap();

/** A connection to one Redis server, shared by every lock made from it. */
class Client {
  constructor(token, driver) {
    if (token !== INTERNAL) throw new TypeError('use lockgate.connect() to create a Client');
    drivers.set(this, driver);
  }

  /** Creates a mutex named `name`; the name and options are validated here. */
  lock(name, options) {
    drivers.get(this).ensureOpen();
    return new Lock(INTERNAL, this, new wasm.LockSpec(name, options));
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

/** A named distributed mutex. Holding it is a Lease. */
class Lock {
  #client;
  #spec;

  constructor(token, client, spec) {
    if (token !== INTERNAL) throw new TypeError('use client.lock() to create a Lock');
    this.#client = client;
    this.#spec = spec;
  }

  /** The client this lock was made from. */
  get client() {
    return this.#client;
  }

  get name() {
    return this.#spec.name;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }`. */
  get options() {
    const s = this.#spec;
    return {
      leaseMs: s.leaseMs,
      autoRenew: s.autoRenew,
      waitTimeoutMs: s.waitTimeoutMs,
      entryTtlMs: s.entryTtlMs,
    };
  }

  /**
   * Waits for the lock and resolves with a Lease. Rejects with TimeoutError after `timeoutMs`
   * (default: the lock's `waitTimeoutMs`, else no limit) and with CancelledError when `signal`
   * aborts; either way nothing is left queued on the server.
   */
  async acquire(options) {
    const driver = drivers.get(this.#client);
    const signal = options == null ? undefined : options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw invalid('signal must be an AbortSignal');
    }
    const ev = await driver.acquire(this.#spec, options, false, signal);
    if (ev.kind !== 'acquired') {
      // `timeoutMs: 0` is a single attempt; finding the lock held is a timeout (as natively).
      throw makeError('TIMEOUT', 'the lock is held (timeout was zero)');
    }
    return new Lease(INTERNAL, this, driver, ev);
  }

  /** One attempt: a Lease, or null if someone else holds the lock. */
  async tryAcquire() {
    const driver = drivers.get(this.#client);
    const ev = await driver.acquire(this.#spec, undefined, true, undefined);
    return ev.kind === 'acquired' ? new Lease(INTERNAL, this, driver, ev) : null;
  }

  /**
   * Acquires, runs `fn(lease)`, and releases even if `fn` throws. Resolves with `fn`'s result
   * only if the lease was still held when `fn` finished; otherwise rejects with NotHeldError,
   * because the work may have overlapped another holder.
   */
  async using(fn, options) {
    if (typeof fn !== 'function') throw invalid('using() takes a function');
    const lease = await this.acquire(options);
    let result;
    try {
      result = await fn(lease);
    } catch (err) {
      await lease.release().catch(() => {});
      throw err;
    }
    const wasHeld = await lease.release();
    if (!wasHeld) {
      throw makeError(
        'NOT_HELD',
        `the lease on ${JSON.stringify(this.name)} was lost before the function finished; ` +
          'its work may have overlapped another holder',
      );
    }
    return result;
  }
}

/** Proof of holding a lock: the fencing token, the loss signal, release and extend. */
class Lease {
  #lock;
  #driver;
  #id;
  #loss;

  constructor(token, lock, driver, ev) {
    if (token !== INTERNAL) throw new TypeError('leases come from lock.acquire()');
    this.#lock = lock;
    this.#driver = driver;
    this.#id = ev.lease;
    this.#loss = driver.lossSignal(ev.lease);
    /** Strictly greater than every token issued before for this lock name. */
    this.fencingToken = ev.fencingToken;
  }

  /** Aborts, with a NotHeldError reason, when the lease is lost (not on release()). */
  get signal() {
    return this.#loss.signal;
  }

  /** The lock this lease holds. */
  get lock() {
    return this.#lock;
  }

  /** Whether the lease is held now, by this client's knowledge. */
  get isHeld() {
    return this.#driver.isHeld(this.#id);
  }

  /** Milliseconds the lease is certainly still valid (0 if not held). */
  get remainingMs() {
    return this.#driver.remainingMs(this.#id);
  }

  /** Releases the lock if this lease still holds it. Resolves false if it had already ended. */
  async release() {
    const ev = await this.#driver.release(this.#id);
    return ev.wasHeld;
  }

  /** Sets the remaining lease to `ms` if still held; never re-acquires (NotHeldError). */
  async extend(ms) {
    await this.#driver.extend(this.#id, ms);
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Lease.prototype[Symbol.asyncDispose] = async function dispose() {
    if (!this.lock.client.closed) await this.release();
  };
  Client.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

module.exports = {
  connect,
  Client,
  Lock,
  Lease,
  LockError: errors.LockError,
  InvalidArgumentError: errors.InvalidArgumentError,
  TimeoutError: errors.TimeoutError,
  NotHeldError: errors.NotHeldError,
  ConnectionError: errors.ConnectionError,
  AuthenticationError: errors.AuthenticationError,
  ProtocolError: errors.ProtocolError,
  CancelledError: errors.CancelledError,
  ClosedError: errors.ClosedError,
};
