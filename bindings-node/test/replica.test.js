'use strict';
// The replica-acknowledged mode (`replicaAcks`, PROTOCOL.md §4) against a real primary with one
// replica started by this file: grants count only once WAIT confirms them; with the replica
// paused (SIGSTOP) nothing is granted and nothing is left behind on the primary.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const lockgate = require('..');
const { startPrimaryReplica, eventually, sleep } = require('./helpers/redis-server');

let servers;
let primary;
const clients = [];

async function newClient(options) {
  const c = await lockgate.connect(primary.url, options);
  clients.push(c);
  return c;
}

before(async () => {
  servers = await startPrimaryReplica();
  primary = servers.primary;
});

after(async () => {
  // Never leave the replica stopped, even when a test failed half-way.
  process.kill(servers.replica.pid, 'SIGCONT');
  for (const c of clients) await c.close();
  await servers.stop();
});

/** How many WAIT commands the primary has run. */
async function waits() {
  const m = /cmdstat_wait:calls=(\d+)/.exec(await primary.admin.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

async function nothingLeft(name) {
  const keys = (await primary.admin.keys(`lockgate:{${name}}*`)).filter((k) => !k.endsWith(':fence'));
  assert.deepEqual(keys, [], `nothing of ${name} left on the primary`);
}

const ACKS = { replicaAcks: { replicas: 1, timeoutMs: 300 } };

test('a grant confirmed by the replica: acquire, renewals and release go through WAIT', async () => {
  const client = await newClient(ACKS);
  const before = await waits();
  const lock = client.lock('acked', { leaseMs: 600 });
  const lease = await lock.acquire({ timeoutMs: 5000 });
  assert.ok(lease.fencingToken > 0n);
  assert.ok((await waits()) > before, 'the grant waited for the replica');
  assert.equal(await servers.replica.admin.get('lockgate:{acked}'), await primary.admin.get('lockgate:{acked}'), 'the replica has the grant');
  const afterGrant = await waits();
  await sleep(1500); // two and a half leases: renewals, each confirmed by WAIT
  assert.ok(lease.isHeld);
  assert.equal(lease.signal.aborted, false);
  assert.ok((await waits()) >= afterGrant + 2, 'renewals waited for the replica');
  assert.equal(await lease.release(), true);
  await nothingLeft('acked');
});

test('a contended handoff in the replica-acknowledged mode', async () => {
  const a = await newClient(ACKS);
  const b = await newClient(ACKS);
  const held = await a.lock('acked-handoff').acquire({ timeoutMs: 5000 });
  const waiting = b.lock('acked-handoff').acquire({ timeoutMs: 5000 });
  await eventually(async () => (await primary.admin.zcard('lockgate:{acked-handoff}:queue')) === 1, 3000, 'the waiter queued');
  const t0 = performance.now();
  await held.release();
  const got = await waiting;
  assert.ok(performance.now() - t0 < 1500, 'handed off promptly');
  assert.ok(got.fencingToken > held.fencingToken);
  assert.equal(await servers.replica.admin.exists('lockgate:{acked-handoff}'), 1, 'the replica has the handoff');
  await got.release();
  await nothingLeft('acked-handoff');
});

test('more replicas than exist: the grant is never confirmed, undone, and reported retryable', async () => {
  const client = await newClient({ replicaAcks: { replicas: 2, timeoutMs: 200 } });
  await assert.rejects(client.lock('acked-two').tryAcquire(), (e) => {
    assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
    assert.equal(e.retryable, true);
    return true;
  });
  await eventually(async () => (await primary.admin.exists('lockgate:{acked-two}')) === 0, 2000, 'the grant undone');
  await nothingLeft('acked-two');
});

test('with the replica paused, acquires fail (connection/timeout class) and leave no lock key', async () => {
  const client = await newClient(ACKS);
  const plain = await newClient();
  const pid = servers.replica.pid;
  // The replica is in sync before it stops.
  await (await client.lock('paused').acquire({ timeoutMs: 5000 })).release();
  process.kill(pid, 'SIGSTOP');
  try {
    await assert.rejects(client.lock('paused').tryAcquire(), (e) => {
      assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
      assert.equal(e.retryable, true);
      return true;
    });
    await eventually(async () => (await primary.admin.exists('lockgate:{paused}')) === 0, 2000, 'the one-shot grant undone');
    await nothingLeft('paused');

    const t0 = performance.now();
    await assert.rejects(client.lock('paused').acquire({ timeoutMs: 1200 }), (e) => {
      assert.ok(e instanceof lockgate.LockError, String(e));
      assert.ok(['TIMEOUT', 'CONNECTION'].includes(e.code), `${e.code}: ${e.message}`);
      assert.equal(e.retryable, true);
      return true;
    });
    assert.ok(performance.now() - t0 >= 1100, 'it kept trying for its whole wait');
    await eventually(async () => (await primary.admin.exists('lockgate:{paused}')) === 0, 2000, 'the waiting grant undone');
    await nothingLeft('paused');

    // Without replicaAcks the same primary grants at once: the mode is what refused.
    const unacked = await plain.lock('paused').acquire({ timeoutMs: 1000 });
    await unacked.release();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  const lease = await client.lock('paused').acquire({ timeoutMs: 5000 });
  assert.ok(lease.isHeld, 'granted again once the replica is back');
  await lease.release();
  await nothingLeft('paused');
});

test('replicaAcks is validated before any network call', async () => {
  const invalid = (e) => {
    assert.ok(e instanceof lockgate.InvalidArgumentError, `${e && e.name}: ${e && e.message}`);
    assert.equal(e.code, 'INVALID_ARGUMENT');
    return true;
  };
  for (const replicaAcks of [
    { replicas: 0, timeoutMs: 100 },
    { replicas: 1.5, timeoutMs: 100 },
    { replicas: '1', timeoutMs: 100 },
    { timeoutMs: 100 },
    {},
    { replicas: 1, timeoutMs: 0 },
    { replicas: 1, timeoutMs: NaN },
    { replicas: 1, timeoutMs: 100, timeout: 5 },
    { replicas: 1, timeoutMs: 5000 }, // not below the default 5000 ms command timeout
    'x',
    [1, 100],
  ]) {
    await assert.rejects(lockgate.connect(primary.url, { replicaAcks }), invalid, JSON.stringify(replicaAcks));
  }
  await assert.rejects(lockgate.connect(primary.url, { replicaAcks: { replicas: 1, timeoutMs: 900 }, commandTimeoutMs: 900 }), invalid);
  // A replica count alone waits the core's default 1000 ms, as in Python and Java (issue 14):
  // so it must stay below the command timeout too.
  await assert.rejects(
    lockgate.connect(primary.url, { replicaAcks: { replicas: 1 }, commandTimeoutMs: 1000 }),
    (e) => invalid(e) && e.message === 'replicaAcks.timeoutMs (1000 ms) must be below commandTimeoutMs (1000 ms)',
  );
  const defaulted = await lockgate.connect(primary.url, { replicaAcks: { replicas: 1 } });
  await (await defaulted.lock('acked-default').acquire({ timeoutMs: 5000 })).release();
  await defaulted.close();
  const io = new Redis(primary.port, '127.0.0.1', { commandTimeout: 400, lazyConnect: true });
  await assert.rejects(lockgate.connect(io, { replicaAcks: { replicas: 1, timeoutMs: 500 } }), invalid);
  const ok = await lockgate.connect(io, { replicaAcks: { replicas: 1, timeoutMs: 300 } });
  await (await ok.lock('acked-io').acquire({ timeoutMs: 5000 })).release();
  await ok.close();
  io.disconnect();
  await nothingLeft('acked-io');
});
