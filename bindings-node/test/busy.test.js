'use strict';
// Transient server errors are retried, not reported as permanent (issue 13, item 7): during a
// real BUSY spell (a Lua script that runs past `busy-reply-threshold`, so the server answers
// every other command with -BUSY) a waiting acquire keeps waiting, a release is retried until
// it reaches the server, and a renewed lease survives. Checked on both command transports: the
// lean RESP connection (the core's redis::wire) and ioredis (the core's redis::data).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const lockgate = require('..');
const { startRedis, sleep } = require('./helpers/redis-server');

/** Spins on the server for ARGV[1] ms (TIME is allowed in scripts since Redis 5). */
const SPIN = `
local t0 = redis.call('TIME')
local start = tonumber(t0[1]) * 1000000 + tonumber(t0[2])
while true do
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) - start > tonumber(ARGV[1]) * 1000 then break end
end
return 1`;

let redis;
let spinner;
const clients = [];

before(async () => {
  redis = await startRedis(['--busy-reply-threshold', '50']);
  spinner = new Redis(redis.port, '127.0.0.1', { commandTimeout: 10_000 });
});

after(async () => {
  spinner.disconnect();
  for (const c of clients) await c.close();
  await redis.stop();
});

async function newClient(options) {
  const c = await lockgate.connect(redis.url, options);
  clients.push(c);
  return c;
}

/** Starts a BUSY spell of `ms` ms; resolves once the server answers BUSY, with the spell's end. */
async function busySpell(ms) {
  const done = spinner.eval(SPIN, 0, ms);
  const probe = new Redis(redis.port, '127.0.0.1', { maxRetriesPerRequest: 0, enableReadyCheck: false });
  probe.on('error', () => {});
  try {
    for (let i = 0; i < 100; i++) {
      const reply = await probe.ping().catch((e) => e);
      if (reply instanceof Error && /^BUSY/.test(reply.message)) return done;
      await sleep(5);
    }
    throw new Error('the server never answered BUSY');
  } finally {
    probe.disconnect();
  }
}

for (const [transport, options] of [
  ['the lean connection', undefined],
  ['ioredis', { redisOptions: { enableAutoPipelining: true } }],
]) {
  test(`a BUSY spell on ${transport}: the waiter keeps waiting, the release is retried, the lease survives`, { timeout: 30_000 }, async () => {
    const name = `busy-${options ? 'ioredis' : 'lean'}`;
    const holder = await newClient(options);
    const waiter = await newClient(options);
    const kept = await holder.lock(`${name}-kept`, { leaseMs: 3000 }).acquire();
    const held = await holder.lock(name, { leaseMs: 5000 }).acquire();
    const waiting = waiter.lock(name).acquire({ timeoutMs: 8000 });
    await sleep(100); // queued
    const spellEnds = await busySpell(1200);
    const t0 = performance.now();
    const released = held.release(); // sent into the BUSY spell
    await spellEnds;
    const spellLeft = performance.now() - t0;
    assert.equal(await released, true, 'the release was retried until it reached the server');
    const lease = await waiting; // not a PROTOCOL error, not a timeout
    const took = performance.now() - t0;
    assert.ok(took < spellLeft + 2000, `the waiter got the lock ${(took - spellLeft).toFixed(0)} ms after the spell`);
    assert.equal(lease.isHeld, true);
    assert.equal(kept.isHeld, true, 'a renewed lease outlived the spell');
    assert.equal(kept.signal.aborted, false);
    assert.ok((await redis.admin.pttl(`lockgate:{${name}-kept}`)) > 0);
    await lease.release();
    await kept.release();
  });
}
