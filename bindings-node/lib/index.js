'use strict';
// lockgate for Node.js: Client -> Lock -> Lease, for every backend, over the core engine
// (WebAssembly) and one transport per backend (lib/transport/<name>.js) that does the I/O.
// The public API is documented in full in lib/index.d.ts; comments here say what each is for.

const wasm = require('./wasm');
const errors = require('./errors');
const { Driver, SHAPES } = require('./driver');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');

const { invalid, makeError } = errors;
// The core's default holder label is `<hostname>:<pid>`; only JS can ask for them here.
wasm.setProcessIdentity(os.hostname(), process.pid);
const INTERNAL = Symbol('lockgate.internal');
/** A Lock's method that frees the place of a lease released through it (the core's `Handle::free`). */
const FREE = Symbol('lockgate.free');
/** A handle's getter of `spec.info` (read once: the spec lives in WebAssembly), for its subclasses. */
const INFO = Symbol('lockgate.info');

/** The transport modules that take a caller's own connection: they export `describe` (what it stands for) and `GIVEN` (what they take). */
const takers = () =>
  fs.readdirSync(path.join(__dirname, 'transport')).filter((f) => f.endsWith('.js')).map((f) => require(`./transport/${f}`)).filter((t) => t.describe);

/**
 * Connects to the backend the URL's scheme picks (or to a caller's own connection that a
 * transport takes, left open by `close()`) and returns a Client.
 */
async function connect(target, options) {
  const given = typeof target === 'string' ? undefined : target;
  let transport;
  let described;
  if (given !== undefined) {
    transport = takers().find((t) => (described = t.describe(given, options)) !== undefined);
    if (transport === undefined) throw invalid(`connect() takes a URL, ${takers().map((t) => t.GIVEN).join(', ')}`);
  }
  // The core parses the URL, checks and defaults every option and builds the backend's engine.
  const engine = wasm.Engine.connect(given === undefined ? target : undefined, options, described, SHAPES);
  const plan = engine.plan;
  const driver = new Driver(engine);
  try {
    if (transport === undefined) transport = require(`./transport/${plan.transport}`);
    driver.transport = await transport.open(driver, plan, given, options || {});
  } catch (err) {
    engine.free();
    throw err;
  }
  return new Client(INTERNAL, driver, engine.capabilities, engine.url);
}

/** Each client's driver, kept out of sight of users and of util.inspect. */
const drivers = new WeakMap();

/** A client of one lock service (a Redis server, a Redis Cluster, a Redlock deployment, a ZooKeeper ensemble). */
class Client {
  #capabilities;
  #url;

  constructor(token, driver, capabilities, url) {
    if (token !== INTERNAL) throw new TypeError('use lockgate.connect() to create a Client');
    drivers.set(this, driver);
    this.#capabilities = Object.freeze(capabilities);
    this.#url = url === undefined ? null : url;
  }

  /** The URL with passwords replaced by `***` (the core's redaction); null for a caller's own ioredis connection(s). */
  get url() {
    return this.#url;
  }

  /** `Client(<redacted URL>)`, as Python's and Java's clients show themselves. */
  toString() {
    return `Client(${this.#url === null ? 'a caller-provided ioredis connection' : this.#url})`;
  }

