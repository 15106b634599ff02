'use strict';
// Passwords never appear in logs (issue 13, item 11): with DEBUG=ioredis:* ioredis prints every
// command it writes, AUTH included, so lockgate logs in on its ioredis connections itself
// (lib/login.js) and ioredis never learns the password.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startRedis } = require('./helpers/redis-server');
const { runFixture } = require('./helpers/child');

const PASSWORD = 'pw-Zq7-secret-9x';
const WRONG = 'wrong-Kp4-secret-2y';
let redis;

before(async () => {
  redis = await startRedis(['--requirepass', PASSWORD]);
});

after(async () => {
  await redis.stop();
});

test('DEBUG=ioredis:* output never contains the password, on connect, reconnect or refusal', { timeout: 60_000 }, async () => {
  const at = `127.0.0.1:${redis.port}`;
  const previous = process.env.DEBUG;
  process.env.DEBUG = 'ioredis:*';
  let run;
  try {
    run = runFixture('debug-script.js', [`redis://:${PASSWORD}@${at}`, `redis://:${WRONG}@${at}`]);
  } finally {
    if (previous === undefined) delete process.env.DEBUG;
    else process.env.DEBUG = previous;
  }
  const { code, out, err } = await run.exited;
  const all = out + err;
  assert.equal(code, 0, err.slice(-3000));
  assert.match(err, /ioredis:redis write command/, 'ioredis debug output was on (the check below is not vacuous)');
  assert.match(err, /subscribe/, 'the subscriber connections were used');
  assert.ok(!all.includes(PASSWORD), 'the password appears in the output');
  assert.ok(!all.includes(WRONG), 'the refused password appears in the output');
});
