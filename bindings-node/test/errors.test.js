'use strict';
// Bad inputs, the error taxonomy, connection and authentication failures.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const lockgate = require('..');
const { CORE_CODES } = require('../lib/errors');
const { startRedis, freePort, sleep } = require('./helpers/redis-server');

let redis;
let client;

before(async () => {
  redis = await startRedis();
  client = await lockgate.connect(redis.url);
});

after(async () => {
  await client.close();
  await redis.stop();
});

function isInvalid(e) {
  assert.ok(e instanceof lockgate.InvalidArgumentError, `${e && e.name}: ${e && e.message}`);
  assert.ok(e instanceof lockgate.LockError);
  assert.ok(e instanceof Error);
  assert.equal(e.code, 'INVALID_ARGUMENT');
  assert.equal(e.retryable, false);
  assert.equal(e.name, 'InvalidArgumentError');
  return true;
}

test('every core error code has its own LockError subclass', () => {
  const classes = {
    INVALID_ARGUMENT: [lockgate.InvalidArgumentError, false],
    TIMEOUT: [lockgate.TimeoutError, true],
    NOT_HELD: [lockgate.NotHeldError, false],
    CONNECTION: [lockgate.ConnectionError, true],
    AUTHENTICATION: [lockgate.AuthenticationError, false],
    PROTOCOL: [lockgate.ProtocolError, false],
    CANCELLED: [lockgate.CancelledError, false],
    CLOSED: [lockgate.ClosedError, false],
    ALREADY_HELD: [lockgate.AlreadyHeldError, false],
    UNSUPPORTED: [lockgate.UnsupportedError, false],
  };
  assert.deepEqual([...CORE_CODES].sort(), Object.keys(classes).sort(), 'the core and the JS classes agree');
  for (const [code, [cls, retryable]] of Object.entries(classes)) {
    const e = new cls('x');
    assert.ok(e instanceof lockgate.LockError);
    assert.equal(e.code, code);
    assert.equal(cls.code, code);
    assert.equal(e.retryable, retryable, code);
  }
});

test('bad lock names and options are rejected before any network call', async () => {
  const bad = [
    [''],
    [42],
    [undefined],
    ['x'.repeat(513)],
    ['\ud800'],
    ['x', { leaseMs: 0 }],
    ['x', { leaseMs: 5 }],
    ['x', { leaseMs: -1 }],
    ['x', { leaseMs: NaN }],
    ['x', { leaseMs: Infinity }],
    ['x', { leaseMs: '100' }],
    ['x', { leaseMs: 100n }],
    ['x', { leaseMs: 40 * 24 * 3600 * 1000 }],
    ['x', { autoRenew: 'yes' }],
    ['x', { entryTtlMs: 1 }],
    ['x', { waitTimeoutMs: -5 }],
    ['x', { lease: 1000 }],
    ['x', 'options'],
    ['x', [1]],
  ];
  for (const args of bad) {
    assert.throws(() => client.lock(...args), isInvalid, JSON.stringify(args, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)));
  }
  const lock = client.lock('inputs', { leaseMs: 1000 });
  for (const opts of [{ timeoutMs: -1 }, { timeoutMs: NaN }, { timeoutMs: '5' }, { timeout: 5 }, 5000, { signal: 'x' }, { signal: {} }]) {
    await assert.rejects(lock.acquire(opts), isInvalid, JSON.stringify(opts));
  }
  const lease = await lock.acquire();
  for (const ms of [0, -1, NaN, undefined, '100', Infinity]) {
    await assert.rejects(lease.extend(ms), isInvalid, String(ms));
  }
  assert.equal(lease.isHeld, true, 'a rejected extend changes nothing');
  await lease.release();
  await assert.rejects(lock.using('not a function'), isInvalid);
  assert.deepEqual(await redis.admin.keys('lockgate:{x}*'), [], 'nothing reached the server');
});

