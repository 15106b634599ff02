// Types of the public API of `lockgate` (lib/index.js). Checked by `tsc --noEmit` on
// test/types/example.ts in `ci.sh test`.

import type { Cluster, Redis, RedisOptions } from 'ioredis';

/** Stable, language-neutral error codes (the core's taxonomy; see PROTOCOL.md). */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'TIMEOUT'
  | 'NOT_HELD'
  | 'CONNECTION'
  | 'AUTHENTICATION'
  | 'PROTOCOL'
  | 'CANCELLED'
  | 'CLOSED'
  | 'ALREADY_HELD';

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

/**
 * This non-reentrant handle already holds the lock: acquiring again through it would wait for
 * itself, so the acquire fails at once and sends nothing. Not retryable.
 */
export class AlreadyHeldError extends LockError {
  readonly code: 'ALREADY_HELD';
  static readonly code: 'ALREADY_HELD';
}

/** Options every client takes. */
export interface BaseClientOptions {
  /** Prepended to every key and channel (default `lockgate:`); clients sharing locks must agree. */
  keyPrefix?: string;
  /** Limit on establishing the connection (URL clients; default 5000). */
  connectTimeoutMs?: number;
  /** Limit on one command round trip before it counts as a connection failure (URL clients; default 5000). */
  commandTimeoutMs?: number;
  /** Extra ioredis options for the connections a URL client opens (e.g. `tls`; for a cluster, every node's). */
  redisOptions?: RedisOptions;
}

/**
 * The replica-acknowledged mode (PROTOCOL.md §4): a grant, extend or renewal counts only once
 * `WAIT` confirms that `replicas` replicas have it, within `timeoutMs` (which must be below the
 * command timeout: WAIT holds the connection meanwhile). Unconfirmed grants are undone.
 */
export interface ReplicaAcks {
  /** Replicas that must acknowledge (a whole number, at least 1). */
  replicas: number;
  /** How long WAIT may block, in ms (at least 1, below the command timeout; default 1000). */
  timeoutMs?: number;
}

/** A client of one Redis server (a primary, possibly with replicas). */
export interface ServerClientOptions extends BaseClientOptions {
  /** `false` (the default): the URL is one Redis server. */
  cluster?: false;
  /** Turns on the replica-acknowledged mode (default: off). */
  replicaAcks?: ReplicaAcks | null;
}

/** A client of a Redis Cluster, connected through the URL of any one of its nodes. */
export interface ClusterClientOptions extends BaseClientOptions {
  /** `true`: the URL is one seed node of a Redis Cluster (database 0 only). */
  cluster: true;
  /** Not offered on a cluster (WAIT must reach the lock's primary): InvalidArgumentError. */
  replicaAcks?: undefined;
}

/** Options of `connect(url, options)`. */
export type ClientOptions = ServerClientOptions | ClusterClientOptions;

/** Options every kind of lock takes: the lease and the wait. */
export interface LeaseOptions {
  /** Lease on the server in ms (default 30000). With `autoRenew` it is renewed every third of it. */
  leaseMs?: number;
  /** Renew the lease until release (default true). With false the lock frees itself after `leaseMs`. */
  autoRenew?: boolean;
  /** Default wait of `acquire()` in ms (default `Infinity`: wait until acquired or aborted). */
  waitTimeoutMs?: number;
  /** Lease of a waiter's queue entry in ms: a crashed waiter is skipped after at most this (default 10000). */
  entryTtlMs?: number;
}

/** Options of `client.lock()`. */
export interface LockOptions extends LeaseOptions {
  /**
   * Acquiring again through this handle while it holds the lock resolves at once with the same
   * lease and fencing token and one more hold; only the last release frees it (default false).
   */
  reentrant?: boolean;
}

/** Options of `client.semaphore()`. */
export interface SemaphoreOptions extends LeaseOptions {}

/** Options of `client.readWriteLock()`. */
export interface ReadWriteLockOptions extends LockOptions {
  /**
   * A queued writer blocks readers that arrive after it (default true: writers never starve).
   * `false` lets readers join current readers past queued writers.
   */
  writersFirst?: boolean;
}

/** Options of `client.election()`; `leaseMs` bounds how long a crashed leader keeps leading. */
export interface ElectionOptions extends LeaseOptions {}

