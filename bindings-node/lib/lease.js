'use strict';
// What the public handles of the mutex engine (lib/index.js: Lock, Lease) and of the Redlock
// engine (lib/redlock.js: RedlockLock, RedlockLease) do the same way: checking the `signal`
// argument, reading an acquire's outcome, `using()`, and the lease itself (loss signal, isHeld,
// remainingMs, release, extend, asyncDispose). What differs stays in the subclasses: a mutex
// lease carries a fencing token, a Redlock lease does not.

const { invalid, makeError } = require('./errors');

/** The `signal` of `{ timeoutMs?, signal? }`, checked to be an AbortSignal. */
function checkSignal(options) {
  const signal = options == null ? undefined : options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw invalid('signal must be an AbortSignal');
  }
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

/**
 * `lock.using(fn, options)`: acquires, runs `fn(lease)`, releases even if `fn` throws, and
 * resolves with `fn`'s result only if the lease was still held when `fn` finished; otherwise
 * rejects with NotHeldError (`held` names what was lost in its message).
 */
async function usingLease(lock, fn, options, held) {
  if (typeof fn !== 'function') throw invalid('using() takes a function');
  const lease = await lock.acquire(options);
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
      `the ${held} on ${JSON.stringify(lock.name)} was lost before the function finished; ` +
        'its work may have overlapped another holder',
    );
  }
  return result;
}

/** The abort reason of a wait ended because another acquire through its handle won. */
class HandleWon extends Error {}

/** The AlreadyHeldError of a non-reentrant handle `lock` that holds its lock. */
function alreadyHeld(lock) {
  const what = HELD_WHAT[lock.kind] || 'lock';
  return makeError(
    'ALREADY_HELD',
    `this handle already holds the ${what} ${JSON.stringify(lock.name)} and is not reentrant: ` +
      'acquiring again through it would wait for itself; release its lease first, or give ' +
      'each task that waits its own handle',
  );
}

/** How AlreadyHeldError names what a handle of each kind holds. */
const HELD_WHAT = {
  mutex: 'lock',
  semaphore: 'semaphore permit of',
  read: 'read lock',
  write: 'write lock',
  leader: 'leadership of',
  redlock: 'Redlock lock',
};

/**
 * The leases one non-reentrant lock handle holds, so that it never waits for itself: while one
 * of them is held, another acquire through the handle would queue behind its own lease (for a
 * mutex, forever), so it fails at once with AlreadyHeldError instead and sends nothing. Keeping
 * the leases here also keeps them reachable from the handle (`lock.lease`) even when the caller
 * dropped the one acquire() returned.
 */
class HandleLeases {
  /** @type {HeldLease[]} what acquire() granted through the handle and was not seen ended yet */
  #leases = [];

  /** Aborts of the acquires still waiting through a non-reentrant handle (see `waiting`). */
  #waits = new Set();

  /** Throws AlreadyHeldError if the handle still holds a lease (`lock`: the handle, named in the message). */
  check(lock) {
    if (this.#leases.length === 0 || this.current() === null) return;
    throw alreadyHeld(lock);
  }

  /**
   * Runs `start(signal)`, an acquire through a non-reentrant handle, so that it ends with
   * AlreadyHeldError (its wait withdrawn from the server) as soon as another acquire through the
   * same handle wins — as the core's native handles do: a handle never holds two leases, and a
   * wait it started can never be granted beside its own lease. `signal` is the caller's.
   */
  async waiting(lock, signal, start) {
    const own = new AbortController();
    const forward = () => own.abort(signal.reason);
    if (signal) {
      if (signal.aborted) own.abort(signal.reason);
      else signal.addEventListener('abort', forward, { once: true });
    }
    this.#waits.add(own);
    try {
      return await start(own.signal);
    } catch (err) {
      if (own.signal.reason instanceof HandleWon && err && err.code === 'CANCELLED') throw alreadyHeld(lock);
      throw err;
    } finally {
      this.#waits.delete(own);
      if (signal) signal.removeEventListener('abort', forward);
    }
  }

  /**
   * Records a lease granted through the handle (forgetting ended ones: a long-lived reentrant
   * handle does not pile them up). Through a non-reentrant handle (`exclusive`), a grant that
   * finds the handle already holding is refused: the caller releases it and throws what this
   * returns; otherwise the handle's other waits end with AlreadyHeldError.
   */
  add(lease, lock, exclusive) {
    if (exclusive && this.current() !== null) return alreadyHeld(lock);
    this.current();
    this.#leases.push(lease);
    if (exclusive) for (const w of this.#waits) w.abort(new HandleWon());
    return null;
  }

  /** The most recent lease the handle still holds, or null (ended ones are forgotten). */
  current() {
    if (this.#leases.length === 0) return null;
    this.#leases = this.#leases.filter((l) => l.isHeld);
    return this.#leases.length ? this.#leases[this.#leases.length - 1] : null;
  }
}

/** Installs `dispose` as `[Symbol.asyncDispose]` of `cls` where the runtime has the symbol. */
function disposable(cls, dispose) {
  if (typeof Symbol.asyncDispose === 'symbol') cls.prototype[Symbol.asyncDispose] = dispose;
}

/** `[Symbol.asyncDispose]` of a client (Client, Redlock): close it. */
function closeOnDispose() {
  return this.close();
}

/**
 * Proof of holding a lock, by the engine's knowledge: its loss signal, isHeld, remainingMs,
 * release and extend. Made only by the subclasses (Lease, RedlockLease), which check that it
 * comes from an acquire.
 */
class HeldLease {
  #lock;
  #driver;
  #id;
  #loss;
  #released = false;

  constructor(lock, driver, ev) {
    this.#lock = lock;
    this.#driver = driver;
    this.#id = ev.lease;
    this.#loss = driver.lossSignal(ev.lease);
  }

  /**
   * Aborts, with a NotHeldError reason, when the lease is lost, or with a ClosedError when the
   * client's close() released it; never on release().
   */
  get signal() {
    return this.#loss.signal;
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

  /**
   * Releases the lock if this lease still holds it. Resolves false if it had already ended (or
   * was released before).
   */
  async release() {
    if (this.#released) return false;
    const done = this.#driver.release(this.#id);
    this.#released = true;
    const ev = await done;
    return ev.wasHeld;
  }

  /** Sets the remaining lease to `ms` if still held; never re-acquires (NotHeldError). */
  async extend(ms) {
    if (this.#released) throw makeError('NOT_HELD', 'the lease was released');
    await this.#driver.extend(this.#id, ms);
  }

  static {
    // Releases the lease unless its client was closed (which released it already).
    disposable(HeldLease, async function dispose() {
      if (!this.#driver.closed) await this.release();
    });
  }
}

module.exports = { HandleLeases, HeldLease, acquiredOrTimeout, checkSignal, closeOnDispose, disposable, usingLease };
