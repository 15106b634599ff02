'use strict';
// A handle never waits for itself (issue 13, item 3): a non-reentrant handle that holds a live
// lease rejects acquire/tryAcquire/using at once with AlreadyHeldError, sending nothing; after
// release or loss it acquires again. And a lease whose acquire() result was dropped is never
// released by garbage collection: the handle keeps it (item 4).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const v8 = require('node:v8');
const vm = require('node:vm');
const lockgate = require('..');
const { startRedis, eventually, sleep } = require('./helpers/redis-server');

let redis;
let client;

before(async () => {
  redis = await startRedis();
  client = await lockgate.connect(redis.url);
});

after(async () => {
  await client.close();
  await redis.stop();
});

/** How many commands the server has run that are not the admin connection's INFO calls. */
async function commandsRun() {
  const stats = await redis.admin.info('commandstats');
  let total = 0;
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') total += Number(m[2]);
  }
  return total;
}

function isAlreadyHeld(e) {
  assert.ok(e instanceof lockgate.AlreadyHeldError, `${e && e.name}: ${e && e.message}`);
  assert.ok(e instanceof lockgate.LockError);
  assert.equal(e.code, 'ALREADY_HELD');
  assert.equal(e.retryable, false);
  return true;
}

/**
 * Through `handle` (holding `lease`): acquire, tryAcquire and using reject at once with
 * AlreadyHeldError and send no command; the lease is still held afterwards.
 */
async function refusesItself(handle, lease) {
  const before = await commandsRun();
  const t0 = performance.now();
  await assert.rejects(handle.acquire(), isAlreadyHeld);
  await assert.rejects(handle.acquire({ timeoutMs: 5000 }), isAlreadyHeld);
  await assert.rejects(handle.tryAcquire(), isAlreadyHeld);
  await assert.rejects(handle.using(async () => assert.fail('must not run')), isAlreadyHeld);
  const took = performance.now() - t0;
  assert.ok(took < 200, `rejected after ${took.toFixed(0)} ms`);
  assert.equal(await commandsRun(), before, 'nothing was sent');
  assert.equal(lease.isHeld, true, 'the lease is untouched');
  assert.equal(handle.lease, lease);
}

test('a mutex handle that holds its lock rejects acquire at once; after release or loss it acquires again', async () => {
  const lock = client.lock('held-mutex', { leaseMs: 5000 });
  assert.equal(lock.lease, null);
  const a = await lock.acquire();
  await refusesItself(lock, a);
  assert.match(
    await lock.tryAcquire().catch((e) => e.message),
    /already holds the lock "held-mutex" and is not reentrant/,
  );

  // Another handle on the same name waits as usual (it is another holder).
  assert.equal(await client.lock('held-mutex').tryAcquire(), null);

  assert.equal(await a.release(), true);
  assert.equal(lock.lease, null);
  const b = await lock.acquire({ timeoutMs: 1000 });
  assert.ok(b.fencingToken > a.fencingToken);

  // Lost (the key deleted behind it): the handle no longer holds it and acquires afresh.
  await redis.admin.del('lockgate:{held-mutex}');
  await eventually(async () => b.signal.aborted, 3000, 'the loss to be noticed');
  const c = await lock.acquire({ timeoutMs: 1000 });
  assert.ok(c.fencingToken > b.fencingToken);
  await c.release();
});

test('a release that has not completed yet already lets the handle acquire again', async () => {
  const lock = client.lock('held-releasing');
  const a = await lock.acquire();
  const releasing = a.release();
  const b = await lock.acquire({ timeoutMs: 2000 });
  assert.equal(await releasing, true);
  await b.release();
});

test('a semaphore handle holding a permit rejects another acquire through it; other handles take permits', async () => {
  const sem = client.semaphore('held-sem', 2, { leaseMs: 5000 });
  const a = await sem.acquire();
  await refusesItself(sem, a);
  const b = await client.semaphore('held-sem', 2).acquire({ timeoutMs: 1000 });
  assert.equal(b.isHeld, true, 'the second permit goes to another handle');
  await a.release();
  await b.release();
});

test('both halves of a read-write lock refuse a second lease through the same handle', async () => {
  const rw = client.readWriteLock('held-rw');
  const r = await rw.readLock.acquire();
  await refusesItself(rw.readLock, r);
  const r2 = await client.readWriteLock('held-rw').readLock.acquire({ timeoutMs: 1000 });
  await r.release();
  await r2.release();
  const w = await rw.writeLock.acquire();
  await refusesItself(rw.writeLock, w);
  await w.release();
});

