'use strict';
// Mutual exclusion across worker processes: a non-atomic counter update under the lock loses
// no increment, and fencing tokens increase in the order the critical sections ran.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { startRedis } = require('./helpers/redis-server');

const WORKERS = 4;
const ITERATIONS = 50;
let redis;

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await redis.stop();
});

function runWorker() {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(__dirname, 'fixtures', 'counter-worker.js'), redis.url, String(ITERATIONS)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out));
      else reject(new Error(`worker exited with ${code}: ${err}`));
    });
  });
}

test(`${WORKERS} processes x ${ITERATIONS} increments under one lock lose no update`, { timeout: 120_000 }, async () => {
  const results = await Promise.all(Array.from({ length: WORKERS }, runWorker));
  assert.equal(Number(await redis.admin.get('counter')), WORKERS * ITERATIONS, 'no lost update');
  const all = results.flat().map(([value, fence]) => [value, BigInt(fence)]);
  all.sort((a, b) => a[0] - b[0]);
  assert.deepEqual(
    all.map(([v]) => v),
    Array.from({ length: WORKERS * ITERATIONS }, (_, i) => i),
    'every value was read by exactly one holder',
  );
  for (let i = 1; i < all.length; i++) {
    assert.ok(all[i][1] > all[i - 1][1], `fencing token ${i} increases with the critical sections`);
  }
  for (const r of results) assert.equal(r.length, ITERATIONS);
  assert.deepEqual(await redis.admin.keys('lockgate:{counter}'), [], 'released at the end');
  assert.equal(await redis.admin.zcard('lockgate:{counter}:queue'), 0);
});
