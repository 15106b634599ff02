'use strict';
// A process whose locks are released exits by itself, without client.close(): no timer,
// socket or listener of lockgate keeps the event loop alive. A held lease does keep it alive.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { startRedis, eventually, sleep } = require('./helpers/redis-server');
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

// ---- what process exit cleans up (issue 13, item 5; lib/exit.js) ----

/** Resolves with the first line the child prints (rejects if it exits first). */
function firstLine(child) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i >= 0) {
        child.stdout.removeListener('data', onData);
        resolve(buf.slice(0, i));
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code, signal) => reject(new Error(`exited (${code ?? signal}) before printing a line`)));
  });
}

const queueLen = () => redis.admin.zcard('lockgate:{exit-busy}:queue');

for (const signal of ['SIGINT', 'SIGTERM']) {
  test(`a waiter killed by ${signal} leaves the queue before it ends: the next waiter gets the lock at once`, async () => {
    const { child, exited } = run('wait-long');
    assert.equal(await firstLine(child), 'waiting');
    await eventually(async () => (await queueLen()) === 1, 5000, 'the child to queue');
    const next = client.lock('exit-busy').acquire({ timeoutMs: 8000 });
    await eventually(async () => (await queueLen()) === 2, 5000, 'the next waiter to queue');
    const t0 = performance.now();
    child.kill(signal);
    const ended = await exited;
    assert.equal(ended.signal, signal, `the signal is raised again, not swallowed (${JSON.stringify(ended)})`);
    assert.ok(performance.now() - t0 < 2500, 'bounded cleanup');
    assert.equal(await queueLen(), 1, 'the child withdrew its queue entry');
    const t1 = performance.now();
    await busy.release();
    const lease = await next;
    const took = performance.now() - t1;
    assert.ok(took < 1000, `the next waiter got the lock after ${took.toFixed(0)} ms`);
    await lease.release();
    busy = await client.lock('exit-busy').acquire();
  });

  test(`a holder killed by ${signal} releases its lock before it ends`, async () => {
    const { child, exited } = run('hold-long');
    assert.equal(await firstLine(child), 'held');
    assert.ok((await redis.admin.pttl('lockgate:{exit-hold-long}')) > 5000);
    child.kill(signal);
    const ended = await exited;
    assert.equal(ended.signal, signal, JSON.stringify(ended));
    assert.equal(await redis.admin.exists('lockgate:{exit-hold-long}'), 0, 'free at once, not after its 10 s lease');
  });
}

test('an application that handles SIGINT itself keeps its leases until it exits; process.exit then releases them', async () => {
  const { child, exited } = run('own-handler');
  assert.equal(await firstLine(child), 'held');
  child.kill('SIGINT');
  const ended = await exited;
  assert.equal(ended.code, 7, `the application's handler decided the exit (${JSON.stringify(ended)})`);
  assert.equal(ended.out, 'held\nhandled\nstill held\n');
  assert.equal(await redis.admin.exists('lockgate:{exit-own-handler}'), 0, 'released at process.exit()');
});

test('beside a signal-exit style listener, SIGINT still releases, runs its hook and ends the process', async () => {
  const { child, exited } = run('signal-exit');
  assert.equal(await firstLine(child), 'held');
  child.kill('SIGINT');
  const ended = await exited;
  assert.equal(ended.signal, 'SIGINT', JSON.stringify(ended));
  assert.equal(ended.out, 'held\nhook\n');
  assert.equal(await redis.admin.exists('lockgate:{exit-signal-exit}'), 0);
});

test('process.exit() releases what is held and withdraws what waits', async () => {
  const { exited } = run('process-exit');
  const ended = await exited;
  assert.equal(ended.code, 0, ended.err);
  await sleep(50); // the server runs what the child wrote just before it ended
  assert.equal(await redis.admin.exists('lockgate:{exit-process-exit}'), 0, 'released');
  assert.equal(await queueLen(), 0, 'nothing left queued');
});
