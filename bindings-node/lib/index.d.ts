// Types of the public API of `lockgate` (lib/index.js). Checked by `tsc --noEmit` on
// test/types/example.ts in `ci.sh test`.

import type { RedisOptions } from 'ioredis';

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
  | 'ALREADY_HELD'
  | 'UNSUPPORTED';

/** Base class of every error lockgate raises. */
export class LockError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  /** Stable code of the category; never changes between versions. */
  readonly code: ErrorCode;
  /** Whether the same call may succeed if tried again later (TIMEOUT, CONNECTION). */
  readonly retryable: boolean;
  /** The code of this class's errors (each subclass has its own). */
  static readonly code: ErrorCode;
}
/** An argument was rejected before any network call. */
export class InvalidArgumentError extends LockError {
  /** `'INVALID_ARGUMENT'`. */
  readonly code: 'INVALID_ARGUMENT';
  /** `'INVALID_ARGUMENT'`, to compare with an error's `code` without an instance. */
  static readonly code: 'INVALID_ARGUMENT';
}
/** The wait for the lock ran out. Retryable. */
export class TimeoutError extends LockError {
  /** `'TIMEOUT'`. */
  readonly code: 'TIMEOUT';
  /** `'TIMEOUT'`, to compare with an error's `code` without an instance. */
  static readonly code: 'TIMEOUT';
}
/** The lease is not (or no longer) held: expired, deleted, taken over. */
export class NotHeldError extends LockError {
  /** `'NOT_HELD'`. */
  readonly code: 'NOT_HELD';
  /** `'NOT_HELD'`, to compare with an error's `code` without an instance. */
  static readonly code: 'NOT_HELD';
}
/** Redis could not be reached or the connection broke. Retryable. */
export class ConnectionError extends LockError {
  /** `'CONNECTION'`. */
  readonly code: 'CONNECTION';
  /** `'CONNECTION'`, to compare with an error's `code` without an instance. */
  static readonly code: 'CONNECTION';
}
/** The server refused the credentials. */
export class AuthenticationError extends LockError {
  /** `'AUTHENTICATION'`. */
  readonly code: 'AUTHENTICATION';
  /** `'AUTHENTICATION'`, to compare with an error's `code` without an instance. */
  static readonly code: 'AUTHENTICATION';
}
/** The server replied with something the protocol does not allow. */
export class ProtocolError extends LockError {
  /** `'PROTOCOL'`. */
  readonly code: 'PROTOCOL';
  /** `'PROTOCOL'`, to compare with an error's `code` without an instance. */
  static readonly code: 'PROTOCOL';
}
/** The acquire was cancelled (its AbortSignal aborted, or the client closed); `cause` is the signal's reason. */
export class CancelledError extends LockError {
  /** `'CANCELLED'`. */
  readonly code: 'CANCELLED';
  /** `'CANCELLED'`, to compare with an error's `code` without an instance. */
  static readonly code: 'CANCELLED';
}
/** The client was closed. */
export class ClosedError extends LockError {
  /** `'CLOSED'`. */
  readonly code: 'CLOSED';
  /** `'CLOSED'`, to compare with an error's `code` without an instance. */
  static readonly code: 'CLOSED';
}

/**
 * This non-reentrant handle already holds the lock: acquiring again through it would wait for
 * itself, so the acquire fails at once and sends nothing. Not retryable.
 */
export class AlreadyHeldError extends LockError {
  /** `'ALREADY_HELD'`. */
  readonly code: 'ALREADY_HELD';
  /** `'ALREADY_HELD'`, to compare with an error's `code` without an instance. */
  static readonly code: 'ALREADY_HELD';
}

/**
 * The backend cannot do what was asked (a semaphore, read-write lock, election or reentrant
 * handle on a Redlock client; see `client.capabilities`). Not retryable.
 */
export class UnsupportedError extends LockError {
  /** `'UNSUPPORTED'`. */
  readonly code: 'UNSUPPORTED';
  /** `'UNSUPPORTED'`, to compare with an error's `code` without an instance. */
  static readonly code: 'UNSUPPORTED';
}

