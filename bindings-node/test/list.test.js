'use strict';
// Listing locks from Node (issue 25): the page's JavaScript shape, the cursor followed to the
// end, the limit checked and capped, against a real redis-server. The cross-language and
// per-backend cases are the conformance scenario list_locks.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { redisForFile } = require('./helpers/redis-server');

const newClient = redisForFile();

test('listLocks pages through every lock under the prefix once', async () => {
  const a = await newClient('node-a');
  const b = await newClient('node-b');
  assert.deepEqual(await b.listLocks({ prefix: 'nls:' }), { entries: [], cursor: null });
  const leases = [];
  for (const n of ['nls:1', 'nls:2', 'nls:3', 'other:1']) leases.push(await a.lock(n).acquire());
  leases.push(await a.semaphore('nls:s', 2).acquire());
  const names = [];
  let cursor = null;
  let pages = 0;
  do {
    const page = await b.listLocks({ prefix: 'nls:', limit: 2, cursor });
    assert.ok(page.entries.length <= 2);
    names.push(...page.entries.map((e) => e.name));
    cursor = page.cursor;
    pages += 1;
  } while (cursor !== null);
  assert.deepEqual(names.sort(), ['nls:1', 'nls:2', 'nls:3', 'nls:s']);
  assert.ok(pages >= 2);
  const { entries } = await b.listLocks({ prefix: 'nls:s', limit: 1e12 });
  assert.deepEqual(entries, [{ name: 'nls:s', kind: 'semaphore', holders: 1, waiters: 0, label: 'node-a' }]);
  for (const l of leases) await l.release();
  assert.deepEqual((await b.listLocks({ prefix: 'nls:' })).entries, []);
});

test('listLocks refuses bad arguments with typed errors', async () => {
  const c = await newClient('node-c');
  for (const bad of [{ limit: 0 }, { limit: -1 }, { limit: 1.5 }, { limit: 'x' }, { cursor: 'nonsense' }, { prefix: '}x' }, { prefix: 7 }]) {
    await assert.rejects(c.listLocks({ prefix: 'nls:', ...bad }), (e) => e.code === 'INVALID_ARGUMENT', JSON.stringify(bad));
  }
});
