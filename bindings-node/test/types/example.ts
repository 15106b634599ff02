// A typed example of the public API; `tsc -p test/types` must accept it (and reject the
// lines marked @ts-expect-error). Never run, only type-checked.
import Redis, { Cluster } from 'ioredis';
import {
  connect,
  Client,
  Lease,
  Leadership,
  Lock,
  Semaphore,
  ReadWriteLock,
  Election,
  Snapshot,
  Broken,
  LockPage,
  LockEntry,
  SnapshotHolder,
  SnapshotWaiter,
  type Leader,
  type LockKind,
  LockError,
  TimeoutError,
  NotHeldError,
  AlreadyHeldError,
  CancelledError,
  type ErrorCode,
  type ClientOptions,
  type ReplicaAcks,
  ConnectionError,
  UnsupportedError,
  type Capabilities,
  type RedlockClientOptions,
  type ZooKeeperClientOptions,
  type EtcdClientOptions,
  type SqlClientOptions,
  type TelemetryEvent,
  telemetryChannels,
  instrumentOpenTelemetry,
  uninstrumentOpenTelemetry,
  type MemcachedClientOptions,
} from 'lockgate';
import { subscribe } from 'node:diagnostics_channel';

async function example(): Promise<void> {
  const client: Client = await connect('redis://127.0.0.1:6379', { keyPrefix: 'app:' });
  const lock = client.lock('orders:42', { leaseMs: 10_000, autoRenew: true });
  const cron = client.lock('sync-feeds', { minHoldMs: 240_000, maxHoldMs: 300_000 });
  const minHold: number | undefined = cron.options.minHoldMs;
  const canHold: boolean = client.capabilities.minHold;
  void minHold;
  void canHold;

  const lease: Lease = await lock.acquire({ timeoutMs: 5_000, signal: AbortSignal.timeout(10_000) });
  const token: bigint | null = lease.fencingToken; // a bigint wherever capabilities.fencing
  const held: boolean = lease.isHeld;
  const left: number = lease.remainingMs;
  const risky: boolean = lease.atRisk;
  lease.onAtRisk(() => console.log('finish or pause the work: the lease may not be confirmed', risky));
  await fetch('https://example.invalid/', { signal: lease.signal }).catch(() => undefined);
  await lease.extend(20_000);
  const wasHeld: boolean = await lease.release();

  const maybe: Lease | null = await lock.tryAcquire();
  if (maybe) await maybe.release();
  // The handle's current lease (kept reachable by the handle), or null.
  const current: Lease | null = lock.lease;
  if (current) await current.release();

  const total: number = await lock.using(async (l) => {
    l.signal.throwIfAborted();
    return Number((l.fencingToken ?? 0n) % 1000n);
  });

  try {
    await lock.acquire({ timeoutMs: 100 });
  } catch (err) {
    if (err instanceof TimeoutError) {
      const code: 'TIMEOUT' = err.code;
      const retry: boolean = err.retryable;
      void code, retry;
    } else if (err instanceof AlreadyHeldError) {
      const code: 'ALREADY_HELD' = err.code;
      void code;
    } else if (err instanceof NotHeldError || err instanceof CancelledError) {
      const code: ErrorCode = err.code;
      void code;
    } else if (err instanceof LockError) {
      void err.code;
    }
  }

  // Reentrant mutex: the same handle re-enters its lease.
  const reentrant: Lock = client.lock('orders:43', { reentrant: true });
  const outer = await reentrant.acquire();
  const inner = await reentrant.acquire({ timeoutMs: 0 });
  const same: boolean = inner.fencingToken === outer.fencingToken;
  await inner.release();
  await outer.release();

  // Semaphore: one permit per lease.
  const pool: Semaphore = client.semaphore('db-pool', 5, { leaseMs: 10_000 });
  const permits: number = pool.permits;
  const kind: LockKind = pool.kind;
  const rows: number = await pool.using(async (permit) => Number((permit.fencingToken ?? 0n) % 7n), { timeoutMs: 1000 });
  const permit: Lease | null = await pool.tryAcquire();
  if (permit) await permit.release();

  // Read-write lock: two handles with the surface of a lock.
  const rw: ReadWriteLock = client.readWriteLock('doc', { writersFirst: false, reentrant: true });
  const reader: Lease = await rw.readLock.acquire({ signal: AbortSignal.timeout(1000) });
  await reader.release();
  await rw.writeLock.using(async (w) => w.extend(5_000));
  const wf: boolean = rw.writersFirst;

  // Election: campaign -> leadership (a lease whose token is the term); observe the leader.
  const election: Election = client.election('scheduler', { leaseMs: 5_000 });
  const leadership: Leadership = await election.campaign('10.0.0.7:8080', { timeoutMs: 60_000 });
  const term: bigint = leadership.term;
  leadership.signal.addEventListener('abort', () => undefined);
  const leader: Leader | null = await election.observe();
  // Inspecting: the snapshot's shape by name and through a handle.
  const snapshot: Snapshot = await client.inspect('orders', 'mutex');
  const holder: SnapshotHolder | undefined = snapshot.holders[0];
  const label: string | null = holder ? holder.label : null;
  const waiting: (number | null)[] = snapshot.waiters.map((w: SnapshotWaiter) => w.waitingForMs);
  const locked: boolean = await election.inspect().then((s) => s.locked);
  // Breaking: what was removed, or null; a stale token breaks nothing.
  const broken: Broken | null = await client.breakLock('orders', { token: 42, kind: 'mutex' });
  const brokenToken: number | bigint | null = broken ? broken.fencingToken : null;
  // Handing a lease to another process: an opaque string, adopted as a Lease on the same hold.
  const identity: string = reader.identity();
  const adopted: Lease = await client.adopt(identity, { leaseMs: 10_000, autoRenew: true });
  await adopted.release();
  void label, waiting, locked, brokenToken;
  void label, waiting, locked;
  // Listing: a page's shape, the cursor passed back.
  const page: LockPage = await client.listLocks({ prefix: 'orders:', limit: 500 });
  const first: LockEntry | undefined = page.entries[0];
  const next: LockPage = await client.listLocks({ prefix: 'orders:', cursor: page.cursor });
  const busy: number = first ? first.holders + first.waiters : 0;
  void next, busy;
  if (leader) {
    const v: string = leader.value;
    const t: bigint = leader.term;
    const ms: number = leader.remainingMs;
    void v, t, ms;
  }
  const maybeLeader: Leadership | null = await election.tryCampaign('other');
  const candidate = election.candidate('10.0.0.8:8080');
  const ran: bigint = await candidate.using(async (l: Leadership) => l.term, { timeoutMs: 1000 });
  const asLock: Lock = candidate;
  void maybeLeader, ran, asLock;
  await leadership.resign();

  // @ts-expect-error permits are a number
  client.semaphore('db-pool', '5');
  // @ts-expect-error semaphores are not reentrant
  client.semaphore('db-pool', 5, { reentrant: true });
  // @ts-expect-error the leader value is a string
  await election.campaign(42);
  // @ts-expect-error terms are bigint
  const badTerm: number = leadership.term;

  void same, permits, kind, rows, wf, term, badTerm;

  const existing = new Redis();
  const byo = await connect(existing, { replicaAcks: { replicas: 1, timeoutMs: 500 } });
  await byo.close();

  // Redis Cluster: by the URL of any node, or an existing ioredis Cluster.
  const options: ClientOptions = { cluster: true, keyPrefix: 'app:' };
  const clustered: Client = await connect('redis://127.0.0.1:7000', options);
  await clustered.close();
  const ioCluster = new Cluster([{ host: '127.0.0.1', port: 7000 }]);
  const passed: Client = await connect(ioCluster, { keyPrefix: 'app:' });
  await passed.close();
  // Replica-acknowledged grants on a primary with replicas.
  const acks: ReplicaAcks = { replicas: 1, timeoutMs: 500 };
  const acked = await connect('redis://127.0.0.1:6379', { replicaAcks: acks, commandTimeoutMs: 2000 });
  await acked.close();
  // @ts-expect-error replicaAcks is not offered on a cluster
  await connect('redis://127.0.0.1:7000', { cluster: true, replicaAcks: acks });
  // @ts-expect-error nor with an ioredis Cluster
  await connect(ioCluster, { replicaAcks: acks });
  // @ts-expect-error an ioredis client is a Cluster or not by itself
  await connect(existing, { cluster: true });
  // replicaAcks.timeoutMs is optional: the core's shared default (1000 ms) applies
  const defaulted = await connect('redis://127.0.0.1:6379', { replicaAcks: { replicas: 1 } });
  await defaulted.close();
  // @ts-expect-error replicaAcks needs a number of replicas
  await connect('redis://127.0.0.1:6379', { replicaAcks: { timeoutMs: 500 } });

  // @ts-expect-error leases are bigint-tokened, not number
  const wrong: number = lease.fencingToken;
  // @ts-expect-error option names are checked
  client.lock('x', { lease: 1000 });
  // @ts-expect-error timeouts are numbers of milliseconds
  await lock.acquire({ timeoutMs: '5s' });

  void token, held, left, wasHeld, total, wrong;
  await client.close();
}

