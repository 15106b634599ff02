'use strict';
// Inspecting a lock from Node (issue 25): the snapshot's JavaScript shape, isLocked(), by name
// and through handles, against a real redis-server. The cross-language and per-backend cases
// are the conformance scenarios inspect_*.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { redisForFile } = require('./helpers/redis-server');

const newClient = redisForFile();

test('inspect shows the holder with its label, token and lease, and this client\'s holds', async () => {
  const a = await newClient('node-a');
  const b = await newClient('node-b');
  assert.deepEqual(await b.inspect('orders'), { kind: 'mutex', locked: false, holders: [], waiters: [], permits: null, remainingMs: null });
  const lock = a.lock('orders', { reentrant: true });
  assert.equal(await lock.isLocked(), false);
  const lease = await lock.acquire();
  const again = await lock.acquire();
  const s = await b.inspect('orders');
  const [h] = s.holders;
  assert.equal(h.label, 'node-a');
  assert.equal(BigInt(h.fencingToken), BigInt(lease.fencingToken));
  assert.equal(h.mode, 'exclusive');
  assert.equal(h.holds, null);
  assert.ok(h.remainingMs > 0 && h.remainingMs <= 30000 && h.heldForMs >= 0);
  assert.equal((await lock.inspect()).holders[0].holds, 2);
  assert.equal(await b.lock('orders').isLocked(), true);
  await again.release();
  await lease.release();
  assert.equal(await b.lock('orders').isLocked(), false);
  await assert.rejects(b.inspect('orders', 'table'), (e) => e.code === 'INVALID_ARGUMENT');
  await assert.rejects(b.inspect(''), (e) => e.code === 'INVALID_ARGUMENT');
});

test('a read-write lock and an election inspect as wholes', async () => {
  const c = await newClient('node-c');
  const rw = c.readWriteLock('doc');
  const r = await rw.readLock.acquire();
  const s = await rw.inspect();
  assert.deepEqual([s.kind, s.holders.map((h) => h.mode)], ['rw', ['shared']]);
  await r.release();
  const e = c.election('svc');
  const leader = await e.campaign('10.0.0.1:80');
  assert.equal((await e.inspect()).holders[0].value, '10.0.0.1:80');
  await leader.release();
});
