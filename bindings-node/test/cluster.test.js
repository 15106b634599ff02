'use strict';
// The binding on a real 3-master Redis Cluster started by this file: a passed-in ioredis
// Cluster and a client connected by URL (`cluster: true`), locks whose slots live on different
// masters, handoffs woken by cluster-wide notifications, shared primitives, and nothing left.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const Redis = require('ioredis');
const lockgate = require('..');
const { startCluster, eventually, sleep, freePort } = require('./helpers/redis-server');

let cluster;
/** The caller's own ioredis Cluster, passed to connect(). */
let ioCluster;
/** connect(ioCluster): the caller keeps owning the Cluster. */
let passed;
/** connect(url, { cluster: true }): the client owns its Cluster. */
let byUrl;
/** One lock name per master: names[i]'s keys live on cluster.nodes[i]. */
const names = [];

before(async () => {
  cluster = await startCluster();
  ioCluster = new Redis.Cluster([{ host: '127.0.0.1', port: cluster.nodes[1].port }]);
  passed = await lockgate.connect(ioCluster);
  byUrl = await lockgate.connect(cluster.url, { cluster: true });
  for (let i = 0; names.length < 3 && i < 1000; i++) {
    const name = `slot-${i}`;
    const owner = await cluster.slotOwner(`lockgate:{${name}}`);
    if (owner === cluster.nodes[names.length]) names.push(name);
  }
  assert.equal(names.length, 3, 'found a lock name for every master');
});

after(async () => {
  await passed.close();
  await byUrl.close();
  await ioCluster.quit();
  await cluster.stop();
});

/** Keys of lockgate on every node, fence counters aside (they outlive the locks by design). */
async function leftover(pattern = 'lockgate:*') {
  return (await cluster.keys(pattern)).filter((k) => !k.endsWith(':fence'));
}

const forms = () => [
  ['a passed-in ioredis Cluster', passed],
  ['a cluster URL', byUrl],
];

test('the lock names of this file live on three different masters', async () => {
  const owners = new Set();
  for (const n of names) owners.add((await cluster.slotOwner(`lockgate:{${n}}`)).port);
  assert.equal(owners.size, 3);
});

test('mutex acquire and release on every master, with both client forms', async () => {
  for (const [form, client] of forms()) {
    for (let i = 0; i < 3; i++) {
      const lock = client.lock(names[i], { leaseMs: 5000 });
      const lease = await lock.acquire({ timeoutMs: 5000 });
      assert.equal(typeof lease.fencingToken, 'bigint', form);
      assert.ok(lease.isHeld, form);
      const owner = cluster.nodes[i];
      assert.equal(await owner.admin.exists(`lockgate:{${names[i]}}`), 1, `${form}: the key is on its master`);
      assert.equal(await client.lock(names[i]).tryAcquire(), null, `${form}: held`);
      assert.equal(await lease.release(), true, form);
      assert.equal(await owner.admin.exists(`lockgate:{${names[i]}}`), 0, `${form}: released`);
      const again = await lock.tryAcquire();
      assert.ok(again && again.fencingToken > lease.fencingToken, `${form}: fencing tokens increase`);
      await again.release();
    }
  }
  assert.deepEqual(await leftover(), []);
});

test('locks on three masters at once: one engine pipeline spans slots, renewals keep them all', async () => {
  for (const [form, client] of forms()) {
    // Acquired in one tick, the three ACQUIREs go out as one engine pipeline; the watchdog
    // batches the three renewals the same way. A pipeline sent as such to a cluster would fail
    // (CROSSSLOT / MOVED); sent command by command, every lease stays held.
    const leases = await Promise.all(names.map((n) => client.lock(n, { leaseMs: 600 }).acquire({ timeoutMs: 5000 })));
    await sleep(1500); // two and a half leases
    for (let i = 0; i < 3; i++) {
      assert.ok(leases[i].isHeld, `${form}: ${names[i]} still held`);
      assert.equal(leases[i].signal.aborted, false, `${form}: ${names[i]} not lost`);
      const pttl = await cluster.nodes[i].admin.pttl(`lockgate:{${names[i]}}`);
      assert.ok(pttl > 0 && pttl <= 600, `${form}: ${names[i]} renewed on its master (pttl ${pttl})`);
    }
    assert.deepEqual(await Promise.all(leases.map((l) => l.release())), [true, true, true], form);
  }
  assert.deepEqual(await leftover(), []);
});

