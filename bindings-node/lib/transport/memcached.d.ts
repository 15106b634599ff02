// Types of the memcached backend for the Node binding: its URL form, its client options and its
// `connect` overloads, added to lib/index.d.ts's by declaration merging (lib/transport/types.d.ts,
// written by `ci.sh build`, lists every transport's types).

import type { BaseClientOptions, Client } from '../index';

/** A memcached client (`memcached://` URLs; PROTOCOL.md §13): one item per lock, waiters poll. */
export interface MemcachedClientOptions extends Pick<BaseClientOptions, 'keyPrefix' | 'connectTimeoutMs' | 'commandTimeoutMs'> {
  /**
   * The longest lease any client of the deployment takes, in ms (default 30000; every client
   * must agree). A server restarted less than this long ago grants nothing (it has forgotten
   * leases that may still be valid); a lock without `leaseMs` gets 30000 or this if shorter, and
   * a longer one is refused.
   */
  maxLeaseMs?: number;
}

/** A memcached URL: `memcached://host1[:port],host2[:port]` (port 11211 by default; no login, no TLS). */
export type MemcachedUrl = `memcached://${string}`;

declare module '../index' {
    interface ClientOptionsByBackend {
      /** `memcached://` clients. */
      memcached: MemcachedClientOptions;
    }
  /** Connects to memcached servers (each lock's item on one of them); waiters poll, grants carry no fencing token. */
  export function connect(target: MemcachedUrl, options?: MemcachedClientOptions): Promise<Client>;
}
