'use strict';
// A client shows its redacted URL (issue 23, item 12): `client.url` and `String(client)`, as
// Python's and Java's clients do, with the password replaced by the core's redaction.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const util = require('node:util');
const lockgate = require('..');
const { startRedis } = require('./helpers/redis-server');

let redis;

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await redis.stop();
});

test('client.url and String(client) show the URL, passwords redacted', async () => {
  const client = await lockgate.connect(redis.url);
  assert.equal(client.url, redis.url);
  assert.equal(String(client), `Client(${redis.url})`);
  assert.equal(util.inspect(client), `Client(${redis.url})`);
  await client.close();

  // A password never shows.
  const secured = await startRedis(['--requirepass', 's3cret']);
  try {
    const withPassword = await lockgate.connect(`redis://:s3cret@127.0.0.1:${secured.port}`);
    assert.equal(withPassword.url, `redis://:***@127.0.0.1:${secured.port}`);
    assert.ok(!String(withPassword).includes('s3cret'), String(withPassword));
    assert.ok(!util.inspect(withPassword).includes('s3cret'));
    await withPassword.close();
  } finally {
    await secured.stop();
  }
});
