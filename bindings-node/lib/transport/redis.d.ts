// Types of the Redis family (one server, a Cluster, Redlock) backend for the Node binding: its URL form, its client options and its
// `connect` overloads, added to lib/index.d.ts's by declaration merging (lib/transport/types.d.ts,
// written by `ci.sh build`, lists every transport's types).

import type { Cluster, Redis } from 'ioredis';
import type { BaseClientOptions, Client } from '../index';

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

/**
 * A Redlock client (`redlock://` / `rediss+redlock://` URLs, or an array of ioredis clients):
 * the deployment's settings. Every client of one deployment must agree on `maxLeaseMs` and
 * `keyPrefix` (the key of lock `name` is `<prefix>{name}:redlock` on every master).
 */
export interface RedlockClientOptions extends BaseClientOptions {
  /**
   * The longest lease any client of the deployment takes, in ms (default 30000). A master grants
   * nothing until it has been up this long plus 1 s (a restarted master has forgotten its keys);
   * a lock without `leaseMs` gets 30000 or this if shorter, and a longer one is refused.
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
}

/** A Redlock URL: `redlock://host1:port,host2:port,host3:port` (TLS: `rediss+redlock://`). */
export type RedlockUrl = `redlock://${string}` | `rediss+redlock://${string}`;

declare module '../index' {
    interface ClientOptionsByBackend {
      /** `redis://` / `rediss://` clients: one server, or a Redis Cluster. */
      redis: ServerClientOptions | ClusterClientOptions;
    }
    interface ClientOptionsByBackend {
      /** `redlock://` / `rediss+redlock://` clients (or ioredis clients, one per master). */
      redlock: RedlockClientOptions;
    }
  /**
   * Connects to Redlock's independent masters (no replication between them): a lock is held while
   * a majority grants it, and its leases have no fencing token. Masters that are down count as
   * failed votes and are connected again when next needed; rejects only if none is reachable
   * (ConnectionError) or one refuses the credentials (AuthenticationError).
   */
  export function connect(target: RedlockUrl, options?: RedlockClientOptions): Promise<Client>;
  /**
   * Redlock over existing ioredis clients, one per master (left open by `close()`).
   * `connectTimeoutMs`, `commandTimeoutMs` and `redisOptions` do not apply.
   */
  export function connect(target: ReadonlyArray<Redis>, options?: RedlockClientOptions): Promise<Client>;
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
}