test('option errors name the option as spelled here, in milliseconds', async () => {
  const says = (fn, text) =>
    assert.throws(fn, (e) => isInvalid(e) && (e.message === text || assert.fail(`got: ${e.message}\nwant: ${text}`)));
  says(() => client.lock('x', { leaseMs: 40 * 24 * 3600 * 1000 }), 'leaseMs must be at most 2592000000 ms, got 3456000000 ms');
  says(() => client.lock('x', { leaseMs: 5 }), 'leaseMs must be at least 10 ms, got 5 ms');
  says(() => client.lock('x', { leaseMs: 0 }), 'leaseMs must be at least 10 ms, got 0 ms');
  says(() => client.semaphore('x', 2, { entryTtlMs: 1 }), 'entryTtlMs must be at least 100 ms, got 1 ms');
  says(() => client.readWriteLock('x', { waitTimeoutMs: -5 }), 'waitTimeoutMs must not be negative, got -5 ms');
  says(() => client.election('x', { leaseMs: NaN }), 'leaseMs must be a number of milliseconds, got NaN');
  const lease = await client.lock('messages').acquire();
  await assert.rejects(lease.extend(5), (e) => isInvalid(e) && e.message === 'ms must be at least 10 ms, got 5 ms');
  await lease.release();
  const redlockSays = async (options, text) =>
    assert.rejects(lockgate.connect(`redlock://127.0.0.1:${redis.port}`, options), (e) => isInvalid(e) && (e.message === text || assert.fail(e.message)));
  await redlockSays({ maxLeaseMs: 5 }, 'maxLeaseMs must be at least 10 ms, got 5 ms');
  await redlockSays({ nodeTimeoutMs: 0 }, 'nodeTimeoutMs must be at least 1 ms, got 0 ms');
  await redlockSays({ retryDelayMs: 0.5 }, 'retryDelayMs must be at least 1 ms, got 0.5 ms');
  await redlockSays({ driftFixedMs: 20_000 }, 'driftFixedMs must be at most 10000 ms, got 20000 ms');
  await redlockSays({ driftFactor: 2 }, 'driftFactor must be at least 0 and below 0.5, got 2');
  await assert.rejects(
    lockgate.connect(redis.url, { replicaAcks: { replicas: 1, timeoutMs: 0 } }),
    (e) => isInvalid(e) && e.message === 'replicaAcks.timeoutMs must be at least 1 ms, got 0 ms',
  );
});

test('bad connect arguments', async () => {
  for (const target of ['http://127.0.0.1:6379', 'not a url', 42, null, {}, undefined]) {
    await assert.rejects(lockgate.connect(target), isInvalid, String(target));
  }
  for (const options of [{ keyPrefix: 'a{b' }, { keyPrefix: 5 }, { prefix: 'x' }, { connectTimeoutMs: -1 }, 'x']) {
    await assert.rejects(lockgate.connect(redis.url, options), isInvalid, JSON.stringify(options));
  }
});

test('bad Redis URLs are an InvalidArgumentError from connect, for every Redis scheme (the rules of core/src/connect)', async () => {
  const at = `127.0.0.1:${redis.port}`;
  const bad = [
    `redis://${at}/abc`,
    `redis://${at}/%20`,
    `redis://${at}/-1`,
    `redis://${at}/1.5`,
    `redis://${at}/1/2`,
    `redis://${at}//3`,
    `redis://${at}/+1`,
    `redis://${at}/4294967296`,
    `redis://${at}/0?protocol=resp9`,
    `redis://${at}/0#x`,
    `redis://${at}/?foo=bar`,
    `redis://${at}?db=1`,
    `redis://app@${at}`, // a user without a password would run as `default`
    `redis://app:@${at}`,
    'redis://',
    'redis:///0',
    `http://${at}`,
    `redis://${at}:99999`,
  ];
  for (const url of bad) {
    await assert.rejects(lockgate.connect(url), isInvalid, url);
    await assert.rejects(lockgate.connect(url, { cluster: true }), isInvalid, `${url} (cluster)`);
    if (url.startsWith('redis://')) {
      await assert.rejects(lockgate.connect(url.replace('redis://', 'redis+cluster://')), isInvalid, `${url} (redis+cluster)`);
      await assert.rejects(lockgate.connect(url.replace('redis://', 'redlock://')), isInvalid, `${url} (redlock)`);
    }
  }
  for (const [url, says] of [
    [`redis://app:hunter2@${at}/x`, 'database number (decimal digits, like /0 or /2), got /x'],
    [`redis://:hunter2@${at}/%20`, 'got / '],
    [`redis://app@${at}`, 'names user "app" but gives no password'],
    [`redis://:hunter2@${at}?foo=bar`, 'unsupported Redis URL parameter "foo"'],
  ]) {
    const e = await lockgate.connect(url).catch((err) => err);
    assert.ok(isInvalid(e) && e.message.includes(says) && !e.message.includes('hunter2'), `${url}: ${e.message}`);
  }
  // Give anything that a bad URL set off (a socket, a timer) the time to blow up the process.
  await sleep(200);
  // What core accepts, Node accepts: a database number, `protocol`, a user with a password.
  for (const url of [`redis://${at}/0`, `redis://${at}/3`, `redis://${at}/?protocol=resp3`, `redis://${at}?protocol=resp2`, `redis://:x@${at}`]) {
    const ok = await lockgate.connect(url).catch((err) => err);
    if (url.includes(':x@')) {
      assert.ok(ok instanceof lockgate.AuthenticationError || ok instanceof lockgate.Client, `${url}: ${ok && ok.message}`);
      if (ok instanceof lockgate.Client) await ok.close();
      continue;
    }
    assert.ok(ok instanceof lockgate.Client, `${url}: ${ok && ok.message}`);
    const lease = await ok.lock(`url-ok`).acquire();
    await lease.release();
    await ok.close();
  }
  assert.equal(await redis.admin.select(3), 'OK');
  assert.deepEqual(await redis.admin.keys('lockgate:{url-ok}*').finally(() => redis.admin.select(0)), ['lockgate:{url-ok}:fence']);
});

