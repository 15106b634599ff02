'use strict';
// Semaphores, read-write locks, elections and reentrant locks through the public API, against a
// real redis-server (PROTOCOL.md §7).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { startRedis, eventually, sleep } = require('./helpers/redis-server');

let redis;
let client;
const clients = [];

async function newClient() {
  const c = await lockgate.connect(redis.url);
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

const key = (name, kind, part) => `lockgate:{${name}}:${kind}:${part}`;

/** Every key of `name` but the fence counters (kept on purpose, PROTOCOL.md §5). */
async function liveKeys(name) {
  const keys = await redis.admin.keys(`lockgate:{${name}}*`);
  return keys.filter((k) => !k.endsWith(':fence')).sort();
}

const isInvalid = (e) => e instanceof lockgate.InvalidArgumentError && e.code === 'INVALID_ARGUMENT';

test('semaphore: permits, tryAcquire, FIFO waiters and fencing tokens within one client and across clients', async () => {
  const other = await newClient();
  const sem = client.semaphore('sem', 2, { leaseMs: 5000 });
  assert.equal(sem.kind, 'semaphore');
  assert.equal(sem.permits, 2);
  assert.equal(sem.reentrant, false);
  const a = await sem.acquire();
  const b = await other.semaphore('sem', 2).acquire();
  assert.ok(b.fencingToken > a.fencingToken);
  assert.equal(await redis.admin.zcard(key('sem', 'sem', 'holders')), 2);
  // Other holders use handles of their own (a handle holding a permit refuses to wait for itself).
  assert.equal(await client.semaphore('sem', 2).tryAcquire(), null, 'both permits are taken');
  const waiting = client.semaphore('sem', 2).acquire({ timeoutMs: 5000 });
  await eventually(async () => (await redis.admin.zcard(key('sem', 'sem', 'queue'))) === 1, 2000, 'queued');
  assert.equal(await a.release(), true);
  const c = await waiting;
  assert.ok(c.fencingToken > b.fencingToken);
  assert.equal(c.isHeld, true);
  await assert.rejects(sem.acquire({ timeoutMs: 100 }), lockgate.TimeoutError);
  assert.equal(await b.release(), true);
  assert.equal(await c.release(), true);
  assert.deepEqual(await liveKeys('sem'), []);
});

test('read-write lock: readers overlap, a writer excludes everyone, a queued writer blocks new readers', async () => {
  const other = await newClient();
  const rw = client.readWriteLock('doc');
  assert.equal(rw.name, 'doc');
  assert.equal(rw.writersFirst, true);
  assert.equal(rw.readLock.kind, 'read');
  assert.equal(rw.writeLock.kind, 'write');
  const r1 = await rw.readLock.acquire();
  const r2 = await other.readWriteLock('doc').readLock.acquire({ timeoutMs: 1000 });
  assert.equal(r1.isHeld && r2.isHeld, true, 'two readers at once');
  assert.equal(await rw.writeLock.tryAcquire(), null, 'no writer beside readers');

  let written = false;
  const writer = other.readWriteLock('doc').writeLock.acquire({ timeoutMs: 10_000 }).then((l) => {
    written = true;
    return l;
  });
  await eventually(async () => (await redis.admin.zcard(key('doc', 'rw', 'queue'))) === 1, 2000, 'writer queued');
  assert.equal(await client.readWriteLock('doc').readLock.tryAcquire(), null, 'a queued writer blocks new readers');
  // Every client of one name must agree on writersFirst (the server records it while in use).
  const barging = client.readWriteLock('doc', { writersFirst: false });
  assert.equal(barging.writersFirst, false);
  await assert.rejects(barging.readLock.tryAcquire(), lockgate.InvalidArgumentError, 'a different writersFirst is refused');
  assert.equal(await redis.admin.zcard(key('doc', 'rw', 'queue')), 1, 'and queues nothing');
  const r3 = await other.readWriteLock('doc').readLock.acquire({ timeoutMs: 50 }).catch((e) => e);
  assert.ok(r3 instanceof lockgate.TimeoutError, 'a waiting reader stays behind the queued writer');
  await r1.release();
  await sleep(50);
  assert.equal(written, false, 'the writer waits for the last reader');
  await r2.release();
  const w = await writer;
  assert.ok(w.fencingToken > 0n && w.isHeld);
  assert.equal(await rw.readLock.tryAcquire(), null, 'no reader beside the writer');
  assert.equal(await rw.writeLock.tryAcquire(), null, 'no second writer');
  assert.equal(await w.release(), true);
  const after = await rw.writeLock.acquire({ timeoutMs: 1000 });
  assert.ok(after.fencingToken > w.fencingToken, 'write tokens increase');
  await after.release();
  assert.deepEqual(await liveKeys('doc'), []);
});

test('election: one leader, observe shows value and term, resign hands over with a larger term', async () => {
  const other = await newClient();
  const election = client.election('leader', { leaseMs: 2000 });
  assert.equal(election.name, 'leader');
  assert.equal(await election.observe(), null, 'nobody leads yet');
  const a = await election.campaign('node-a');
  assert.ok(a instanceof lockgate.Leadership && a instanceof lockgate.Lease);
  assert.equal(a.term, a.fencingToken);
  assert.equal(a.value, 'node-a');
  assert.equal(a.election, election);
  const seen = await other.election('leader').observe();
  assert.equal(seen.value, 'node-a');
  assert.equal(typeof seen.term, 'bigint');
  assert.equal(seen.term, a.term);
  assert.ok(seen.remainingMs > 1000 && seen.remainingMs <= 2000, `remainingMs ${seen.remainingMs}`);

  assert.equal(await other.election('leader').tryCampaign('node-x'), null, 'one leader at a time');
  let bLeads = false;
  const b = other.election('leader').campaign('node-b', { timeoutMs: 10_000 }).then((l) => {
    bLeads = true;
    return l;
  });
  await eventually(async () => (await redis.admin.zcard(key('leader', 'elect', 'queue'))) === 1, 2000, 'candidate queued');
  await sleep(50);
  assert.equal(bLeads, false, 'the candidate waits while a leads');
  assert.equal((await election.observe()).value, 'node-a');
  assert.equal(await a.resign(), true);
  const lb = await b;
  assert.ok(lb.term > a.term, 'the next term is larger');
  const now = await election.observe();
  assert.deepEqual([now.value, now.term], ['node-b', lb.term]);
  assert.equal(await lb.release(), true);
  assert.equal(await election.observe(), null);
  const candidate = election.candidate('node-c');
  assert.ok(candidate instanceof lockgate.Candidate && candidate instanceof lockgate.Lock);
  assert.deepEqual([candidate.kind, candidate.value, candidate.election], ['leader', 'node-c', election]);
  const term = await candidate.using(async (l) => {
    assert.equal((await election.observe()).value, 'node-c');
    return l.term;
  });
  assert.ok(term > lb.term);
  assert.deepEqual(await liveKeys('leader'), []);
});

test('election: the loss signal fires when the holders key is deleted', async () => {
  const leadership = await client.election('lossy', { leaseMs: 600 }).campaign('me');
  const lost = new Promise((resolve) => leadership.signal.addEventListener('abort', resolve, { once: true }));
  await redis.admin.del(key('lossy', 'elect', 'holders'));
  const t0 = performance.now();
  await lost;
  assert.ok(performance.now() - t0 < 1000, 'within about a third of the lease');
  assert.ok(leadership.signal.reason instanceof lockgate.NotHeldError);
  assert.equal(leadership.isHeld, false);
  assert.equal(await client.election('lossy').observe(), null);
  assert.equal(await leadership.release(), false);
});

test('reentrant lock: the handle re-enters its lease and counts holds', async () => {
  const other = await newClient();
  const lock = client.lock('re', { reentrant: true });
  assert.equal(lock.reentrant, true);
  const outer = await lock.acquire();
  const inner = await lock.acquire({ timeoutMs: 0 });
  const third = await lock.tryAcquire();
  assert.equal(inner.fencingToken, outer.fencingToken);
  assert.equal(third.fencingToken, outer.fencingToken);
  assert.equal(inner.signal, outer.signal, 'one loss signal for the one lease');
  assert.equal(await third.release(), true);
  assert.equal(await inner.release(), true);
  assert.equal(await inner.release(), false, 'a hold is given back once');
  assert.equal(inner.isHeld, false, 'a released hold is not held');
  assert.equal(outer.isHeld, true);
  assert.equal(await other.lock('re').tryAcquire(), null, 'still held after the inner releases');
  assert.equal(await outer.release(), true);
  const p = await other.lock('re').tryAcquire();
  assert.ok(p, 'free after the last release');
  await p.release();
  const again = await lock.acquire({ timeoutMs: 1000 });
  assert.ok(again.fencingToken > outer.fencingToken, 'after the last release the handle acquires afresh');
  await again.release();

  const plain = client.lock('re');
  const held = await plain.acquire();
  await assert.rejects(plain.tryAcquire(), lockgate.AlreadyHeldError, 'a plain handle does not re-enter');
  await held.release();

  const rw = client.readWriteLock('re-rw', { reentrant: true });
  assert.equal(rw.reentrant, true);
  const w1 = await rw.writeLock.acquire();
  const w2 = await rw.writeLock.acquire({ timeoutMs: 0 });
  assert.equal(w2.fencingToken, w1.fencingToken);
  assert.equal(await other.readWriteLock('re-rw').readLock.tryAcquire(), null);
  await w2.release();
  assert.equal(await other.readWriteLock('re-rw').readLock.tryAcquire(), null, 'one hold left');
  await w1.release();
  assert.deepEqual(await liveKeys('re'), []);
  assert.deepEqual(await liveKeys('re-rw'), []);
});

test('a reentrant lease that was lost is not re-entered', async () => {
  const lock = client.lock('re-lost', { reentrant: true, leaseMs: 600 });
  const first = await lock.acquire();
  await redis.admin.del('lockgate:{re-lost}');
  await eventually(() => first.signal.aborted, 2000, 'loss');
  const second = await lock.acquire({ timeoutMs: 1000 });
  assert.ok(second.fencingToken > first.fencingToken, 'a fresh lease');
  assert.equal(second.signal.aborted, false);
  await second.release();
});

test('aborting a pending acquire of any primitive leaves no keys behind', async () => {
  const other = await newClient();
  const cases = [
    ['ab-sem', 'sem', (c) => c.semaphore('ab-sem', 1)],
    ['ab-rw', 'rw', (c) => c.readWriteLock('ab-rw').writeLock],
    ['ab-rw2', 'rw', (c) => c.readWriteLock('ab-rw2').readLock, (c) => c.readWriteLock('ab-rw2').writeLock],
  ];
  for (const [name, kind, make, makeHolder = make] of cases) {
    const held = await makeHolder(client).acquire();
    const ctl = new AbortController();
    const pending = make(other).acquire({ signal: ctl.signal });
    await eventually(async () => (await redis.admin.zcard(key(name, kind, 'queue'))) === 1, 2000, `${name} queued`);
    ctl.abort(new Error('changed my mind'));
    await assert.rejects(pending, (e) => e instanceof lockgate.CancelledError && e.cause.message === 'changed my mind');
    await eventually(async () => (await redis.admin.zcard(key(name, kind, 'queue'))) === 0, 2000, `${name} dequeued`);
    await held.release();
    assert.deepEqual(await liveKeys(name), [], name);
  }
  const leader = await client.election('ab-el').campaign('a');
  const ctl = new AbortController();
  const pending = other.election('ab-el').campaign('b', { signal: ctl.signal });
  await eventually(async () => (await redis.admin.zcard(key('ab-el', 'elect', 'queue'))) === 1, 2000, 'candidate queued');
  ctl.abort();
  await assert.rejects(pending, lockgate.CancelledError);
  await leader.resign();
  await eventually(async () => (await liveKeys('ab-el')).length === 0, 2000, 'no election keys');
  const aborted = AbortSignal.abort();
  await assert.rejects(other.election('ab-el').campaign('c', { signal: aborted }), lockgate.CancelledError);
  assert.deepEqual(await liveKeys('ab-el'), []);
});

test('bad input is rejected with INVALID_ARGUMENT before any network call', async () => {
  for (const permits of [0, -1, 1.5, NaN, Infinity, 1_000_001, 2 ** 32, '2', undefined, null]) {
    assert.throws(() => client.semaphore('bad', permits), isInvalid, `permits ${String(permits)}`);
  }
  assert.throws(() => client.semaphore('', 1), isInvalid);
  assert.throws(() => client.semaphore('bad', 1, { reentrant: true }), isInvalid, 'semaphores are not reentrant');
  assert.throws(() => client.semaphore('bad', 1, { leaseMs: 0 }), isInvalid);
  assert.throws(() => client.readWriteLock('bad', { writersFirst: 'yes' }), isInvalid);
  assert.throws(() => client.readWriteLock('bad', { reentrant: 1 }), isInvalid);
  assert.throws(() => client.readWriteLock('bad', { writers_first: false }), isInvalid);
  assert.throws(() => client.lock('bad', { reentrant: 'true' }), isInvalid);
  assert.throws(() => client.election(''), isInvalid);
  assert.throws(() => client.election('bad', { reentrant: true }), isInvalid);
  const election = client.election('bad');
  await assert.rejects(election.campaign('x'.repeat(4097)), isInvalid);
  await assert.rejects(election.campaign('é'.repeat(2049)), isInvalid, '4098 bytes of UTF-8');
  await assert.rejects(election.tryCampaign(42), isInvalid);
  await assert.rejects(election.campaign('\ud800'), isInvalid);
  await assert.rejects(election.campaign('ok', { timeoutMs: -1 }), isInvalid);
  assert.throws(() => election.candidate('x'.repeat(4097)), isInvalid);
  const edge = await election.campaign('x'.repeat(4096), { timeoutMs: 1000 });
  assert.equal((await election.observe()).value.length, 4096);
  await edge.release();
  const e = await client.semaphore('bad', 1).acquire({ timeoutMs: -1 }).catch((err) => err);
  assert.ok(isInvalid(e));
  assert.deepEqual(await liveKeys('bad'), []);
});

test('closing the client releases permits and leadership and aborts their signals', async () => {
  const c = await lockgate.connect(redis.url);
  const permit = await c.semaphore('close-sem', 2).acquire();
  const election = c.election('close-el');
  const lead = await election.campaign('v');
  await c.close();
  assert.ok(permit.signal.reason instanceof lockgate.ClosedError);
  assert.ok(lead.signal.reason instanceof lockgate.ClosedError);
  assert.throws(() => c.semaphore('close-sem', 2), lockgate.ClosedError);
  assert.throws(() => c.election('x'), lockgate.ClosedError);
  await assert.rejects(election.observe(), lockgate.ClosedError);
  await assert.rejects(election.campaign('w'), lockgate.ClosedError);
  assert.deepEqual(await liveKeys('close-sem'), []);
  assert.deepEqual(await liveKeys('close-el'), []);
});