async function redlockExample(): Promise<void> {
  // Redlock is a URL like any other backend: the same Client, Lock and Lease.
  const options: RedlockClientOptions = { maxLeaseMs: 10_000, nodeTimeoutMs: 50, retryDelayMs: 200, retryJitterMs: 200, driftFactor: 0.01, driftFixedMs: 2, keyPrefix: 'app:' };
  const redlock: Client = await connect('redlock://m1:6379,m2:6379,m3:6379', options);
  const caps: Capabilities = redlock.capabilities;
  const fencing: boolean = caps.fencing; // false: Redlock grants carry no fencing token
  const lock: Lock = redlock.lock('orders:42', { leaseMs: 5_000 });
  const lease: Lease = await lock.acquire({ timeoutMs: 5_000, signal: AbortSignal.timeout(10_000) });
  const token: bigint | null = lease.fencingToken;
  const held: boolean = lease.isHeld;
  const left: number = lease.remainingMs;
  const risky: boolean = lease.atRisk;
  lease.onAtRisk(() => console.log('finish or pause the work: the lease may not be confirmed', risky));
  lease.signal.addEventListener('abort', () => undefined);
  await lease.extend(5_000);
  const wasHeld: boolean = await lease.release();
  try {
    const maybe: Lease | null = await lock.tryAcquire();
    if (maybe) await maybe.release();
    redlock.semaphore('pool', 3);
  } catch (err) {
    if (err instanceof ConnectionError) void err.retryable; // too few masters could vote
    if (err instanceof UnsupportedError) {
      const code: 'UNSUPPORTED' = err.code; // no semaphores on Redlock
      void code;
    }
  }
  const r: string = await lock.using(async (l) => `${l.remainingMs}`, { timeoutMs: 1000 });
  const byo: Client = await connect([new Redis(6379), new Redis(6380), new Redis(6381)], { maxLeaseMs: 10_000 });
  await byo.close();
  // @ts-expect-error Redlock settings belong to redlock:// URLs
  await connect('redis://m1:6379', { maxLeaseMs: 10_000 });
  // @ts-expect-error the masters of a Redlock are ioredis clients, not Clusters
  await connect([new Cluster([])]);
  void fencing, token, held, left, wasHeld, r;
  await redlock.close();
}

