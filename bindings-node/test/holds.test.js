'use strict';
// A lock's shortest and longest hold from Node (`minHoldMs` / `maxHoldMs`, issue 26), against a
// real redis-server: the options' shapes and messages. Every backend and binding mix is the
// conformance scenarios min_hold_outlives_release, max_hold_ends_lease, min_hold_unsupported.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { redisForFile } = require('./helpers/redis-server');

const newClient = redisForFile();

test('minHoldMs keeps the lock on the server after release; maxHoldMs ends the lease', async () => {
  const a = await newClient();
  const b = await newClient();
  assert.equal(a.capabilities.minHold, true);
  const held = a.lock('nhold', { minHoldMs: 500 });
  assert.equal(held.options.minHoldMs, 500);
  const granted = Date.now();
  const lease = await held.acquire();
  assert.equal(await lease.release(), true);
  assert.equal(await b.lock('nhold').tryAcquire(), null, 'held on the server until minHoldMs');
  const late = await b.lock('nhold').acquire({ timeoutMs: 5000 });
  assert.ok(Date.now() - granted >= 500);
  assert.ok(late.fencingToken > lease.fencingToken);
  await late.release();

  const capped = await a.lock('nmax', { leaseMs: 300, autoRenew: true, maxHoldMs: 500 }).acquire();
  const next = await b.lock('nmax').acquire({ timeoutMs: 5000 });
  assert.equal(capped.isHeld, false);
  assert.ok(capped.signal.aborted);
  assert.equal(capped.signal.reason.code, 'NOT_HELD');
  assert.match(capped.signal.reason.message, /max_hold/);
  await next.release();
});

test('bad holds are InvalidArgumentError naming the option in ms', async () => {
  const a = await newClient();
  for (const [options, message] of [
    [{ minHoldMs: 5 }, /^minHoldMs must be at least 10 ms, got 5 ms/],
    [{ maxHoldMs: -1 }, /^maxHoldMs must not be negative/],
    [{ minHoldMs: 900, maxHoldMs: 300 }, /^minHoldMs \(900 ms\) must not be longer than maxHoldMs \(300 ms\)/],
    [{ minHoldMs: 'soon' }, /^minHoldMs must be a number of milliseconds/],
  ]) {
    assert.throws(() => a.lock('nbad', options), (e) => e instanceof lockgate.InvalidArgumentError && message.test(e.message));
  }
});
