'use strict';
// A process whose locks are released exits by itself, without client.close(): no timer,
// socket or listener of lockgate keeps the event loop alive. A held lease does keep it alive.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const lockgate = require('..');
const { startRedis, sleep } = require('./helpers/redis-server');

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
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'exit-script.js'), redis.url, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out, err })));
  return { child, exited };
}

for (const mode of ['release', 'try', 'timeout', 'abort', 'using']) {
  test(`exits by itself after: ${mode}`, async () => {
    const t0 = performance.now();
    const { child, exited } = run(mode);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const { code, signal, out, err } = await exited;
    clearTimeout(timer);
    assert.equal(signal, null, `the process had to be killed (still running after 10 s); stderr: ${err}`);
    assert.equal(code, 0, err);
    assert.equal(out, 'done\n');
    const took = performance.now() - t0;
    assert.ok(took < 5000, `exited after ${took.toFixed(0)} ms`);
    assert.equal(await redis.admin.exists(`lockgate:{exit-${mode}}`), 0, 'nothing left held');
    assert.equal(await redis.admin.zcard('lockgate:{exit-busy}:queue'), 0, 'nothing left queued');
  });
}

for (const mode of ['semaphore', 'rw', 'election', 'reentrant']) {
  test(`exits by itself after: ${mode}`, async () => {
    const { child, exited } = run(mode);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const { code, signal, out, err } = await exited;
    clearTimeout(timer);
    assert.equal(signal, null, `the process had to be killed (still running after 10 s); stderr: ${err}`);
    assert.equal(code, 0, err);
    assert.equal(out, 'done\n');
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
