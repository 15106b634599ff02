'use strict';
// Telemetry (issue 27): the core's events on diagnostics_channel, checked with a subscriber as
// a user writes one — a contended lock with a waiter, a timed-out wait and a lease lost to a
// key deleted behind its holder, on a password-protected server whose password must appear in
// no event.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const dc = require('node:diagnostics_channel');
const lockgate = require('..');
const { startRedis, sleep } = require('./helpers/redis-server');

const PASSWORD = 'tel-Hq2-secret-7w';
let redis;

before(async () => {
  redis = await startRedis(['--requirepass', PASSWORD]);
});

after(async () => {
  await redis.stop();
});

/** Subscribes to every lockgate channel; returns the events seen and an unsubscribe. */
function record() {
  const seen = [];
  const handlers = lockgate.telemetryChannels.map((name) => {
    const h = (message) => seen.push({ channel: name, ...message });
    dc.subscribe(name, h);
    return [name, h];
  });
  return { seen, stop: () => handlers.forEach(([name, h]) => dc.unsubscribe(name, h)) };
}

async function until(what, cond) {
  for (let i = 0; i < 500; i++) {
    if (cond()) return;
    await sleep(10);
  }
  assert.fail(`never saw ${what}`);
}

test('every event of a contended lock, a timeout and a loss, with its measurements', async () => {
  const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
  const { seen, stop } = record();
  const [a, b, c] = await Promise.all([lockgate.connect(url), lockgate.connect(url), lockgate.connect(url)]);
  try {
    const first = await a.lock('tel', { leaseMs: 3000 }).acquire();
    const waiting = b.lock('tel', { leaseMs: 3000 }).acquire({ timeoutMs: 10_000 });
    await assert.rejects(c.lock('tel').acquire({ timeoutMs: 300 }), lockgate.TimeoutError);
    assert.equal(await first.release(), true);
    const second = await waiting;
    // The loss is published before the lease's signal aborts: an abort listener sees it.
    const lost = new Promise((resolve) =>
      second.signal.addEventListener('abort', () => resolve(seen.some((e) => e.event === 'lease.lost')), { once: true }),
    );
    await redis.admin.del('lockgate:{tel}');
    assert.equal(await lost, true, 'lease.lost was published before the abort');
  } finally {
    stop();
    await Promise.all([a.close(), b.close(), c.close()]);
  }
  const count = {};
  for (const e of seen) count[e.event] = (count[e.event] || 0) + 1;
  assert.deepEqual(count, {
    'acquire.started': 3,
    'acquire.granted': 2,
    'acquire.timed_out': 1,
    'lease.released': 1,
    'lease.lost': 1,
  });
  for (const e of seen) {
    assert.equal(e.channel, `lockgate.${e.event}`);
    assert.equal(e.warning, e.event === 'lease.lost');
    assert.deepEqual([e.backend, e.primitive], ['redis', 'mutex']);
    assert.equal(e.lock, undefined, 'lock names are off by default');
    assert.ok(!JSON.stringify(e).includes(PASSWORD), JSON.stringify(e));
    assert.equal(e.kind, undefined);
  }
  const granted = seen.filter((e) => e.event === 'acquire.granted');
  assert.deepEqual(granted.map((e) => e.queued), [false, true]);
  assert.ok(granted[1].waitMs >= 290, `b waited behind a past c's 300 ms timeout: ${granted[1].waitMs}`);
  const timedOut = seen.find((e) => e.event === 'acquire.timed_out');
  assert.ok(timedOut.waitMs >= 300 && timedOut.waitMs < 2000, `${timedOut.waitMs}`);
  assert.equal(timedOut.message, 'acquire timed out');
  const lostEvent = seen.find((e) => e.event === 'lease.lost');
  assert.equal(lostEvent.reason, 'refused');
  assert.equal(lostEvent.message, 'lock lost');
  assert.ok(seen.find((e) => e.event === 'lease.released').heldMs >= 290);
});

test('lock names only when asked for (telemetryLockNames); nothing published without a subscriber', async () => {
  const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
  await assert.rejects(lockgate.connect(url, { telemetryLockNames: 'yes' }), lockgate.InvalidArgumentError);
  const client = await lockgate.connect(url, { telemetryLockNames: true });
  try {
    // No subscriber: the engine's telemetry stays off (nothing to see, nothing computed).
    await (await client.lock('quiet').acquire()).release();
    const { seen, stop } = record();
    try {
      await (await client.lock('orders:42').acquire()).release();
    } finally {
      stop();
    }
    assert.deepEqual(seen.map((e) => [e.event, e.lock]), [
      ['acquire.started', 'orders:42'],
      ['acquire.granted', 'orders:42'],
      ['lease.released', 'orders:42'],
    ]);
  } finally {
    await client.close();
  }
});

test('a lease held too long is published once while still held', async () => {
  const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
  await assert.rejects(lockgate.connect(url, { heldTooLongMs: 0 }), lockgate.InvalidArgumentError);
  const client = await lockgate.connect(url, { heldTooLongMs: 200 });
  const { seen, stop } = record();
  try {
    const lease = await client.lock('stuck', { leaseMs: 3000 }).acquire();
    await until('the held-too-long event', () => seen.some((e) => e.event === 'lease.held_too_long'));
    await sleep(300);
    assert.equal(lease.isHeld, true);
    await lease.release();
  } finally {
    stop();
    await client.close();
  }
  const told = seen.filter((e) => e.event === 'lease.held_too_long');
  assert.equal(told.length, 1);
  assert.equal(told[0].warning, true);
  assert.ok(told[0].heldMs >= 200 && told[0].heldMs < 2000, `${told[0].heldMs}`);
});
