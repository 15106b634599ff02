'use strict';
// Lock behaviour through the public API against a real redis-server.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { getEventListeners, setMaxListeners } = require('node:events');
const Redis = require('ioredis');
const lockgate = require('..');
const { startRedis, eventually, sleep } = require('./helpers/redis-server');

let redis;
let client;
const clients = [];

async function newClient(options) {
  const c = await lockgate.connect(redis.url, options);
  clients.push(c);
  return c;
}

before(async () => {
  redis = await startRedis();
  client = await newClient();
});

after(async () => {
  for (const c of clients) await c.close();
  await redis.stop();
});

const keys = (name) => ({
  lock: `lockgate:{${name}}`,
  queue: `lockgate:{${name}}:queue`,
  waiters: `lockgate:{${name}}:waiters`,
});

/**
 * No waiter queued on `name`: nothing in the queue, and the waiters hash holds no waiter's entry
 * and no label but (at most) the holder's own `l:<token>` (PROTOCOL.md §12).
 */
async function queueIsEmpty(name) {
  const k = keys(name);
  const fields = await redis.admin.hkeys(k.waiters);
  const labels = fields.filter((f) => f.startsWith('l:'));
  return (await redis.admin.zcard(k.queue)) === 0 && labels.length === fields.length && labels.length <= 1;
}

test('acquire, isHeld, fencing token as bigint, release', async () => {
  const lock = client.lock('basic', { leaseMs: 5000 });
  assert.equal(lock.name, 'basic');
  assert.deepEqual(lock.options, {
    leaseMs: 5000,
    autoRenew: true,
    waitTimeoutMs: Infinity,
    entryTtlMs: 10000,
  });
  const a = await lock.acquire();
  assert.equal(typeof a.fencingToken, 'bigint');
  assert.ok(a.fencingToken > 0n);
  assert.equal(a.isHeld, true);
  assert.ok(a.remainingMs > 4000 && a.remainingMs <= 5000, `remainingMs ${a.remainingMs}`);
  assert.equal(a.signal.aborted, false);
  assert.equal(a.lock, lock);
  assert.equal(await redis.admin.exists(keys('basic').lock), 1);
  assert.equal(await a.release(), true);
  assert.equal(a.isHeld, false);
  assert.equal(a.remainingMs, 0);
  assert.equal(a.signal.aborted, false, 'a release is not a loss');
  assert.equal(await redis.admin.exists(keys('basic').lock), 0);
  assert.equal(await a.release(), false, 'releasing twice is harmless');
  const b = await lock.acquire();
  assert.ok(b.fencingToken > a.fencingToken, 'fencing tokens increase');
  await b.release();
});

test('a fixed lease expires: the holder learns it, a waiter gets the lock', async () => {
  const other = await newClient();
  const a = await client.lock('expiry', { leaseMs: 200, autoRenew: false }).acquire();
  const lost = new Promise((resolve) => a.signal.addEventListener('abort', resolve, { once: true }));
  const t0 = performance.now();
  const b = await other.lock('expiry').acquire({ timeoutMs: 3000 });
  assert.ok(performance.now() - t0 < 1500, 'the waiter was served around the expiry');
  await lost;
  assert.equal(a.isHeld, false);
  assert.ok(a.signal.reason instanceof lockgate.NotHeldError);
  assert.ok(b.fencingToken > a.fencingToken);
  await b.release();
});

test('extend never resurrects an expired or deleted lease', async () => {
  const a = await client.lock('resurrect', { leaseMs: 100, autoRenew: false }).acquire();
  await sleep(250);
  await assert.rejects(a.extend(5000), (e) => e instanceof lockgate.NotHeldError && e.code === 'NOT_HELD');
  assert.equal(await redis.admin.exists(keys('resurrect').lock), 0, 'extend did not recreate the key');

  const b = await client.lock('resurrect2', { leaseMs: 5000, autoRenew: false }).acquire();
  await redis.admin.del(keys('resurrect2').lock);
  await assert.rejects(b.extend(5000), lockgate.NotHeldError);
  assert.equal(await redis.admin.exists(keys('resurrect2').lock), 0, 'extend did not recreate the key');
  assert.equal(b.isHeld, false);
  assert.equal(b.signal.aborted, true, 'a refused extend is a loss');
});