/** Options every client takes. */
export interface BaseClientOptions {
  /** Prepended to every key and channel (default `lockgate:`); clients sharing locks must agree. */
  keyPrefix?: string;
  /**
   * Whether telemetry events (the `lockgate.*` diagnostics_channel messages) carry each lock's
   * name as `lock` (default false: one series per name is unbounded cardinality for metrics).
   */
  telemetryLockNames?: boolean;
  /** A lease held this long (ms) is published once on `lockgate.lease.held_too_long` while still held (default: never). */
  heldTooLongMs?: number;
  /** Limit on establishing the connection (URL clients; default 5000). */
  connectTimeoutMs?: number;
  /** Limit on one command round trip before it counts as a connection failure (URL clients; default 5000). */
  commandTimeoutMs?: number;
  /** Extra ioredis options for the connections a URL client opens (e.g. `tls`; for a cluster, every node's). */
  redisOptions?: RedisOptions;
  /** PEM root certificate(s) to trust for TLS URLs (`rediss://`, ...) instead of the system store. */
  tlsCaPem?: string | Uint8Array;
  /**
   * Who this client is, stored with every lock entry it creates for an operator to read
   * (default `<hostname>:<pid>`; at most 256 bytes of UTF-8, no control characters, never a
   * credential). PROTOCOL.md says where each backend keeps it.
   */
  label?: string;
}

/**
 * Each backend's client options, by backend: every transport's types (lib/transport/<name>.d.ts)
 * add their entry, as they add their `connect` overloads.
 */
export interface ClientOptionsByBackend {}

/** Options of `connect(url, options)`: those of any backend. */
export type ClientOptions = ClientOptionsByBackend[keyof ClientOptionsByBackend];

// Every backend's URL form, options and `connect` overloads (written by `ci.sh build` from
// lib/transport/*.d.ts, so a backend adds its types in its own transport's file only).
export * from './transport/types';
import type { ClusterClientOptions, ServerClientOptions } from './transport/redis';

/**
 * What a client's backend offers, from the core (the same record in every binding). Every
 * backend offers mutexes with acquire, tryAcquire, extend, release, renewal and loss signals.
 */
export interface Capabilities {
  /** The backend's name: `Redis`, `Redis Cluster`, `Redlock`, `ZooKeeper`, `etcd`, `PostgreSQL`, `MySQL`. */
  readonly backend: string;
  /** The URL scheme of the client (`redis`, `rediss+redlock`, ...). */
  readonly scheme: string;
  /** Grants carry fencing tokens (`lease.fencingToken` is a bigint, else null). */
  readonly fencing: boolean;
  /** Waiters queue in arrival order and are woken by the release. */
  readonly fifo: boolean;
  /** `client.semaphore()` is offered. */
  readonly semaphore: boolean;
  /** `client.readWriteLock()` is offered. */
  readonly readWrite: boolean;
  /** `client.election()` is offered. */
  readonly election: boolean;
  /** `election.observe()` is offered (reading the leader without campaigning). */
  readonly observe: boolean;
  /** Handles may be reentrant (the lock option `reentrant`). */
  readonly reentrant: boolean;
  /** This client confirms grants on replicas (`replicaAcks`). */
  readonly replicaAcks: boolean;
  /** Read-write locks whose readers may pass queued writers (`writersFirst: false`). */
  readonly readersFirst: boolean;
  /** The server checks what every client of one lock must agree on (a semaphore's permits, `writersFirst`). */
  readonly agreedParameters: boolean;
  /** Waiters' queue entries have a lease of their own (`entryTtlMs`): a crashed waiter is skipped after it. */
  readonly entryTtl: boolean;
  /** `listLocks` lists the locks under a prefix (PROTOCOL.md §16); never on memcached. */
  readonly listLocks: boolean;
  /** `minHoldMs` is kept by the server after an early release, even once the process is gone (not ZooKeeper or etcd). */
  readonly minHold: boolean;
}

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
  /** Shortest hold in ms (ShedLock's `lockAtLeastFor`): a release sooner than this after the grant leaves the lock held on the server until then, even once this process is gone. `UNSUPPORTED` where the backend cannot (ZooKeeper, etcd: `capabilities.minHold`). */
  minHoldMs?: number;
  /** Longest hold in ms (ShedLock's `lockAtMostFor`): the lease is not renewed past this long after the grant and is lost then (loss reason `max_hold`). */
  maxHoldMs?: number;
}

