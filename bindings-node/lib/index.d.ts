// Types of the public API of `lockgate` (lib/index.js). Checked by `tsc --noEmit` on
// test/types/example.ts in `ci.sh test`.

import type { Redis, RedisOptions } from 'ioredis';

/** Stable, language-neutral error codes (the core's taxonomy; see PROTOCOL.md). */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'TIMEOUT'
  | 'NOT_HELD'
  | 'CONNECTION'
  | 'AUTHENTICATION'
  | 'PROTOCOL'
  | 'CANCELLED'
  | 'CLOSED';

/** Base class of every error lockgate raises. */
export class LockError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  /** Stable code of the category; never changes between versions. */
  readonly code: ErrorCode;
  /** Whether the same call may succeed if tried again later (TIMEOUT, CONNECTION). */
  readonly retryable: boolean;
  static readonly code: ErrorCode;
}
/** An argument was rejected before any network call. */
export class InvalidArgumentError extends LockError {
  readonly code: 'INVALID_ARGUMENT';
  static readonly code: 'INVALID_ARGUMENT';
}
/** The wait for the lock ran out. Retryable. */
export class TimeoutError extends LockError {
  readonly code: 'TIMEOUT';
  static readonly code: 'TIMEOUT';
}
/** The lease is not (or no longer) held: expired, deleted, taken over. */
export class NotHeldError extends LockError {
  readonly code: 'NOT_HELD';
  static readonly code: 'NOT_HELD';
}
/** Redis could not be reached or the connection broke. Retryable. */
export class ConnectionError extends LockError {
  readonly code: 'CONNECTION';
  static readonly code: 'CONNECTION';
}
/** The server refused the credentials. */
export class AuthenticationError extends LockError {
  readonly code: 'AUTHENTICATION';
  static readonly code: 'AUTHENTICATION';
}
/** The server replied with something the protocol does not allow. */
export class ProtocolError extends LockError {
  readonly code: 'PROTOCOL';
  static readonly code: 'PROTOCOL';
}
/** The acquire was cancelled (its AbortSignal aborted, or the client closed); `cause` is the signal's reason. */
export class CancelledError extends LockError {
  readonly code: 'CANCELLED';
  static readonly code: 'CANCELLED';
}
/** The client was closed. */
export class ClosedError extends LockError {
  readonly code: 'CLOSED';
  static readonly code: 'CLOSED';
}

export interface ClientOptions {
  /** Prepended to every key and channel (default `lockgate:`); clients sharing locks must agree. */
  keyPrefix?: string;
  /** Limit on establishing the connection (URL clients; default 5000). */
  connectTimeoutMs?: number;
  /** Limit on one command round trip before it counts as a connection failure (URL clients; default 5000). */
  commandTimeoutMs?: number;
  /** Extra ioredis options for the connections a URL client opens (e.g. `tls`). */
  redisOptions?: RedisOptions;
}

export interface LockOptions {
  /** Lease on the server in ms (default 30000). With `autoRenew` it is renewed every third of it. */
  leaseMs?: number;
  /** Renew the lease until release (default true). With false the lock frees itself after `leaseMs`. */
  autoRenew?: boolean;
  /** Default wait of `acquire()` in ms (default `Infinity`: wait until acquired or aborted). */
  waitTimeoutMs?: number;
  /** Lease of a waiter's queue entry in ms: a crashed waiter is skipped after at most this (default 10000). */
  entryTtlMs?: number;
}

export interface AcquireOptions {
  /** Give up after this many ms with a TimeoutError (`0`: one attempt; `Infinity`: no limit). */
  timeoutMs?: number;
  /** Abort the wait: the promise rejects with a CancelledError and the wait leaves the queue. */
  signal?: AbortSignal;
}

/**
 * Connects to Redis. `target` is a `redis://` / `rediss://` URL (the client owns one command
 * connection plus one subscriber connection, opened on the first waiting acquire) or an
 * existing ioredis client (left open by `close()`; its `duplicate()` becomes the subscriber).
 */
export function connect(target: string | Redis, options?: ClientOptions): Promise<Client>;

/** A connection to one Redis server, shared by every lock made from it. */
export class Client {
  private constructor();
  /** A mutex named `name`; throws InvalidArgumentError for a bad name or options. */
  lock(name: string, options?: LockOptions): Lock;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Releases every lease, cancels every wait, closes the connections this client opened. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A named distributed mutex. */
export class Lock {
  private constructor();
  readonly client: Client;
  readonly name: string;
  /** The effective options (defaults filled in). */
  readonly options: Required<LockOptions>;
  /** Waits for the lock (FIFO, woken by the release itself). */
  acquire(options?: AcquireOptions): Promise<Lease>;
  /** One attempt: the lease, or null if someone else holds the lock. */
  tryAcquire(): Promise<Lease | null>;
  /**
   * Acquires, runs `fn`, and releases even if it throws. Resolves with `fn`'s result only if the
   * lease was held until `fn` finished; otherwise rejects with NotHeldError.
   */
  using<T>(fn: (lease: Lease) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
}

/** Proof of holding a lock. */
export class Lease {
  private constructor();
  readonly lock: Lock;
  /** Strictly greater than every token issued before for this lock name; pass it to the resource you protect. */
  readonly fencingToken: bigint;
  /** Aborts (reason: NotHeldError, or ClosedError on client close) when the lease is lost; not on release(). */
  readonly signal: AbortSignal;
  /** Whether the lease is held now, by this client's knowledge. */
  readonly isHeld: boolean;
  /** Milliseconds the lease is certainly still valid (0 if not held). */
  readonly remainingMs: number;
  /** Releases the lock if still held; resolves false if the lease had already ended. */
  release(): Promise<boolean>;
  /** Sets the remaining lease to `ms` if still held; never re-acquires (rejects with NotHeldError). */
  extend(ms: number): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