test('the lease signal aborts when the key is deleted behind the holder', async () => {
  const a = await client.lock('deleted', { leaseMs: 300 }).acquire();
  const aborted = new Promise((resolve) => a.signal.addEventListener('abort', resolve, { once: true }));
  const t0 = performance.now();
  await redis.admin.del(keys('deleted').lock);
  await aborted;
  const took = performance.now() - t0;
  assert.ok(took < 1000, `loss noticed after ${took.toFixed(0)} ms (renewal every lease/3)`);
  assert.ok(a.signal.reason instanceof lockgate.NotHeldError);
  assert.equal(a.signal.reason.code, 'NOT_HELD');
  assert.equal(a.isHeld, false);
  assert.equal(await a.release(), false);
});

test('aborting a pending acquire rejects with CancelledError and leaves nothing queued', async () => {
  const holder = await client.lock('abort').acquire();
  const other = await newClient();
  const ctl = new AbortController();
  const pending = other.lock('abort').acquire({ signal: ctl.signal });
  await eventually(async () => (await redis.admin.zcard(keys('abort').queue)) === 1, 2000, 'queued');
  const reason = new Error('user gave up');
  ctl.abort(reason);
  await assert.rejects(pending, (e) => {
    assert.ok(e instanceof lockgate.CancelledError);
    assert.ok(e instanceof lockgate.LockError);
    assert.equal(e.code, 'CANCELLED');
    assert.equal(e.retryable, false);
    assert.equal(e.cause, reason);
    return true;
  });
  await eventually(() => queueIsEmpty('abort'), 2000, 'queue entry removed');
  assert.equal(getEventListeners(ctl.signal, 'abort').length, 0);
  // An already-aborted signal never reaches the server.
  await assert.rejects(other.lock('abort').acquire({ signal: ctl.signal }), lockgate.CancelledError);
  assert.ok(await queueIsEmpty('abort'));
  await holder.release();
  // The lock is free for others: nothing of the cancelled waiter was granted.
  const next = await other.lock('abort').tryAcquire();
  assert.ok(next);
  await next.release();
});

test('a timed-out acquire rejects with TimeoutError and leaves nothing queued', async () => {
  const holder = await client.lock('timeout').acquire();
  const other = await newClient();
  const ctl = new AbortController();
  const t0 = performance.now();
  await assert.rejects(other.lock('timeout').acquire({ timeoutMs: 200, signal: ctl.signal }), (e) => {
    assert.ok(e instanceof lockgate.TimeoutError);
    assert.equal(e.code, 'TIMEOUT');
    assert.equal(e.retryable, true);
    assert.equal(e.name, 'TimeoutError');
    return true;
  });
  const took = performance.now() - t0;
  assert.ok(took >= 190 && took < 1500, `timed out after ${took.toFixed(0)} ms`);
  assert.equal(getEventListeners(ctl.signal, 'abort').length, 0, 'no listener left on the signal');
  await eventually(() => queueIsEmpty('timeout'), 2000, 'queue entry removed');
  // A zero timeout is one attempt: a TimeoutError when held, a lease when free.
  await assert.rejects(other.lock('timeout').acquire({ timeoutMs: 0 }), lockgate.TimeoutError);
  const free = await other.lock('timeout-free').acquire({ timeoutMs: 0 });
  assert.equal(free.isHeld, true);
  await free.release();
  // The lock's default wait applies when acquire() has no timeoutMs.
  await assert.rejects(other.lock('timeout', { waitTimeoutMs: 100 }).acquire(), lockgate.TimeoutError);
  await holder.release();
});

test('many aborted waiters: one subscription per client, one channel, empty queue', async () => {
  const before = Number((await redis.admin.info('clients')).match(/connected_clients:(\d+)/)[1]);
  const c = await newClient();
  const holder = await client.lock('crowd').acquire();
  const ctl = new AbortController();
  setMaxListeners(40, ctl.signal); // one shared signal for many acquires is fine
  const waits = [];
  for (let i = 0; i < 30; i++) waits.push(c.lock('crowd').acquire({ signal: ctl.signal }));
  for (let i = 0; i < 10; i++) waits.push(c.lock(`crowd-${i}`).acquire()); // free locks, granted
  await eventually(async () => (await redis.admin.zcard(keys('crowd').queue)) === 30, 3000, 'queued');
  const conns = Number((await redis.admin.info('clients')).match(/connected_clients:(\d+)/)[1]);
  assert.equal(conns - before, 2, 'one command and one subscriber connection per client');
  ctl.abort();
  const results = await Promise.allSettled(waits);
  assert.equal(results.filter((r) => r.status === 'rejected').length, 30);
  for (const r of results.filter((r) => r.status === 'fulfilled')) await r.value.release();
  await eventually(() => queueIsEmpty('crowd'), 3000, 'queue empty');
  const channels = await redis.admin.pubsub('CHANNELS', 'lockgate:client:*');
  const counts = await redis.admin.pubsub('NUMSUB', ...channels);
  for (let i = 1; i < counts.length; i += 2) assert.equal(counts[i], 1);
  assert.equal(getEventListeners(ctl.signal, 'abort').length, 0);
  await holder.release();
});