test('a contended handoff wakes the waiter through a notification, across clients and masters', async () => {
  for (const [holder, waiter] of [
    [passed, byUrl],
    [byUrl, passed],
  ]) {
    for (const name of names) {
      const held = await holder.lock(name).acquire({ timeoutMs: 5000 });
      let grantedAt;
      // entryTtlMs 30 s: the waiter's own heartbeat comes only every 10 s, so a prompt grant
      // can only have come from the release's `granted` message.
      const waiting = waiter
        .lock(name, { entryTtlMs: 30_000 })
        .acquire({ timeoutMs: 8000 })
        .then((l) => {
          grantedAt = performance.now();
          return l;
        });
      const owner = await cluster.slotOwner(`lockgate:{${name}}`);
      await eventually(async () => (await owner.admin.zcard(`lockgate:{${name}}:queue`)) === 1, 3000, 'the waiter queued');
      await sleep(100);
      const releasedAt = performance.now();
      assert.equal(await held.release(), true);
      const got = await waiting;
      assert.ok(got.fencingToken > held.fencingToken, 'the handoff has a larger fencing token');
      assert.ok(grantedAt - releasedAt < 1000, `woken ${Math.round(grantedAt - releasedAt)} ms after the release`);
      assert.ok(got.isHeld);
      await got.release();
    }
  }
  assert.deepEqual(await leftover(), []);
});

test('a semaphore on a cluster: at most `permits` holders, the next one gets a returned permit', async () => {
  const name = names[2];
  const sem1 = passed.semaphore(name, 2, { leaseMs: 5000 });
  const sem2 = byUrl.semaphore(name, 2, { leaseMs: 5000 });
  const a = await sem1.acquire({ timeoutMs: 5000 });
  const b = await sem2.acquire({ timeoutMs: 5000 });
  // Third holders: handles of their own (a handle holding a permit refuses to wait for itself).
  assert.equal(await passed.semaphore(name, 2).tryAcquire(), null, 'no third permit');
  const third = byUrl.semaphore(name, 2).acquire({ timeoutMs: 8000 });
  await sleep(200);
  const t0 = performance.now();
  await a.release();
  const c = await third;
  assert.ok(performance.now() - t0 < 1000, 'the returned permit went to the waiter at once');
  assert.ok(c.isHeld && b.isHeld);
  await Promise.all([b.release(), c.release()]);
  assert.deepEqual(await leftover(), []);
});

test('a read-write lock on a cluster: readers share, a writer waits for them and is woken', async () => {
  const name = names[0];
  const rw1 = passed.readWriteLock(name, { leaseMs: 5000 });
  const rw2 = byUrl.readWriteLock(name, { leaseMs: 5000 });
  const r1 = await rw1.readLock.acquire({ timeoutMs: 5000 });
  const r2 = await rw2.readLock.acquire({ timeoutMs: 5000 });
  assert.equal(await rw2.writeLock.tryAcquire(), null, 'no writer beside readers');
  let writerAt;
  const writer = rw2.writeLock.acquire({ timeoutMs: 8000 }).then((l) => {
    writerAt = performance.now();
    return l;
  });
  await sleep(200);
  assert.equal(await passed.readWriteLock(name).readLock.tryAcquire(), null, 'a queued writer blocks later readers');
  await r1.release();
  await sleep(100);
  assert.equal(writerAt, undefined, 'the writer waits for the last reader');
  const t0 = performance.now();
  await r2.release();
  const w = await writer;
  assert.ok(writerAt - t0 < 1000, 'the writer was woken by the last release');
  assert.ok(w.fencingToken > 0n);
  await w.release();
  assert.deepEqual(await leftover(), []);
});

test('an election on a cluster: observe the leader and its term, the next leader has a larger one', async () => {
  const e1 = passed.election(names[1], { leaseMs: 5000 });
  const e2 = byUrl.election(names[1], { leaseMs: 5000 });
  const lead = await e1.campaign('a', { timeoutMs: 5000 });
  const observed = await e2.observe();
  assert.equal(observed.value, 'a');
  assert.equal(observed.term, lead.term);
  const next = e2.campaign('b', { timeoutMs: 8000 });
  await sleep(100);
  await lead.resign();
  const lead2 = await next;
  assert.ok(lead2.term > lead.term);
  assert.equal((await e1.observe()).value, 'b');
  await lead2.resign();
  assert.equal(await e1.observe(), null);
  assert.deepEqual(await leftover(), []);
});

