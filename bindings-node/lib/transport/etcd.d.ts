// Types of the etcd backend for the Node binding: its URL form, its client options and its
// `connect` overloads, added to lib/index.d.ts's by declaration merging (lib/transport/types.d.ts,
// written by `ci.sh build`, lists every transport's types).

import type { BaseClientOptions, Client } from '../index';
import type { ZooKeeperClientOptions } from './zookeeper';

/**
 * An etcd client (`etcd://` / `etcds://` URLs): one etcd lease (the session) for all its locks,
 * kept alive by the core's keepalives. `tlsCaPem` is the CA an `etcds://` member must chain to.
 */
export interface EtcdClientOptions extends Omit<ZooKeeperClientOptions, 'sessionTimeoutMs'>, Pick<BaseClientOptions, 'tlsCaPem'> {
  /** The session lease's TTL in ms (default 30000, the default lease; whole seconds, at least 1000), and the longest TTL of the lease a lock's key is on (its lease). */
  sessionTimeoutMs?: number;
}

/** An etcd URL: `etcd://[user:password@]host1[:port],host2[:port]` (port 2379), `etcds://` with TLS. */
export type EtcdUrl = `etcd://${string}` | `etcds://${string}`;

declare module '../index' {
    interface ClientOptionsByBackend {
      /** `etcd://` / `etcds://` clients. */
      etcd: EtcdClientOptions;
    }
  /**
   * Connects to an etcd cluster and grants the client's session lease. Mutexes and elections use
   * the keys of etcd's `concurrency` package (`etcdctl lock` / `etcdctl elect` interoperate);
   * fencing tokens are the holder key's create revision.
   */
  export function connect(target: EtcdUrl, options?: EtcdClientOptions): Promise<Client>;
}
