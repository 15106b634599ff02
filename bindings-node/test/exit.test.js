'use strict';
// A process whose locks are released exits by itself, without client.close(): no timer,
// socket or listener of lockgate keeps the event loop alive. A held lease does keep it alive.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { startRedis, sleep } = require('./helpers/redis-server');
const { assertExitsByItself, runFixture } = require('./helpers/child');

let redis;
let client;
let busy;

before(async () => {
  redis = await startRedis();
  client = await lockgate.connect(redis.url);
  busy = await client.lock('exit-busy').acquire();
});

after(async () => {
  await busy.release();
  await client.close();
  await redis.stop();
});

function run(mode) {
  return runFixture('exit-script.js', [redis.url, mode]);
}

for (const mode of ['release', 'try', 'timeout', 'abort', 'using']) {
  test(`exits by itself after: ${mode}`, async () => {
    const t0 = performance.now();
    await assertExitsByItself(run(mode), 10_000);
    const took = performance.now() - t0;
    assert.ok(took < 5000, `exited after ${took.toFixed(0)} ms`);
    assert.equal(await redis.admin.exists(`lockgate:{exit-${mode}}`), 0, 'nothing left held');
    assert.equal(await redis.admin.zcard('lockgate:{exit-busy}:queue'), 0, 'nothing left queued');
  });
}

for (const mode of ['semaphore', 'rw', 'election', 'reentrant']) {
  test(`exits by itself after: ${mode}`, async () => {
    await assertExitsByItself(run(mode), 10_000);
    const left = (await redis.admin.keys(`lockgate:{exit-${mode}}*`)).filter((k) => !k.endsWith(':fence'));
    assert.deepEqual(left, [], 'nothing left held or queued');
  });
}

test('a process holding a renewed lease stays alive and keeps it', async () => {
  const { child, exited } = run('hold');
  try {
    const deadline = Date.now() + 5000;
    while ((await redis.admin.exists('lockgate:{exit-hold}')) === 0) {
      assert.ok(Date.now() < deadline, 'the script acquired');
      await sleep(20);
    }
    await sleep(1500); // 1.5 leases
    assert.equal(child.exitCode, null, 'still running');
    assert.ok((await redis.admin.pttl('lockgate:{exit-hold}')) > 0, 'renewed');
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
});