test('the subscriber connection is replaced when it drops, and grants still arrive at once', async () => {
  const name = names[1];
  const held = await passed.lock(name).acquire({ timeoutMs: 5000 });
  let grantedAt;
  const waiting = byUrl
    .lock(name, { entryTtlMs: 30_000 })
    .acquire({ timeoutMs: 15_000 })
    .then((l) => {
      grantedAt = performance.now();
      return l;
    });
  const owner = await cluster.slotOwner(`lockgate:{${name}}`);
  await eventually(async () => (await owner.admin.zcard(`lockgate:{${name}}:queue`)) === 1, 3000, 'the waiter queued');
  // Drop every pub/sub connection on every node: both clients' subscribers go away.
  let killed = 0;
  for (const n of cluster.nodes) killed += await n.admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  assert.ok(killed >= 1, 'a subscriber was connected');
  // The engine learns of it, subscribes again, and the driver connects to a node that is up.
  await eventually(
    async () => {
      let subscribers = 0;
      for (const n of cluster.nodes) subscribers += (await n.admin.call('PUBSUB', 'CHANNELS', 'lockgate:client:*')).length;
      return subscribers >= 1;
    },
    5000,
    'a new subscription',
  );
  await sleep(100);
  const releasedAt = performance.now();
  await held.release();
  const got = await waiting;
  assert.ok(grantedAt - releasedAt < 1000, `woken ${Math.round(grantedAt - releasedAt)} ms after the release`);
  await got.release();
  assert.deepEqual(await leftover(), []);
});

test('close() leaves a passed-in Cluster open and closes the one it opened', async () => {
  const mine = new Redis.Cluster([{ host: '127.0.0.1', port: cluster.nodes[2].port }]);
  const a = await lockgate.connect(mine);
  // The cluster form of the URL (the same as `redis://` with `cluster: true`, as byUrl is made).
  const b = await lockgate.connect(`redis+cluster://127.0.0.1:${cluster.nodes[2].port}`);
  assert.equal(b.capabilities.backend, 'Redis Cluster');
  assert.equal(b.capabilities.scheme, 'redis+cluster');
  assert.deepEqual(a.capabilities, b.capabilities, 'a passed-in Cluster is a Redis Cluster client too');
  const la = await a.lock(names[0]).acquire({ timeoutMs: 5000 });
  const waiting = b.lock(names[0]).acquire({ timeoutMs: 5000 });
  await sleep(100);
  await a.close();
  assert.equal(la.signal.aborted, true, 'close() released the lease');
  assert.ok(la.signal.reason instanceof lockgate.ClosedError);
  const lb = await waiting;
  assert.equal(await mine.set('lockgate-test:{still-open}', '1'), 'OK', 'the caller still uses its Cluster');
  await mine.del('lockgate-test:{still-open}');
  await b.close();
  await assert.rejects(lb.release(), lockgate.ClosedError);
  assert.throws(() => b.lock('x'), lockgate.ClosedError);
  await mine.quit();
  assert.deepEqual(await leftover(), []);
});

test('cluster options are checked before any network call', async () => {
  const invalid = (e) => {
    assert.ok(e instanceof lockgate.InvalidArgumentError, `${e && e.name}: ${e && e.message}`);
    assert.equal(e.code, 'INVALID_ARGUMENT');
    return true;
  };
  const acks = { replicas: 1, timeoutMs: 100 };
  await assert.rejects(lockgate.connect(cluster.url, { cluster: true, replicaAcks: acks }), (e) => {
    invalid(e);
    assert.match(e.message, /replicaAcks is not supported on a Redis Cluster/);
    return true;
  });
  await assert.rejects(lockgate.connect(ioCluster, { replicaAcks: acks }), invalid);
  await assert.rejects(lockgate.connect(ioCluster, { cluster: true }), invalid);
  await assert.rejects(lockgate.connect(cluster.url, { cluster: 'yes' }), invalid);
  await assert.rejects(lockgate.connect(`${cluster.url}/3`, { cluster: true }), invalid);
  await assert.rejects(lockgate.connect(`${cluster.url.replace('redis:', 'redis+cluster:')}/3`), invalid);
  await assert.rejects(lockgate.connect(cluster.url.replace('redis:', 'redis+cluster:'), { replicaAcks: acks }), invalid);
});

test('an unreachable cluster seed is a ConnectionError; a wrong password never shows', async () => {
  const port = await freePort();
  await assert.rejects(lockgate.connect(`redis://:sekrit-pw@127.0.0.1:${port}`, { cluster: true, connectTimeoutMs: 500 }), (e) => {
    assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
    assert.equal(e.retryable, true);
    assert.ok(!e.message.includes('sekrit-pw'), e.message);
    return true;
  });
});

test('a process using a cluster client exits by itself once its locks are released', async () => {
  for (const mode of ['release', 'using', 'semaphore']) {
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'exit-script.js'), cluster.url, mode, 'cluster'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const [code, signal] = await new Promise((resolve) => child.on('exit', (c, s) => resolve([c, s])));
    clearTimeout(timer);
    assert.equal(signal, null, `${mode}: the process had to be killed; stderr: ${err}`);
    assert.equal(code, 0, err);
    assert.equal(out, 'done\n');
  }
  assert.deepEqual(await leftover('lockgate:{exit-*'), []);
});