/** What a handle acquires. */
export type LockKind = 'mutex' | 'semaphore' | 'read' | 'write' | 'leader';

export interface AcquireOptions {
  /** Give up after this many ms with a TimeoutError (`0`: one attempt; `Infinity`: no limit). */
  timeoutMs?: number;
  /** Abort the wait: the promise rejects with a CancelledError and the wait leaves the queue. */
  signal?: AbortSignal;
}

/**
 * Connects to Redis. `target` is a `redis://` / `rediss://` URL (the client owns one command
 * connection plus one subscriber connection, opened on the first waiting acquire; with
 * `cluster: true` the URL is a seed node of a Redis Cluster and the client owns an ioredis
 * `Cluster`).
 */
export function connect(target: string, options?: ClientOptions): Promise<Client>;
/**
 * Uses an existing ioredis client (left open by `close()`; its `duplicate()` becomes the
 * subscriber connection). `connectTimeoutMs`, `commandTimeoutMs` and `redisOptions` do not apply.
 */
export function connect(target: Redis, options?: Omit<ServerClientOptions, 'cluster'>): Promise<Client>;
/**
 * Uses an existing ioredis `Cluster` (left open by `close()`): each command goes to the primary
 * owning its lock's slot, and the subscriber is a separate connection to one of its nodes.
 * `connectTimeoutMs`, `commandTimeoutMs` and `redisOptions` do not apply.
 */
export function connect(target: Cluster, options?: BaseClientOptions): Promise<Client>;

