'use strict';
// Breaking a lock from Node (issue 25): client.breakLock(name, { token, kind }) against a real
// redis-server — what it returns, the next waiter woken with a larger token, the broken holder's
// loss signal and release, a stale token, bad input; Redisson's forceUnlock() row of the README's
// migration table. The cross-language and per-backend cases are the conformance scenarios break_*.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { redisForFile } = require('./helpers/redis-server');

const newClient = redisForFile();

test('breakLock removes the holder, wakes the next waiter, and the broken holder learns of its loss', async () => {
  const a = await newClient('node-brk-a');
  const b = await newClient('node-brk-b');
  const ops = await newClient('node-brk-ops');
  const held = await a.lock('jobs', { leaseMs: 900 }).acquire();
  const next = b.lock('jobs').acquire({ timeoutMs: 5000 });
  await new Promise((r) => setTimeout(r, 200));
  const broken = await ops.breakLock('jobs');
  assert.equal(broken.label, 'node-brk-a');
  assert.equal(BigInt(broken.fencingToken), held.fencingToken);
  const granted = await next;
  assert.ok(granted.fencingToken > held.fencingToken);
  await new Promise((resolve) => {
    if (held.signal.aborted) resolve();
    else held.signal.addEventListener('abort', resolve);
  });
  assert.ok(held.signal.reason instanceof lockgate.NotHeldError);
  assert.equal(await held.release(), false);
  assert.equal(await granted.release(), true);
  assert.equal(await ops.breakLock('jobs'), null);
});

test('a stale token breaks nothing; the current one breaks its holder (Redisson forceUnlock)', async () => {
  const a = await newClient('node-stale-a');
  const ops = await newClient('node-stale-ops');
  const first = await a.lock('stale').acquire();
  assert.equal(await first.release(), true);
  const second = await a.lock('stale').acquire();
  assert.equal(await ops.breakLock('stale', { token: first.fencingToken }), null);
  assert.equal(await a.lock('stale').isLocked(), true);
  // Redisson's lock.forceUnlock(): break whoever holds it.
  assert.equal(BigInt((await ops.breakLock('stale', { token: second.fencingToken })).fencingToken), second.fencingToken);
  assert.equal(await a.lock('stale').isLocked(), false);
  assert.equal(await second.release(), false);
});

test('bad input is INVALID_ARGUMENT and changes nothing', async () => {
  const ops = await newClient('node-bad-ops');
  await assert.rejects(ops.breakLock(''), lockgate.InvalidArgumentError);
  await assert.rejects(ops.breakLock('x', { token: -1 }), lockgate.InvalidArgumentError);
  await assert.rejects(ops.breakLock('x', { token: 'abc' }), lockgate.InvalidArgumentError);
  await assert.rejects(ops.breakLock('x', { kind: 'table' }), lockgate.InvalidArgumentError);
});