test('a candidate that leads refuses to campaign again through itself', async () => {
  const candidate = client.election('held-election').candidate('me');
  const leadership = await candidate.acquire();
  await refusesItself(candidate, leadership);
  await leadership.resign();
});

test('acquires already waiting through a handle end with AlreadyHeldError once one of them wins, as natively', async () => {
  // A mutex: the other waits through the same handle are withdrawn when one is granted.
  const holder = await client.lock('held-race').acquire();
  const shared = client.lock('held-race');
  const waits = [0, 1, 2].map(() => shared.acquire({ timeoutMs: 10000 }).then((l) => l, (e) => e));
  await sleep(100);
  await holder.release();
  const ended = await Promise.all(waits);
  const won = ended.filter((r) => !(r instanceof Error));
  assert.equal(won.length, 1, `one winner: ${ended.map((r) => (r instanceof Error ? r.code : 'lease'))}`);
  for (const e of ended.filter((r) => r instanceof Error)) isAlreadyHeld(e);
  assert.equal(shared.lease, won[0]);
  await won[0].release();
  const next = await client.lock('held-race').tryAcquire();
  assert.ok(next, 'nothing was left queued or held by the withdrawn waits');
  await next.release();
  // A semaphore with free permits: two tries at once through one handle grant it one permit.
  const sem = client.semaphore('held-race-sem', 3, { leaseMs: 5000 });
  const tries = await Promise.all([sem.tryAcquire(), sem.tryAcquire()].map((p) => p.then((l) => l, (e) => e)));
  assert.equal(tries.filter((r) => r && !(r instanceof Error)).length, 1, `${tries}`);
  for (const e of tries.filter((r) => r instanceof Error)) isAlreadyHeld(e);
  await sem.lease.release();
  const others = [1, 2, 3].map(() => client.semaphore('held-race-sem', 3));
  const all = await Promise.all(others.map((h) => h.tryAcquire()));
  assert.ok(all.every((l) => l && l.isHeld), 'the refused grant was given back: three permits are free');
  await Promise.all(all.map((l) => l.release()));
});

test('a reentrant handle still re-enters instead', async () => {
  const lock = client.lock('held-reentrant', { reentrant: true });
  const outer = await lock.acquire();
  const inner = await lock.acquire();
  assert.equal(inner.fencingToken, outer.fencingToken);
  await inner.release();
  await outer.release();
});

test('a lease whose acquire() result was dropped is not released by garbage collection', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  const lock = client.lock('held-dropped', { leaseMs: 500 });
  // The redis-py habit: the result of acquire() is ignored.
  await (async () => {
    await lock.acquire();
  })();
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(10);
  }
  await sleep(1200); // more than two leases: only the watchdog keeps it
  assert.equal(await redis.admin.exists('lockgate:{held-dropped}'), 1, 'still held on the server');
  assert.equal(await client.lock('held-dropped').tryAcquire(), null, 'nobody else gets it');
  const kept = lock.lease;
  assert.ok(kept && kept.isHeld, 'the handle kept its lease');
  await assert.rejects(lock.acquire(), isAlreadyHeld);
  assert.equal(await kept.release(), true);
  assert.equal(await redis.admin.exists('lockgate:{held-dropped}'), 0);
});

test('concurrent async flows on one handle: the handle is one owner, and the refusal says so (issue 23, item 3)', async () => {
  // JavaScript cannot tell two flows from one flow acquiring twice, so a Node handle is one
  // owner: a second flow is refused at once rather than risking a wait for itself, and the
  // message names that case. Flows with a handle each wait their turn.
  const shared = client.lock('flows-shared');
  const lease = await shared.acquire();
  const t0 = performance.now();
  const e = await shared.acquire({ timeoutMs: 5000 }).then(() => assert.fail('refused'), (err) => err);
  isAlreadyHeld(e);
  assert.ok(performance.now() - t0 < 500);
  assert.match(e.message, /would wait for itself/);
  assert.match(e.message, /one owner for every async flow/);
  await lease.release();

  const order = [];
  let inside = 0;
  await Promise.all([0, 1, 2, 3, 4].map(async (i) => {
    const mine = client.lock('flows-shared');
    const l = await mine.acquire({ timeoutMs: 20000 });
    inside += 1;
    assert.equal(inside, 1, 'no two flows hold it at once');
    order.push(l.fencingToken);
    await sleep(5);
    inside -= 1;
    await l.release();
  }));
  assert.equal(order.length, 5);
  for (let i = 1; i < order.length; i++) assert.ok(order[i] > order[i - 1], `tokens increase: ${order}`);
});