async function zookeeperExample(): Promise<void> {
  // ZooKeeper is a URL like any other backend: the same Client, Lock and Lease.
  const options: ZooKeeperClientOptions = { sessionTimeoutMs: 30_000, connectTimeoutMs: 2_000 };
  const zk: Client = await connect('zookeeper://app:secret@zk1:2181,zk2:2181,zk3:2181/services', options);
  const lease: Lease = await zk.lock('orders:42').acquire({ timeoutMs: 1_000 });
  const token: bigint | null = lease.fencingToken; // the holder node's creation zxid
  await lease.release();
  // @ts-expect-error ioredis options belong to Redis URLs
  await connect('zookeeper://zk1:2181', { sessionTimeoutMs: 30_000, redisOptions: {} });
  void token;
  await zk.close();
}

async function etcdExample(): Promise<void> {
  // etcd too: a session lease TTL and, for etcds://, the CA the members chain to.
  const options: EtcdClientOptions = { sessionTimeoutMs: 10_000, tlsCaPem: '-----BEGIN CERTIFICATE-----' };
  const etcd: Client = await connect('etcds://app:secret@etcd1:2379,etcd2:2379', options);
  const lease: Lease = await etcd.lock('/jobs/nightly').acquire({ timeoutMs: 1_000 }); // etcdctl lock's prefix
  const revision: bigint | null = lease.fencingToken; // the holder key's create revision
  await lease.release();
  // @ts-expect-error keyPrefix belongs to Redis URLs
  await connect('etcd://etcd1:2379', { sessionTimeoutMs: 10_000, keyPrefix: 'x' });
  void revision;
  await etcd.close();
}