/** A handle's effective options (defaults filled in; `entryTtlMs` only where queue entries have a lease of their own: Redis and SQL). */
export type EffectiveOptions = Required<Omit<LeaseOptions, 'entryTtlMs' | 'minHoldMs' | 'maxHoldMs'>> & Pick<LeaseOptions, 'entryTtlMs' | 'minHoldMs' | 'maxHoldMs'>;

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

/** Options of one `acquire()` (or `campaign()`): how long to wait, and what may cancel the wait. */
export interface AcquireOptions {
  /** Give up after this many ms with a TimeoutError (`0`: one attempt; `Infinity`: no limit). */
  timeoutMs?: number;
  /** Abort the wait: the promise rejects with a CancelledError and the wait leaves the queue. */
  signal?: AbortSignal;
}

/**
 * Connects by URL: `redis://` / `rediss://` (one server or a primary: the client owns one command
 * connection plus one subscriber connection, opened on the first waiting acquire),
 * `redis+cluster://` / `rediss+cluster://` (any node of a Redis Cluster, or a `redis://` URL with
 * `cluster: true`).
 */
export function connect(target: string, options?: ServerClientOptions | ClusterClientOptions): Promise<Client>;

/** A client of one lock service (Redis, a Redis Cluster, a Redlock deployment, a ZooKeeper ensemble, an etcd cluster, a PostgreSQL or MySQL/MariaDB database), shared by every lock made from it. */
export class Client {
  private constructor();
  /** What this client's backend offers; asking for anything else throws UnsupportedError. */
  readonly capabilities: Capabilities;
  /** The URL with passwords replaced by `***`; null for a caller's own ioredis connection(s). */
  readonly url: string | null;
  /** `Client(<redacted URL>)`. */
  toString(): string;
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
  /**
   * Reads lock `name` as `kind` on the server, changing nothing; an unknown name is empty (the
   * name is checked as for `lock()`). Racy by nature: for humans and dashboards; to decide
   * whether to write, use the fencing token.
   */
  inspect(name: string, kind?: InspectKind): Promise<Snapshot>;
  /**
   * Breaks lock `name`: removes its current holder's entry (only the one whose fencing token is
   * `options.token` when given: a stale break breaks nothing) and wakes the next waiter as a
   * release would. Resolves with what it removed, or `null`. For a holder known to be dead;
   * safe only with fencing (the broken holder learns of its loss at its next renewal).
   */
  breakLock(name: string, options?: BreakOptions): Promise<Broken | null>;
  /**
   * Adopts the lease `identity` names (`lease.identity()` of another process): a Lease of this
   * client on the same hold, with the same fencing token (no second grant), renewed with
   * `options`. Rejects with NotHeldError if it is no longer current, InvalidArgumentError for a
   * malformed identity, UnsupportedError on ZooKeeper and etcd.
   */
  adopt(identity: string, options?: LeaseOptions): Promise<Lease>;

