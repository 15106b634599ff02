'use strict';
// Handing a lease to another process from Node (issue 25, PROTOCOL.md §17): lease.identity() and
// client.adopt(identity, { leaseMs, autoRenew }) against a real redis-server, and the README's
// migration row for redis-py's Lock(token=...). The cross-language and per-backend cases are the
// conformance scenario adopt_lease.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { redisForFile } = require('./helpers/redis-server');

const newClient = redisForFile();

test('an adopted lease is the same hold; the exporter sees its release; stale and malformed identities fail', async () => {
  const a = await newClient();
  const b = await newClient();
  const held = await a.lock('adopt', { leaseMs: 900 }).acquire();
  const identity = held.identity();
  assert.equal(typeof identity, 'string');
  const adopted = await b.adopt(identity, { leaseMs: 900 });
  assert.equal(adopted.fencingToken, held.fencingToken, 'no second grant');
  assert.equal(await b.lock('adopt').tryAcquire(), null);
  await adopted.extend(5000);
  assert.equal(await adopted.release(), true);
  await new Promise((resolve) => held.signal.addEventListener('abort', resolve, { once: true }));
  assert.equal(held.signal.reason.code, 'NOT_HELD');
  assert.equal(await held.release(), false);
  await assert.rejects(b.adopt(identity), (e) => e.code === 'NOT_HELD');
  for (const bad of ['', 'lockgate-lease/1/mutex/1/not a token/x', 42]) {
    await assert.rejects(async () => b.adopt(bad), (e) => e.code === 'INVALID_ARGUMENT');
  }
  assert.throws(() => held.identity(), (e) => e.code === 'NOT_HELD');
});

test("redis-py's Lock(token=...) migration row: a semaphore permit handed over", async () => {
  const worker = await newClient();
  const other = await newClient();
  const lease = await worker.semaphore('job-slots', 2).acquire();
  const same = await other.adopt(lease.identity());
  assert.equal(same.fencingToken, lease.fencingToken);
  assert.equal(await same.release(), true);
  assert.equal(await lease.release(), false);
});
