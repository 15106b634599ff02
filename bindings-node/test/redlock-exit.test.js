'use strict';
// A process using a Redlock exits by itself once nothing is held (closed or not, even with a
// master that is down), and a held lease keeps it alive.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { startRedis, freePort, sleep } = require('./helpers/redis-server');
const { assertExitsByItself, runFixture } = require('./helpers/child');

let masters;
let redlock;
let busy;

before(async () => {
  masters = await Promise.all([startRedis(), startRedis(), startRedis()]);
  redlock = await lockgate.connect(redlockUrl(masters.map((m) => m.port)), { maxLeaseMs: 1000 });
  busy = await redlock.lock('exit-busy', { leaseMs: 1000 }).acquire({ timeoutMs: 5000 });
});

after(async () => {
  await busy.release();
  await redlock.close();
  for (const m of masters) await m.stop();
});

/** The `redlock://` URL of masters on these loopback ports. */
function redlockUrl(ports) {
  return `redlock://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`;
}

function run(mode, ports) {
  return runFixture('redlock-exit-script.js', [mode, redlockUrl(ports)]);
}

async function heldAnywhere(pattern) {
  const found = [];
  for (const m of masters) found.push(...(await m.admin.keys(pattern)));
  return found;
}

for (const mode of ['close', 'idle', 'down', 'abort']) {
  test(`exits by itself after: ${mode}`, async () => {
    const ports = masters.map((m) => m.port);
    if (mode === 'down') ports.push(await freePort());
    const t0 = performance.now();
    await assertExitsByItself(run(mode, ports), 15_000);
    const took = performance.now() - t0;
    assert.ok(took < 8000, `exited after ${took.toFixed(0)} ms`);
    assert.deepEqual(await heldAnywhere(`lockgate:{exit-${mode}*`), [], 'nothing left held');
    assert.equal(busy.isHeld, true);
  });
}

test('a process holding a renewed Redlock lease stays alive and keeps it', async () => {
  const { child, exited } = run('hold', masters.map((m) => m.port));
  try {
    const deadline = Date.now() + 8000;
    while ((await masters[0].admin.exists('lockgate:{exit-hold}:redlock')) === 0) {
      assert.ok(Date.now() < deadline, 'the script acquired');
      await sleep(20);
    }
    await sleep(2000); // 2 leases
    assert.equal(child.exitCode, null, 'still running');
    for (const m of masters) assert.ok((await m.admin.pttl('lockgate:{exit-hold}:redlock')) > 0, 'renewed');
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
});

test('a Redlock holder killed by SIGTERM releases on every master before it ends', async () => {
  const { child, exited } = run('hold-signal', masters.map((m) => m.port));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => String(d).includes('held') && resolve());
    child.once('exit', () => reject(new Error('exited before holding')));
  });
  assert.ok((await heldAnywhere('lockgate:{exit-hold-signal}*')).length >= 2, 'held on a majority');
  child.kill('SIGTERM');
  const ended = await exited;
  assert.equal(ended.signal, 'SIGTERM', JSON.stringify(ended));
  assert.deepEqual(await heldAnywhere('lockgate:{exit-hold-signal}*'), [], 'released on every master at once');
});