  /**
   * One page of the locks whose names start with `prefix` (every lock if empty), each a lock
   * someone holds or waits on; pass `cursor` back for the next page (`null`: the last; a page may
   * be short, even empty, before it). `limit` defaults to 100 and is capped to 1,000. Never
   * blocks the server; racy, like inspect. `UnsupportedError` where the backend cannot list.
   */
  listLocks(options?: ListOptions): Promise<LockPage>;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Releases every lease, cancels every wait, closes the connections this client opened. */
  close(): Promise<void>;
  /** `close()`, for `await using client = await connect(...)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** What a Lock, ReadWriteLock or Election shows of itself. */
declare class Handle {
  protected constructor();
  /** The client it was made from. */
  readonly client: Client;
  /** The lock's (or election's) name. */
  readonly name: string;
  /** The effective options (defaults filled in). */
  readonly options: EffectiveOptions;
}

/**
 * A handle on a named lock: a mutex, a semaphore permit, or one half of a read-write lock.
 * Holding it is a Lease (`L`: Leadership for a Candidate), owned by the object that holds it.
 */
export class Lock<L extends Lease = Lease> extends Handle {
  protected constructor();
  /** What this handle acquires. */
  readonly kind: LockKind;
  /** Whether acquiring again while this handle holds the lock re-enters its lease. */
  readonly reentrant: boolean;
  /**
   * The most recent lease acquired through this handle that is still held, or null. The handle
   * keeps it reachable: a lease whose `acquire()` result was dropped is never released by
   * garbage collection, and can still be released here.
   */
  readonly lease: L | null;
  /**
   * Waits for the lock (FIFO, woken by the release itself). A reentrant handle that holds the
   * lock resolves at once with the same lease (one more hold); a non-reentrant one rejects at
   * once with AlreadyHeldError (it would wait for itself), sending nothing.
   */
  acquire(options?: AcquireOptions): Promise<L>;
  /**
   * One attempt: the lease, or null if the lock is held (or others queue for it);
   * AlreadyHeldError through a non-reentrant handle that holds it.
   */
  tryAcquire(): Promise<L | null>;
  /** Reads this lock on the server (a semaphore handle reads the semaphore, a half the whole read-write lock). */
  inspect(): Promise<Snapshot>;
  /** Whether anyone holds this lock now, asking the server (Redisson's `isLocked`; racy: for humans and dashboards). */
  isLocked(): Promise<boolean>;
  /**
   * Acquires, runs `fn`, and releases even if it throws. Resolves with `fn`'s result only if the
   * lease was held until `fn` finished; otherwise rejects with NotHeldError.
   */
  using<T>(fn: (lease: L) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
}

/** A counting semaphore; each lease is one permit. */
export class Semaphore extends Lock {
  protected constructor();
  readonly kind: 'semaphore';
  /** How many holders may hold a permit at once. */
  readonly permits: number;
}

/** A read-write lock: many readers or one writer. */
export class ReadWriteLock extends Handle {
  private constructor();
  /** The shared half: many readers hold it at once, never beside a writer. */
  readonly readLock: Lock;
  /** The exclusive half. */
  readonly writeLock: Lock;
  /** Whether a queued writer blocks readers that arrive after it. */
  readonly writersFirst: boolean;
  /** Whether both halves are reentrant. */
  readonly reentrant: boolean;
  /** Reads the read-write lock: its readers and writer, and its waiters in queue order. */
  inspect(): Promise<Snapshot>;
}

/** Options of `Client.breakLock`. */
export interface BreakOptions {
  /** Break only the holder whose grant has this fencing token (as `inspect` shows it). */
  token?: number | bigint;
  /** What the name is read as (default 'mutex'). */
  kind?: InspectKind;
}

/** What `Client.breakLock` removed. */
export interface Broken {
  /** The broken holder's label, or null (a peer's entry, or a backend that stores none). */
  label: string | null;
  /** The broken grant's fencing token (a bigint beyond 2^53), or null where the backend issues none. */
  fencingToken: number | bigint | null;
}

/** What a name is inspected as. */
export type InspectKind = 'mutex' | 'rw' | 'semaphore' | 'election';

/** What `Client.listLocks` lists. */
export interface ListOptions {
  /** Only names starting with this (default `''`: every name). */
  prefix?: string;
  /** The most entries of the page (default 100, capped to 1,000). */
  limit?: number;
  /** The previous page's `cursor`. */
  cursor?: string | null;
}

/** One listed lock (PROTOCOL.md §16). */
export interface LockEntry {
  /** The lock's name (without the key prefix). */
  name: string;
  /** What it is: a mutex, a read-write lock, a semaphore or an election. */
  kind: InspectKind;
  /** How many hold it (a semaphore's permits taken, the readers; 1 for a mutex or writer). */
  holders: number;
  /** How many wait in its queue. */
  waiters: number;
  /** The first holder's label, or `null`. */
  label: string | null;
}

/** One page of `Client.listLocks`. */
export interface LockPage {
  /** This page's locks (at most `limit`). */
  entries: LockEntry[];
  /** The next page's cursor, or `null` on the last page. */
  cursor: string | null;
}

/** One holder of an inspected lock (`null`: the backend does not record it; PROTOCOL.md §14). */
export interface SnapshotHolder {
  /** The label its client stored (the client option `label`), or null (a peer's entry, memcached). */
  label: string | null;
  /** Its grant's fencing token (a bigint beyond 2^53), or null where the backend issues none. */
  fencingToken: number | bigint | null;
  /** How long it has held, by the server's clock. */
  heldForMs: number | null;
  /** Its remaining lease as the server would enforce it. */
  remainingMs: number | null;
  /** Alone (a mutex, writer, leader) or shared (a reader, a permit). */
  mode: 'exclusive' | 'shared';
  /** An election leader's published value. */
  value: string | null;
  /** This client's reentrant holds on it; null for another client's holder. */
  holds: number | null;
}

/** One waiter of an inspected lock, in queue order. */
export interface SnapshotWaiter {
  /** The label its client stored (the client option `label`), or null. */
  label: string | null;
  /** How long it has waited, by the server's clock. */
  waitingForMs: number | null;
  /** What it waits for: alone (a mutex, writer, candidate) or shared (a reader, a permit). */
  mode: 'exclusive' | 'shared';
}

/** A lock as read from its server in one request. For humans and dashboards; to decide whether to write, use the fencing token. */
export interface Snapshot {
  /** What the name was inspected as. */
  kind: InspectKind;
  /** Whether anyone holds it. */
  locked: boolean;
  /** Everyone holding it when read (a leader, the readers, a semaphore's permit holders). */
  holders: SnapshotHolder[];
  /** In queue order (none where waiters poll: memcached, Redlock). */
  waiters: SnapshotWaiter[];
  /** A semaphore's permit count where the server records it. */
  permits: number | null;
  /** The longest remaining lease among the holders (Redisson's `remainTimeToLive`). */
  remainingMs: number | null;
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
export class Election extends Handle {
  private constructor();
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
  /** Reads the election: the leader (a holder with its published `value`) and the other candidates. */
  inspect(): Promise<Snapshot>;
}

/** A candidate of an election: a Lock whose leases are Leadership. */
export class Candidate extends Lock<Leadership> {
  protected constructor();
  /** Always `'leader'`. */
  readonly kind: 'leader';
  /** The election it campaigns in. */
  readonly election: Election;
  /** The value it publishes while it leads. */
  readonly value: string;
}

/** Proof of holding a lock. */
export class Lease {
  protected constructor();
  /** The handle it was acquired through. */
  readonly lock: Lock;
  /**
   * Strictly greater than every token issued before for this lock name; pass it to the resource
   * you protect. Null where the backend has none (Redlock: a majority of independent masters is
   * not a linearizable counter, so a token read from it could go backwards).
   */
  readonly fencingToken: bigint | null;
  /** Aborts (reason: NotHeldError, or ClosedError on client close) when the lease is lost; not on release(). */
  readonly signal: AbortSignal;
  /** Whether the lease is held now, by this client's knowledge. */
  readonly isHeld: boolean;
  /** Milliseconds the lease is certainly still valid (0 if not held). */
  readonly remainingMs: number;
  /**
   * Whether the lease is held but cannot be confirmed now (its server unreachable, its session
   * disconnected, its renewals failing): it stays valid only for `remainingMs` unless contact
   * returns first. Finish or pause the protected work.
   */
  readonly atRisk: boolean;
  /** Calls `callback()` once per spell at risk (at once if at risk now) until the lease ends; a loss still aborts `signal`. */
  onAtRisk(callback: () => void): void;
  /**
   * Releases the lock if still held; resolves false if the lease had already ended (or this
   * object was released before). A re-entered lease gives back one hold; the last frees the lock.
   */
  release(): Promise<boolean>;
  /** Sets the remaining lease to `ms` if still held; never re-acquires (rejects with NotHeldError). */
  extend(ms: number): Promise<void>;
  /**
   * This lease's identity (an opaque string) for another process to `client.adopt()`. Whoever
   * has it can release the lock: never log it. Throws NotHeldError if the lease is not held.
   */
  identity(): string;
  /** `release()`, for `await using lease = await lock.acquire()`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Leadership of an election: a Lease whose fencing token is the term. `signal` aborts when
 * leadership is lost (renewal refused, holders key deleted, expired); `release()` resigns.
 */
export class Leadership extends Lease {
  protected constructor();
  /** Elections exist only where grants carry fencing tokens. */
  readonly fencingToken: bigint;
  /** The term: the same bigint as `fencingToken`. */
  readonly term: bigint;
  /** The value this leader publishes. */
  readonly value: string;
  /** The election it leads. */
  readonly election: Election;
  /** Gives up leadership (the same as `release()`). */
  resign(): Promise<boolean>;
}

/**
 * What a `lockgate.<event>` diagnostics_channel publishes (README "Telemetry"): the event's
 * stable name, the core's one-line text, whether it is a warning (a loss, a spell at risk, an
 * expired session), the backend's URL scheme, the primitive, the lock's name only when
 * the client option `telemetryLockNames`, and the event's measurements. Never a URL, a password or
 * an owner token.
 */
export interface TelemetryEvent {
  /** The event's stable name (`acquire.granted`, `lease.lost`, ...: the channel's name without `lockgate.`). */
  event: string;
  /** The core's one-line text of the event. */
  message: string;
  /** Whether it is a warning (a loss, a spell at risk, an expired session). */
  warning: boolean;
  /** The client's URL scheme (`redis`, `zookeeper`, ...). */
  backend: string;
  /** What the lock is, where the event concerns one. */
  primitive?: 'mutex' | 'semaphore' | 'read' | 'write' | 'leader';
  /** The lock's name: only with the client option `telemetryLockNames`. */
  lock?: string;
  /** acquire.granted / timed_out / cancelled / failed: from the acquire's start (ms). */
  waitMs?: number;
  /** acquire.granted: whether it waited behind a holder. */
  queued?: boolean;
  /** lease.released / lease.lost: from the grant (ms). */
  heldMs?: number;
  /** lease.lost: `expired`, `refused`, `revoked`, `session_ended` or `failed`. */
  reason?: string;
  /** acquire.failed / lease.renewal_failed: the error's code. */
  code?: string;
  /** redlock.round: `acquire`, `renew`, `extend` or `release`. */
  call?: string;
  /** redlock.round: `granted`, `refused`, `no_quorum`, `too_late`, `mismatch`, `confirmed` or `unconfirmed`. */
  outcome?: string;
  /** redlock.round: from sending the round to its decision (ms). */
  tookMs?: number;
  /** redlock.round: the masters asked, and how they voted (granted, held elsewhere, restarting, failed, not answered when decided). */
  masters?: number;
  /** redlock.round: masters that granted. */
  yes?: number;
  /** redlock.round: masters where another client holds the lock. */
  no?: number;
  /** redlock.round: masters refusing while they restart (up less than `maxLeaseMs` + 1 s). */
  restarting?: number;
  /** redlock.round: masters that failed (an error or a broken connection). */
  failed?: number;
  /** redlock.round: masters that had not answered when the round was decided. */
  unanswered?: number;
}

/** The names of lockgate's diagnostics_channel channels: `lockgate.acquire.started`, ... */
export declare const telemetryChannels: readonly string[];

/**
 * Records every client's metrics (README "Telemetry": the same instruments, attributes and values
 * in every lockgate binding) and one `lockgate.acquire` span per acquire that ended through
 * OpenTelemetry's API (`npm install @opentelemetry/api`; UnsupportedError without it), with the
 * given providers or the global ones. The application's SDK exports them.
 */
export declare function instrumentOpenTelemetry(providers?: {
  meterProvider?: { getMeter(name: string, version?: string): unknown };
  tracerProvider?: { getTracer(name: string, version?: string): unknown };
}): void;

/** Stops recording through OpenTelemetry. */
export declare function uninstrumentOpenTelemetry(): void;