async function sqlExample(): Promise<void> {
  // PostgreSQL and MySQL/MariaDB: the table's settings are URL parameters.
  const options: SqlClientOptions = { connectTimeoutMs: 2_000, commandTimeoutMs: 3_000 };
  const pg: Client = await connect('postgres://app:secret@db1:5432/app?sslmode=verify-full&table_prefix=jobs_', options);
  const lease: Lease = await pg.lock('invoice:7', { entryTtlMs: 10_000 }).acquire({ timeoutMs: 1_000 });
  const rowId: bigint | null = lease.fencingToken; // the holder row's id
  await lease.release();
  const my: Client = await connect('mariadb://app:secret@db2/app', { tlsCaPem: '-----BEGIN CERTIFICATE-----' });
  void rowId;
  await my.close();
  await pg.close();
}

// Telemetry: every lockgate channel to a logger, lock names opted in.
function telemetryExample(client: Client): void {
  for (const name of telemetryChannels) {
    subscribe(name, (message) => {
      const e = message as TelemetryEvent;
      const wait: number | undefined = e.waitMs;
      if (e.warning) console.warn(`${e.event} ${e.backend}/${e.primitive ?? '-'}: ${e.message}`, wait);
    });
  }
  void client;
  // Metrics and acquire spans through OpenTelemetry (the global providers, or given ones).
  instrumentOpenTelemetry();
  instrumentOpenTelemetry({ meterProvider: { getMeter: () => ({}) } });
  uninstrumentOpenTelemetry();
}
const withNames: ClientOptions = { telemetryLockNames: true };
// @ts-expect-error a boolean only
const badNames: ClientOptions = { telemetryLockNames: 'yes' };
void withNames;
void badNames;

async function memcachedExample(): Promise<void> {
  // memcached: the deployment's max lease bounds every lease (a restarted server waits it out).
  const options: MemcachedClientOptions = { maxLeaseMs: 10_000, commandTimeoutMs: 1_000 };
  const mc: Client = await connect('memcached://cache1:11211,cache2:11211', options);
  const lease: Lease = await mc.lock('report:daily', { leaseMs: 10_000 }).acquire({ timeoutMs: 1_000 });
  const token: bigint | null = lease.fencingToken; // always null: memcached offers no fencing
  await lease.release();
  // @ts-expect-error nodeTimeoutMs belongs to Redlock URLs
  await connect('memcached://cache1', { nodeTimeoutMs: 50 });
  void token;
  await mc.close();
}

void example;
void telemetryExample;
void memcachedExample;
void sqlExample;
void etcdExample;
void redlockExample;
void zookeeperExample;
