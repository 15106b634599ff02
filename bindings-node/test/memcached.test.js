'use strict';
// The memcached transport (lib/transport/memcached.js on the `memcached` package) against one real
// memcached started by the project's launcher: what the package's sockets do under a request in
// flight. What every binding must do alike on memcached is the conformance suite's.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const transport = require('../lib/transport/memcached');
const { launch } = require('./helpers/redis-server');

let memcached;
const opened = [];

before(async () => {
  memcached = await launch('memcached');
});

after(async () => {
  for (const t of opened) await t.close();
  if (memcached) await memcached.close();
});

/** A transport on the launcher's memcached whose answers resolve `answer(id)`'s promise. */
async function open() {
  const settled = new Map();
  const waiting = new Map();
  const settle = (id, outcome) => {
    settled.set(id, outcome);
    const resolve = waiting.get(id);
    if (resolve) resolve(outcome);
  };
  const driver = {
    answer: (id, reply) => settle(id, { reply }),
    failed: (id, error) => settle(id, { error }),
  };
  const port = memcached.nodes[0].port;
  const plan = { servers: [{ host: '127.0.0.1', port }], connectTimeoutMs: 2000, commandTimeoutMs: 5000, redacted: memcached.url };
  const t = await transport.open(driver, plan);
  opened.push(t);
  const answer = (id) => (settled.has(id) ? Promise.resolve(settled.get(id)) : new Promise((r) => waiting.set(id, r)));
  /** The package's one socket to the server. */
  const socket = () => {
    const { client, location } = t.servers[0];
    const [s] = client.connections[location].pool;
    assert.ok(s, 'the package has a socket to the server');
    return s;
  };
  return { t, answer, socket };
}

test('an idle socket closing as a request goes out on a new one fails nothing', async () => {
  const { t, answer, socket } = await open();
  t.perform({ id: 1, server: 0, command: 'gets', key: 'lockgate-test-idle' });
  assert.deepEqual(await answer(1), { reply: null });
  // The package's idle timeout: it drops the socket from its pool and ends it; its close comes
  // a turn later, while the next request is in flight on a socket of its own.
  socket().emit('timeout');
  t.perform({ id: 2, server: 0, command: 'gets', key: 'lockgate-test-idle' });
  assert.deepEqual(await answer(2), { reply: null });
});

test('a socket closed under its own unanswered query fails the request at once', async () => {
  const { t, answer, socket } = await open();
  t.perform({ id: 1, server: 0, command: 'stats' });
  assert.ok((await answer(1)).reply);
  await memcached.command('pause 0');
  try {
    const started = Date.now();
    t.perform({ id: 2, server: 0, command: 'gets', key: 'lockgate-test-closed' });
    await new Promise((r) => setTimeout(r, 50));
    socket().destroy();
    const outcome = await answer(2);
    assert.equal(outcome.error && outcome.error.code, 'CONNECTION');
    assert.ok(Date.now() - started < 2000, 'failed long before the response timeout');
  } finally {
    await memcached.command('resume 0');
  }
});