/** A connection to one Redis server, shared by every lock made from it. */
export class Client {
  private constructor();
  /** A mutex named `name`; throws InvalidArgumentError for a bad name or options. */
  lock(name: string, options?: LockOptions): Lock;
  /**
   * A counting semaphore with `permits` permits (a whole number from 1 to 1000000; every client
   * of one name must use the same count). Each acquisition takes one permit as a Lease, which
   * returns by itself within one lease if its holder dies. Throws InvalidArgumentError.
   */
  semaphore(name: string, permits: number, options?: SemaphoreOptions): Semaphore;
  /** A read-write lock: many holders of `readLock` or one of `writeLock`. Throws InvalidArgumentError. */
  readWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock;
  /** A leader election. Throws InvalidArgumentError for a bad name or options. */
  election(name: string, options?: ElectionOptions): Election;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Releases every lease, cancels every wait, closes the connections this client opened. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A handle on a named lock: a mutex, a semaphore permit, or one half of a read-write lock.
 * Holding it is a Lease, owned by the object that holds it.
 */
export class Lock {
  protected constructor();
  readonly client: Client;
  readonly name: string;
  /** What this handle acquires. */
  readonly kind: LockKind;
  /** Whether acquiring again while this handle holds the lock re-enters its lease. */
  readonly reentrant: boolean;
  /** The effective options (defaults filled in). */
  readonly options: Required<LeaseOptions>;
  /**
   * The most recent lease acquired through this handle that is still held, or null. The handle
   * keeps it reachable: a lease whose `acquire()` result was dropped is never released by
   * garbage collection, and can still be released here.
   */
  readonly lease: Lease | null;
  /**
   * Waits for the lock (FIFO, woken by the release itself). A reentrant handle that holds the
   * lock resolves at once with the same lease (one more hold); a non-reentrant one rejects at
   * once with AlreadyHeldError (it would wait for itself), sending nothing.
   */
  acquire(options?: AcquireOptions): Promise<Lease>;
  /**
   * One attempt: the lease, or null if the lock is held (or others queue for it);
   * AlreadyHeldError through a non-reentrant handle that holds it.
   */
  tryAcquire(): Promise<Lease | null>;
  /**
   * Acquires, runs `fn`, and releases even if it throws. Resolves with `fn`'s result only if the
   * lease was held until `fn` finished; otherwise rejects with NotHeldError.
   */
  using<T>(fn: (lease: Lease) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
}

/** A counting semaphore; each lease is one permit. */
export class Semaphore extends Lock {
  protected constructor();
  readonly kind: 'semaphore';
  /** How many holders may hold a permit at once. */
  readonly permits: number;
}

/** A read-write lock: many readers or one writer. */
export class ReadWriteLock {
  private constructor();
  readonly client: Client;
  readonly name: string;
  /** The shared half: many readers hold it at once, never beside a writer. */
  readonly readLock: Lock;
  /** The exclusive half. */
  readonly writeLock: Lock;
  /** Whether a queued writer blocks readers that arrive after it. */
  readonly writersFirst: boolean;
  /** Whether both halves are reentrant. */
  readonly reentrant: boolean;
  readonly options: Required<LeaseOptions>;
}

/** The current leader of an election, as observed on the server. */
export interface Leader {
  /** What the leader published when it campaigned. */
  value: string;
  /** The leader's term: its fencing token, larger for every later leader. */
  term: bigint;
  /** The leader's remaining lease on the server when observed, in ms. */
  remainingMs: number;
}

/** A leader election. */
export class Election {
  private constructor();
  readonly client: Client;
  readonly name: string;
  readonly options: Required<LeaseOptions>;
  /**
   * Waits to lead, publishing `value` (at most 4096 bytes, else InvalidArgumentError).
   * Rejects with TimeoutError or CancelledError as `lock.acquire()` does.
   */
  campaign(value: string, options?: AcquireOptions): Promise<Leadership>;
  /** One attempt to lead: the Leadership, or null if someone leads (or queues). */
  tryCampaign(value: string): Promise<Leadership | null>;
  /**
   * A candidate publishing `value` (checked here: at most 4096 bytes, else InvalidArgumentError):
   * a Lock whose acquisitions campaign and resolve with Leadership.
   */
  candidate(value: string): Candidate;
  /** The current leader, or null if nobody leads. */
  observe(): Promise<Leader | null>;
}

/** A candidate of an election: a Lock whose leases are Leadership. */
export class Candidate extends Lock {
  protected constructor();
  readonly kind: 'leader';
  readonly election: Election;
  /** The value it publishes while it leads. */
  readonly value: string;
  readonly lease: Leadership | null;
  acquire(options?: AcquireOptions): Promise<Leadership>;
  tryAcquire(): Promise<Leadership | null>;
  using<T>(fn: (leadership: Leadership) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
}

/** Proof of holding a lock. */
export class Lease {
  protected constructor();
  readonly lock: Lock;
  /** Strictly greater than every token issued before for this lock name; pass it to the resource you protect. */
  readonly fencingToken: bigint;
  /** Aborts (reason: NotHeldError, or ClosedError on client close) when the lease is lost; not on release(). */
  readonly signal: AbortSignal;
  /** Whether the lease is held now, by this client's knowledge. */
  readonly isHeld: boolean;
  /** Milliseconds the lease is certainly still valid (0 if not held). */
  readonly remainingMs: number;
  /**
   * Releases the lock if still held; resolves false if the lease had already ended (or this
   * object was released before). A re-entered lease gives back one hold; the last frees the lock.
   */
  release(): Promise<boolean>;
  /** Sets the remaining lease to `ms` if still held; never re-acquires (rejects with NotHeldError). */
  extend(ms: number): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Leadership of an election: a Lease whose fencing token is the term. `signal` aborts when
 * leadership is lost (renewal refused, holders key deleted, expired); `release()` resigns.
 */
export class Leadership extends Lease {
  protected constructor();
  /** The term: the same bigint as `fencingToken`. */
  readonly term: bigint;
  /** The value this leader publishes. */
  readonly value: string;
  readonly election: Election;
  /** Gives up leadership (the same as `release()`). */
  resign(): Promise<boolean>;
}

// ---- Redlock over independent masters (PROTOCOL.md §8) ----

/** Options of `connectRedlock()`. Every client of one deployment must agree on `maxLeaseMs` and `keyPrefix`. */
export interface RedlockOptions {
  /** Prepended to every key (default `lockgate:`); the key of lock `name` is `<prefix>{name}:redlock`. */
  keyPrefix?: string;
  /**
   * The longest lease any client of the deployment takes, in ms (default 30000). A master grants
   * nothing until it has been up this long plus 1 s (a restarted master has forgotten its keys),
   * and longer leases or extensions are rejected with InvalidArgumentError.
   */
  maxLeaseMs?: number;
  /** How long one attempt waits for the masters' answers; silent ones count as failed (default 50). */
  nodeTimeoutMs?: number;
  /** Pause before another attempt after a failed one (default 200) ... */
  retryDelayMs?: number;
  /** ... plus a random part up to this (default 200), so contenders do not retry in step. */
  retryJitterMs?: number;
  /** Clock-rate drift allowed, as a fraction of the lease (default 0.01; at least 0, below 0.5). */
  driftFactor?: number;
  /** Fixed part of the drift allowance in ms (default 2). */
  driftFixedMs?: number;
  /** Limit on establishing a connection to one master (URL masters; default 5000). */
  connectTimeoutMs?: number;
  /** Limit on one round trip to one master before it counts as failed (URL masters; default 5000). */
  commandTimeoutMs?: number;
  /** Extra ioredis options for the connections opened to URL masters (e.g. `tls`, `password`). */
  redisOptions?: RedisOptions;
}

/** Options of `redlock.lock()`. */
export interface RedlockLockOptions {
  /** Lease on the masters in ms (default 30000; at most the deployment's `maxLeaseMs`, checked when acquiring). */
  leaseMs?: number;
  /** Renew the lease every third of it until release (default true). */
  autoRenew?: boolean;
  /** Default wait of `acquire()` in ms (default `Infinity`). */
  waitTimeoutMs?: number;
}

/**
 * Connects to N independent Redis masters (no replication between them) for Redlock. Each
 * target is a `redis://` / `rediss://` URL (one connection owned by the Redlock) or an existing
 * ioredis client (left open by `close()`), each master listed once. Masters that are down count
 * as failed votes and are connected again when next needed; rejects only if none is reachable
 * (ConnectionError) or one refuses the credentials (AuthenticationError).
 */
export function connectRedlock(targets: ReadonlyArray<string | Redis>, options?: RedlockOptions): Promise<Redlock>;

/** A Redlock deployment: a lock is held while a majority of the masters grants it. */
export class Redlock {
  private constructor();
  /** A lock named `name`; throws InvalidArgumentError for a bad name or options. */
  lock(name: string, options?: RedlockLockOptions): RedlockLock;
  /** How many masters there are. */
  readonly masters: number;
  /** How many must grant: `floor(masters / 2) + 1`. */
  readonly quorum: number;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Releases every lease, cancels every wait, closes the connections this Redlock opened. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A handle on one named Redlock. */
export class RedlockLock {
  private constructor();
  readonly redlock: Redlock;
  readonly name: string;
  /** Always `redlock`. */
  readonly kind: 'redlock';
  /** The effective options (defaults filled in). */
  readonly options: Required<RedlockLockOptions>;
  /** The most recent lease acquired through this handle that is still held, or null. */
  readonly lease: RedlockLease | null;
  /**
   * Tries until a majority grants it (failed attempts are undone and retried after a jittered
   * pause). Rejects with TimeoutError (`timeoutMs`, `0`: one attempt), CancelledError (`signal`),
   * and at once with AlreadyHeldError while this handle holds the lock.
   */
  acquire(options?: AcquireOptions): Promise<RedlockLease>;
  /**
   * One attempt: the lease, or null if the lock is held; ConnectionError if too few masters
   * could vote; AlreadyHeldError while this handle holds the lock.
   */
  tryAcquire(): Promise<RedlockLease | null>;
  /** Acquires, runs `fn`, releases even if it throws; NotHeldError if the lease was lost meanwhile. */
  using<T>(fn: (lease: RedlockLease) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
}

/**
 * Proof that a majority of the masters holds the lock. Deliberately no `fencingToken`: a
 * majority of independent masters is not a linearizable counter, so a token read from it could
 * go backwards (PROTOCOL.md §8). Finish the protected work within `remainingMs`, or use the
 * mutex of `connect()` where the resource needs fencing tokens.
 */
export class RedlockLease {
  protected constructor();
  readonly lock: RedlockLock;
  /** Aborts (reason: NotHeldError, or ClosedError on `redlock.close()`) when the lease is lost; not on release(). */
  readonly signal: AbortSignal;
  /** Whether the lease is certainly still valid now (elapsed time and clock drift deducted). */
  readonly isHeld: boolean;
  /** Milliseconds the lease is certainly still valid (0 if not held). */
  readonly remainingMs: number;
  /**
   * Releases on every master: true if a majority still held it, false if not (or released
   * before); rejects with ConnectionError if too few masters confirmed (the rest expire).
   */
  release(): Promise<boolean>;
  /** Sets the remaining lease to `ms` (at most `maxLeaseMs`) on a majority; never re-acquires (NotHeldError). */
  extend(ms: number): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