  /** What console.log and util.inspect show: the same as toString(). */
  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }

  /** What this client's backend offers (the core's Capabilities); what it lacks is UnsupportedError. */
  get capabilities() {
    return this.#capabilities;
  }

  /** A mutex named `name` (`{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, reentrant }`), validated here. */
  lock(name, options) {
    const driver = open(this);
    return new Lock(INTERNAL, this, wasm.LockSpec.make(driver.engine, 'mutex', name, options));
  }

  /** A counting semaphore named `name` with `permits` permits (each Lease is one permit). */
  semaphore(name, permits, options) {
    const driver = open(this);
    return new Semaphore(INTERNAL, this, wasm.LockSpec.make(driver.engine, 'semaphore', name, options, permits));
  }

  /** A read-write lock named `name`: many holders of `.readLock` or one of `.writeLock`. */
  readWriteLock(name, options) {
    const { engine } = open(this);
    const read = wasm.LockSpec.make(engine, 'read', name, options);
    return new ReadWriteLock(INTERNAL, this, read, wasm.LockSpec.make(engine, 'write', name, options));
  }

  /** A leader election named `name` (`leaseMs` bounds how long a crashed leader keeps leading). */
  election(name, options) {
    const driver = open(this);
    return new Election(INTERNAL, this, wasm.LockSpec.make(driver.engine, 'election', name, options));
  }

  /**
   * Reads lock `name` as `kind` ('mutex', 'rw', 'semaphore', 'election') on the server, changing
   * nothing: `{ kind, locked, holders, waiters, permits, remainingMs }` (see index.d.ts). An
   * unknown name is empty. For humans and dashboards; to decide whether to write, use the fencing token.
   */
  async inspect(name, kind = 'mutex') {
    return (await open(this).read((e, t) => e.inspect(t, name, kind))).data;
  }

  /**
   * Breaks lock `name` (PROTOCOL.md §15): removes its current holder's entry — only the one whose
   * fencing token is `options.token` when given, so a stale break cannot hit the next holder — and
   * wakes the next waiter as a release would. Resolves with what it removed, `{ label, fencingToken }`,
   * or `null` when nothing was. `options.kind` ('mutex', 'rw', 'semaphore', 'election'; default
   * 'mutex'). For a holder known to be dead: the broken holder learns of its loss at its next
   * renewal, and only fenced storage stops its late writes. A token on Redlock or memcached (no
   * fencing tokens) rejects with UnsupportedError.
   */
  async breakLock(name, options = {}) {
    const { token, kind = 'mutex' } = options ?? {};
    return (await open(this).read((e, t) => e.breakLock(t, name, kind, token))).data;
  }

  /**
   * One page of the locks whose names start with `prefix` (every lock if empty): `{ entries,
   * cursor }`, each entry `{ name, kind, holders, waiters, label }` (a lock someone holds or waits
   * on), `cursor` the next page's (`null`: this was the last; a page may be short, even empty,
   * before it). `limit` defaults to 100 and is capped to 1,000. Never blocks the server; racy,
   * like inspect. `UnsupportedError` where the backend cannot list (memcached).
   */
  async listLocks({ prefix = '', limit, cursor } = {}) {
    return (await open(this).read((e, t) => e.list(t, prefix, limit, cursor))).data;
  }

  /**
   * Adopts the lease `identity` names (`lease.identity()` of another process, PROTOCOL.md §17):
   * resolves with a Lease of this client on the same hold, with the same fencing token — no second
   * grant — that renews (`{ leaseMs, autoRenew }` as for lock()), extends, releases and signals its
   * loss. NotHeldError if it is no longer current; InvalidArgumentError for a malformed identity
   * (nothing is sent); UnsupportedError on ZooKeeper and etcd. redis-py's `Lock(token=...)`.
   */
  async adopt(identity, options) {
    const driver = open(this);
    const spec = wasm.LockSpec.adopted(driver.engine, identity, options);
    const lock = new Lock(INTERNAL, this, spec);
    return new Lease(INTERNAL, lock, driver, await driver.adopt(identity, spec));
  }

  /** Whether close() was called. */
  get closed() {
    return drivers.get(this).closed;
  }

  /** Releases every lease, cancels every wait, closes the connections it opened; later calls: ClosedError. */
  close() {
    return drivers.get(this).close();
  }
}

/** The driver of `client`, which must not be closed. */
function open(client) {
  const driver = drivers.get(client);
  driver.ensureOpen();
  return driver;
}

/** The `signal` of `{ timeoutMs?, signal? }`, checked to be an AbortSignal. */
function checkSignal(options) {
  const signal = options == null ? undefined : options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalid('signal must be an AbortSignal');
  return signal;
}

/**
 * The `acquired` event of an acquire that waited; `timeoutMs: 0` is a single attempt, and
 * finding the lock held is then a timeout (as natively).
 */
function acquiredOrTimeout(ev) {
  if (ev.kind !== 'acquired') throw makeError('TIMEOUT', 'the lock is held (timeout was zero)');
  return ev;
}

/** What a Lock, ReadWriteLock or Election shows of the spec it was made with: its client, name and effective options. */
class Handle {
  #client;
  #info;

  constructor(client, info) {
    this.#client = client;
    this.#info = info;
  }

  /** The client this was made from. */
  get client() {
    return this.#client;
  }

  get [INFO]() {
    return this.#info;
  }

  /** The lock's (or election's) name. */
  get name() {
    return this.#info.name;
  }

  /** The effective options: `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs }` (no `entryTtlMs` where waiters do not queue: Redlock). */
  get options() {
    return { ...this.#info.options };
  }
}

/** A handle on a named lock (a mutex, a semaphore permit, a read-write half, leadership); holding it is a Lease. */
class Lock extends Handle {
  #spec;
  #election;
  /** The leases acquired through this handle, kept reachable (`lock.lease`) when the caller dropped them. */
  #leases = [];

  constructor(token, client, spec, election) {
    if (token !== INTERNAL) throw new TypeError('use client.lock() to create a Lock');
    super(client, spec.info);
    this.#spec = spec;
    this.#election = election;
  }