test('an unreachable server is a retryable ConnectionError', async () => {
  const port = await freePort();
  await assert.rejects(lockgate.connect(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 1000 }), (e) => {
    assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
    assert.equal(e.code, 'CONNECTION');
    assert.equal(e.retryable, true);
    return true;
  });
});

test('a wrong password is an AuthenticationError that does not leak the password', async () => {
  const secured = await startRedis(['--requirepass', 'right-secret']);
  try {
    await assert.rejects(lockgate.connect(`redis://:wrong-secret@127.0.0.1:${secured.port}`), (e) => {
      assert.ok(e instanceof lockgate.AuthenticationError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'AUTHENTICATION');
      assert.equal(e.retryable, false);
      assert.ok(!e.message.includes('wrong-secret'), e.message);
      return true;
    });
    await assert.rejects(lockgate.connect(`redis://127.0.0.1:${secured.port}`), lockgate.AuthenticationError);
    const ok = await lockgate.connect(`redis://:right-secret@127.0.0.1:${secured.port}`);
    await (await ok.lock('auth').acquire()).release();
    await ok.close();
  } finally {
    await secured.stop();
  }
});

test('credentials refused while an acquire waits end it with AuthenticationError, not TimeoutError', async () => {
  const secured = await startRedis(['--requirepass', 'first-secret']);
  try {
    const url = `redis://:first-secret@127.0.0.1:${secured.port}`;
    const holder = await lockgate.connect(url);
    const held = await holder.lock('auth-wait').acquire();
    for (const options of [undefined, { redisOptions: { enableAutoPipelining: true } }]) {
      await secured.admin.config('SET', 'requirepass', 'first-secret');
      const c = await lockgate.connect(url, options);
      const waiting = c.lock('auth-wait').acquire({ timeoutMs: 5000 });
      await sleep(200);
      // The password changes and the connections drop: every reconnect is refused.
      await secured.admin.config('SET', 'requirepass', 'second-secret');
      await secured.admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await secured.admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      const t0 = performance.now();
      await assert.rejects(waiting, (e) => {
        assert.ok(e instanceof lockgate.AuthenticationError, `${options ? 'ioredis' : 'lean'}: ${e.name}: ${e.message}`);
        assert.ok(!e.message.includes('secret'), e.message);
        return true;
      });
      assert.ok(performance.now() - t0 < 2000, 'at once, not at the end of the wait');
      await c.close();
    }
    await secured.admin.config('SET', 'requirepass', 'first-secret');
    await held.release().catch(() => {});
    await holder.close();
  } finally {
    await secured.stop();
  }
});

test('a key of the wrong type gives a ProtocolError, not a lease', async () => {
  await redis.admin.hset('lockgate:{wrongtype}', 'a', 'b');
  await assert.rejects(client.lock('wrongtype').tryAcquire(), (e) => {
    assert.ok(e instanceof lockgate.ProtocolError, `${e.name}: ${e.message}`);
    assert.equal(e.retryable, false);
    return true;
  });
  await redis.admin.del('lockgate:{wrongtype}');
});

test('the WebAssembly module imports only its glue and crypto.getRandomValues (no clock, no I/O)', () => {
  const file = path.join(__dirname, '..', 'pkg', 'lockgate_node_bg.wasm');
  const mod = new WebAssembly.Module(fs.readFileSync(file));
  const imports = WebAssembly.Module.imports(mod);
  assert.ok(imports.length > 0);
  for (const i of imports) {
    assert.equal(i.module, './lockgate_node_bg.js', i.name);
    assert.match(i.name, /^__wbg|^__wbindgen_/, i.name);
    assert.doesNotMatch(i.name, /now|date|performance|timeout|fetch|require|process|socket/i, i.name);
  }
  assert.ok(imports.some((i) => /getRandomValues/.test(i.name)), 'tokens come from crypto.getRandomValues');
});
