// Types of the ZooKeeper backend for the Node binding: its URL form, its client options and its
// `connect` overloads, added to lib/index.d.ts's by declaration merging (lib/transport/types.d.ts,
// written by `ci.sh build`, lists every transport's types).

import type { BaseClientOptions, Client } from '../index';

/**
 * A ZooKeeper client (`zookeeper://` URLs): one session for all its locks. Leases are the
 * session's: valid while the ensemble confirms the session (a lost session loses every lease),
 * so `leaseMs` and renewal concern only how often the session is proven alive.
 */
export interface ZooKeeperClientOptions extends Omit<BaseClientOptions, 'redisOptions' | 'keyPrefix' | 'tlsCaPem'> {
  /**
   * The session timeout asked of the ensemble, in ms (default 30000, the default lease); the ensemble
   * may grant another within its own bounds. A holder that loses contact learns its lease is
   * lost before the ensemble could expire its session and grant the lock to someone else.
   */
  sessionTimeoutMs?: number;
  /** How long connect() and each session open wait for a member to answer (default 5000). */
  connectTimeoutMs?: number;
  /** A request unanswered this long (ms, default 5000) drops its connection for another member's. */
  commandTimeoutMs?: number;
}

/**
 * A ZooKeeper URL: `zookeeper://[user:password@]host1[:port],host2[:port][/chroot]` (port 2181
 * by default; the login is ZooKeeper's digest scheme; a missing chroot node is made).
 * `zookeeper+tls://` is refused in Node (UnsupportedError): node-zookeeper-client has no TLS.
 */
export type ZooKeeperUrl = `zookeeper://${string}` | `zookeeper+tls://${string}`;

declare module '../index' {
    interface ClientOptionsByBackend {
      /** `zookeeper://` clients (`zookeeper+tls://` is refused in Node). */
      zookeeper: ZooKeeperClientOptions;
    }
  /**
   * Connects to a ZooKeeper ensemble and opens the client's session (ConnectionError if no member
   * answers within `connectTimeoutMs`). Locks use Apache Curator's znode layouts, so Curator
   * processes and lockgate clients contend on the same paths; fencing tokens are the holder
   * node's creation zxid.
   */
  export function connect(target: ZooKeeperUrl, options?: ZooKeeperClientOptions): Promise<Client>;
}