  /** What this handle acquires: `mutex`, `semaphore`, `read`, `write` or `leader`. */
  get kind() {
    return this[INFO].kind;
  }

  /** Whether acquiring again while this handle holds the lock re-enters its lease. */
  get reentrant() {
    return this[INFO].reentrant;
  }

  /** The most recent Lease acquired through this handle that is still held (kept reachable here), or null. */
  get lease() {
    this.#leases = this.#leases.filter((l) => l.isHeld);
    return this.#leases.at(-1) ?? null;
  }

  /** Reads this lock on the server (a semaphore handle reads the semaphore, a half the whole read-write lock); see Client.inspect. */
  async inspect() {
    return (await open(this.client).read((e, t) => e.inspectLock(t, this.#spec))).data;
  }

  /** Whether anyone holds this lock now, asking the server (Redisson's isLocked; racy: for humans and dashboards). */
  async isLocked() {
    return (await this.inspect()).locked;
  }

  /**
   * Waits for the lock (`{ timeoutMs, signal }`) and resolves with a Lease. Which acquire a handle
   * may make is the core's rule (`Handle::acquire`): a reentrant handle re-enters its own lease; a
   * non-reentrant one that holds a live lease is AlreadyHeldError at once, and its other waits end
   * so once one of them wins.
   */
  async acquire(options) {
    const driver = drivers.get(this.client);
    const ev = await driver.acquire(this.#spec, options, false, checkSignal(options));
    return this.#granted(driver, acquiredOrTimeout(ev));
  }

  /** One attempt: a Lease, or null if the lock is held (or others queue for it). */
  async tryAcquire() {
    const driver = drivers.get(this.client);
    const ev = await driver.acquire(this.#spec, undefined, true, undefined);
    return ev.kind === 'acquired' ? this.#granted(driver, ev) : null;
  }

  /** Acquires, runs `fn(lease)`, releases even if it throws; NotHeldError if the lease was lost meanwhile. */
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
    // The core's rule: a lease lost before the scope ended is NotHeldError.
    const wasHeld = await lease.release();
    wasm.leaveScope(this.name, lease.fencingToken ?? undefined, wasHeld, false, wasHeld ? undefined : lease.signal.reason?.message);
    return result;
  }

  /** Frees the handle's place of `lease`, released through it (the core's holding). */
  [FREE](lease) {
    this.#spec.free(lease);
  }

  #granted(driver, ev) {
    const lease =
      this.#election !== undefined
        ? new Leadership(INTERNAL, this, driver, ev, this.#election, this[INFO].value)
        : new Lease(INTERNAL, this, driver, ev);
    this.#leases.push(lease);
    return lease;
  }
}

/** A counting semaphore: `acquire()` takes one of `permits` permits as a Lease. */
class Semaphore extends Lock {
  /** How many holders may hold a permit at once. */
  get permits() {
    return this[INFO].permits;
  }
}

/** A read-write lock: two Lock handles on one name, `readLock` (shared) and `writeLock`. */
class ReadWriteLock extends Handle {
  #read;
  #write;

  constructor(token, client, readSpec, writeSpec) {
    if (token !== INTERNAL) throw new TypeError('use client.readWriteLock() to create a ReadWriteLock');
    super(client, readSpec.info);
    this.#read = new Lock(INTERNAL, client, readSpec);
    this.#write = new Lock(INTERNAL, client, writeSpec);
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
    return this[INFO].writersFirst;
  }

  /** Whether both halves are reentrant. */
  get reentrant() {
    return this.#read.reentrant;
  }

  /** Reads the read-write lock: its readers and writer, and its waiters in queue order. */
  async inspect() {
    return this.#write.inspect();
  }
}

/** A leader election: candidates campaign, the leader resigns by releasing, anyone can observe. */
class Election extends Handle {
  #spec;

  constructor(token, client, spec) {
    if (token !== INTERNAL) throw new TypeError('use client.election() to create an Election');
    super(client, spec.info);
    this.#spec = spec;
  }

  /** Waits to become leader publishing `value`; resolves with the Leadership (its token is the term). */
  async campaign(value, options) {
    return this.candidate(value).acquire(options);
  }

  /** One attempt to become leader: the Leadership, or null if someone leads (or queues). */
  async tryCampaign(value) {
    return this.candidate(value).tryAcquire();
  }

  /** A candidate publishing `value` (checked here): a Lock whose acquisitions campaign. */
  candidate(value) {
    open(this.client);
    return new Candidate(INTERNAL, this.client, this.#spec.campaign(value), this);
  }

  /** Reads the election: the leader (a holder with its published `value`) and the other candidates in queue order. */
  async inspect() {
    return this.client.inspect(this.name, 'election');
  }

  /** The current leader as `{ value, term, remainingMs }`, or null if nobody leads. */
  async observe() {
    const ev = await open(this.client).read((e, t) => e.observe(t, this.name));
    return ev.data === null ? null : { value: ev.data.value, term: ev.fencingToken, remainingMs: ev.data.remainingMs };
  }
}

/** A candidate of an election: a Lock (kind `leader`) whose leases are Leadership. */
class Candidate extends Lock {
  #election;

  constructor(token, client, spec, election) {
    super(token, client, spec, election);
    this.#election = election;
  }

  /** The election this candidate campaigns in. */
  get election() {
    return this.#election;
  }

  /** The value it publishes while it leads. */
  get value() {
    return this[INFO].value;
  }
}

/** Installs `dispose` as `[Symbol.asyncDispose]` of `cls` where the runtime has the symbol. */
function disposable(cls, dispose) {
  if (typeof Symbol.asyncDispose === 'symbol') cls.prototype[Symbol.asyncDispose] = dispose;
}

/** Proof of holding a lock: fencing token, loss and at-risk signals, release, extend (a re-entered lease gives back one hold). */
class Lease {
  #lock;
  #driver;
  #id;
  #signals;
  #released = false;

  constructor(token, lock, driver, ev) {
    if (token !== INTERNAL) throw new TypeError('leases come from lock.acquire()');
    this.#lock = lock;
    this.#driver = driver;
    this.#id = ev.lease;
    this.#signals = driver.signals(ev.lease);
    /**
     * Strictly greater than every token issued before for this lock name (a bigint); null where
     * the backend cannot give one (Redlock: a majority of independent masters is no counter).
     */
    this.fencingToken = ev.fencingToken ?? null;
  }

  /** Aborts when the lease is lost (NotHeldError) or close() released it (ClosedError); never on release(). */
  get signal() {
    return this.#signals.signal;
  }

  /** Whether the lease is held but cannot be confirmed now: valid for `remainingMs` unless contact returns. */
  get atRisk() {
    return this.isHeld && this.#signals.atRisk;
  }

  /** Calls `callback()` at the start of every spell at risk (at once if at risk now) until the lease ends. */
  onAtRisk(callback) {
    if (typeof callback !== 'function') throw invalid('onAtRisk needs a function taking no arguments');
    if (!this.#released) this.#signals.onAtRisk(callback);
  }

  /** The lock this lease holds. */
  get lock() {
    return this.#lock;
  }

  /** Whether the lease is held now, by this client's knowledge (false once released). */
  get isHeld() {
    return !this.#released && this.#driver.isHeld(this.#id);
  }

  /** Milliseconds the lease is certainly still valid (0 if not held). */
  get remainingMs() {
    return this.#released ? 0 : this.#driver.remainingMs(this.#id);
  }

  /** Releases the lock if this lease still holds it; false if it had already ended (or was released). */
  async release() {
    if (this.#released) return false;
    const done = this.#driver.release(this.#id);
    this.#released = true;
    this.#lock[FREE](this.#id);
    return (await done).wasHeld;
  }

  /**
   * This lease's identity as one opaque string, for another process to `client.adopt()`: it then
   * renews, extends and releases the same hold. Whoever has it can release the lock: never log it.
   * NotHeldError if the lease is no longer held; UnsupportedError for leadership and on ZooKeeper and etcd.
   */
  identity() {
    if (this.#released) throw makeError('NOT_HELD', 'the lease was released');
    return this.#driver.identity(this.#id);
  }

  /** Sets the remaining lease to `ms` if still held; never re-acquires (NotHeldError). */
  async extend(ms) {
    if (this.#released) throw makeError('NOT_HELD', 'the lease was released');
    await this.#driver.extend(this.#id, ms);
  }

  static {
    // Releases the lease unless its client was closed (which released it already).
    disposable(Lease, async function dispose() {
      if (!this.#driver.closed) await this.release();
    });
  }
}

/** Leadership of an election: a Lease whose fencing token is the term; `release()` resigns. */
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

disposable(Client, function dispose() {
  return this.close();
});

module.exports = {
  connect,
  Client,
  Lock,
  Semaphore,
  ReadWriteLock,
  Election,
  Candidate,
  Lease,
  Leadership,
  telemetryChannels: require('./telemetry').CHANNELS,
  instrumentOpenTelemetry: require('./telemetry').instrument,
  uninstrumentOpenTelemetry: require('./telemetry').uninstrument,
  ...errors.ERROR_EXPORTS,
};