test('using() releases after success and after a throw, and reports loss', async () => {
  const lock = client.lock('using', { leaseMs: 2000 });
  const value = await lock.using(async (lease) => {
    assert.equal(lease.isHeld, true);
    assert.ok(lease.signal instanceof AbortSignal);
    return 42;
  });
  assert.equal(value, 42);
  assert.equal(await redis.admin.exists(keys('using').lock), 0);

  const boom = new Error('boom');
  await assert.rejects(lock.using(async () => {
    throw boom;
  }), (e) => e === boom);
  assert.equal(await redis.admin.exists(keys('using').lock), 0, 'released after a throw');

  await assert.rejects(
    client.lock('using2', { leaseMs: 100, autoRenew: false }).using(() => sleep(300)),
    lockgate.NotHeldError,
  );
});

test('Symbol.asyncDispose releases a lease and closes a client', { skip: typeof Symbol.asyncDispose !== 'symbol' }, async () => {
  const c = await lockgate.connect(redis.url);
  const lease = await c.lock('dispose').acquire();
  await lease[Symbol.asyncDispose]();
  assert.equal(lease.isHeld, false);
  assert.equal(await redis.admin.exists(keys('dispose').lock), 0);
  await c.lock('dispose').acquire();
  await c[Symbol.asyncDispose]();
  assert.equal(c.closed, true);
  assert.equal(await redis.admin.exists(keys('dispose').lock), 0, 'close released the lease');
});

test('close() releases leases, cancels waits, aborts lease signals, then fails with ClosedError', async () => {
  const c = await lockgate.connect(redis.url);
  const lease = await c.lock('close-held').acquire();
  const holder = await client.lock('close-wait').acquire();
  const pending = c.lock('close-wait').acquire();
  const cancelled = assert.rejects(pending, lockgate.CancelledError);
  await eventually(async () => (await redis.admin.zcard(keys('close-wait').queue)) === 1, 2000, 'queued');
  await c.close();
  await cancelled;
  assert.equal(await redis.admin.exists(keys('close-held').lock), 0, 'close released the lease');
  assert.ok(await queueIsEmpty('close-wait'));
  assert.equal(lease.signal.aborted, true);
  assert.ok(lease.signal.reason instanceof lockgate.ClosedError);
  assert.equal(lease.isHeld, false);
  assert.throws(() => c.lock('x'), lockgate.ClosedError);
  await assert.rejects(lease.release(), (e) => e instanceof lockgate.ClosedError && e.code === 'CLOSED');
  await c.close(); // twice is fine
  await holder.release();
});

test('an existing ioredis client can be passed in and is left open by close()', async () => {
  const own = new Redis(redis.port, '127.0.0.1');
  const c = await lockgate.connect(own, { keyPrefix: 'app:' });
  const lease = await c.lock('byo').acquire();
  assert.equal(await redis.admin.exists('app:{byo}'), 1, 'keyPrefix applies');
  const other = await newClient({ keyPrefix: 'app:' });
  const waiter = other.lock('byo').acquire();
  await lease.release();
  await (await waiter).release();
  await c.close();
  assert.equal(await own.ping(), 'PONG', 'the caller still owns its client');
  own.disconnect();
});

test('the engine recovers when the subscriber connection is killed', async () => {
  const c = await newClient();
  const holder = await client.lock('resub').acquire();
  const waiter = c.lock('resub').acquire({ timeoutMs: 10_000 });
  await eventually(async () => (await redis.admin.zcard(keys('resub').queue)) === 1, 2000, 'queued');
  // Kill every pub/sub connection of the server (ours and others'); ioredis reconnects.
  await redis.admin.client('KILL', 'TYPE', 'pubsub');
  await sleep(100);
  await holder.release();
  const got = await waiter;
  assert.equal(got.isHeld, true);
  await got.release();
});

test('a lease survives a killed command connection (renewed after the reconnect)', async () => {
  const c = await newClient();
  const lease = await c.lock('cmdkill', { leaseMs: 900 }).acquire();
  // Kills every normal connection but the admin's own (SKIPME); ioredis reconnects.
  await redis.admin.client('KILL', 'TYPE', 'normal');
  await sleep(1300); // longer than the lease: only renewals after the reconnect keep it
  assert.equal(lease.isHeld, true);
  assert.equal(lease.signal.aborted, false);
  assert.ok((await redis.admin.pttl('lockgate:{cmdkill}')) > 0);
  assert.equal(await lease.release(), true);
});
