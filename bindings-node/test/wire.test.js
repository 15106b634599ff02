'use strict';
// The lean command connection of URL clients (lib/transport/redis-wire.js, with the RESP codec and FIFO in the core's redis::wire)
// against real redis-servers: replies and requests split at every byte, many requests in one
// write, lost connections (idle, in flight, server restarted), a stalled server, a garbled
// reply stream, ACL users, TLS, a database in the URL, and the ioredis fallback.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const Redis = require('ioredis');
const lockgate = require('..');
const { wireEligible } = require('../lib/transport/redis-wire');
const { startRedis, eventually, sleep } = require('./helpers/redis-server');

let redis;
const clients = [];

async function newClient(url, options) {
  const c = await lockgate.connect(url ?? redis.url, options);
  clients.push(c);
  return c;
}

before(async () => {
  redis = await startRedis();
});

after(async () => {
  for (const c of clients) await c.close();
  await redis.stop();
});

/**
 * A TCP proxy to `port` that forwards each direction in slices of `toServer` / `toClient`
 * bytes, one slice per event-loop turn, so the client sees every reply arrive in pieces.
 * `hold()` stops forwarding replies (they queue), `cut()` drops every connection.
 */
async function slicingProxy(port, { toServer = 7, toClient = 1 } = {}) {
  const pairs = new Set();
  let held = false;
  const drip = (from, to, size, isReply) => {
    const queue = [];
    let flowing = false;
    const flow = () => {
      if (held && isReply) {
        flowing = false;
        return;
      }
      const chunk = queue.shift();
      if (chunk === undefined) {
        flowing = false;
        return;
      }
      const piece = chunk.subarray(0, size);
      if (chunk.length > size) queue.unshift(chunk.subarray(size));
      if (!to.destroyed) to.write(piece);
      setImmediate(flow);
    };
    from.on('data', (d) => {
      queue.push(d);
      if (!flowing) {
        flowing = true;
        setImmediate(flow);
      }
    });
    return () => {
      if (!flowing) {
        flowing = true;
        setImmediate(flow);
      }
    };
  };
  const resumers = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    drip(client, upstream, toServer, false);
    resumers.add(drip(upstream, client, toClient, true));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `redis://127.0.0.1:${server.address().port}`,
    connections: () => pairs.size,
    hold() {
      held = true;
    },
    release() {
      held = false;
      for (const resume of resumers) resume();
    },
    cut() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
    },
    close: () =>
      new Promise((r) => {
        for (const { client, upstream } of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(r);
      }),
  };
}

test('replies arriving one byte at a time and requests in 7-byte pieces still meet their requests', async () => {
  const proxy = await slicingProxy(redis.port);
  try {
    const sliced = await newClient(proxy.url);
    const direct = await newClient();
    const lock = sliced.lock('bytewise', { leaseMs: 5000 });
    let last = 0n;
    for (let i = 0; i < 10; i++) {
      const lease = await lock.acquire();
      assert.ok(lease.fencingToken > last);
      last = lease.fencingToken;
      assert.equal(await lease.release(), true);
    }
    // A waiter on the sliced connection, woken by a release on the direct one, and back.
    const held = await direct.lock('bytewise').acquire();
    assert.equal(await lock.tryAcquire(), null);
    const waiting = lock.acquire({ timeoutMs: 10_000 });
    await sleep(50);
    await held.release();
    const got = await waiting;
    assert.ok(got.fencingToken > held.fencingToken);
    await got.extend(8000);
    assert.ok(got.remainingMs > 5000);
    const other = direct.lock('bytewise').acquire({ timeoutMs: 10_000 });
    await sleep(50);
    assert.equal(await got.release(), true);
    await (await other).release();
    // The shared-holder scripts reply with other shapes.
    const pool = () => sliced.semaphore('bytewise-pool', 2);
    const a = await pool().acquire();
    const b = await pool().acquire();
    assert.equal(await pool().tryAcquire(), null);
    await a.release();
    await b.release();
    const election = sliced.election('bytewise-election');
    const leader = await election.campaign('me');
    assert.deepEqual((await election.observe()).value, 'me');
    await leader.release();
  } finally {
    await proxy.close();
  }
});

test('many requests in one write, with a subscribe among them, each get their own replies', async () => {
  const c = await newClient();
  const names = Array.from({ length: 60 }, (_, i) => `batch-${i}`);
  // The first waiting acquire makes the engine subscribe: that request goes on the subscriber
  // connection while the scripts of all 60 go out together on the command connection.
  const leases = await Promise.all(names.map((n, i) => c.lock(n).acquire(i % 2 ? { timeoutMs: 5000 } : undefined)));
  assert.equal(new Set(leases.map((l) => l.lock.name)).size, 60);
  for (const n of names) assert.equal(await redis.admin.exists(`lockgate:{${n}}`), 1);
  const released = await Promise.all(leases.map((l) => l.release()));
  assert.deepEqual(released, names.map(() => true));
  for (const n of names) assert.equal(await redis.admin.exists(`lockgate:{${n}}`), 0);
});

test('a connection killed while idle is replaced by the next request; a lease survives it', async () => {
  const c = await newClient();
  const lease = await c.lock('idlekill', { leaseMs: 900 }).acquire();
  await redis.admin.client('KILL', 'TYPE', 'normal'); // every normal connection but the admin's own
  await sleep(1300); // renewals after the kill must reconnect
  assert.equal(lease.isHeld, true);
  assert.equal(await lease.release(), true);
  await (await c.lock('idlekill').acquire()).release();
});

test('a connection lost with a request in flight fails it (retryable) and leaves nothing behind', async () => {
  const proxy = await slicingProxy(redis.port, { toServer: 1 << 20, toClient: 1 << 20 });
  try {
    const c = await newClient(proxy.url);
    await (await c.lock('inflight').acquire()).release();
    proxy.hold(); // the script runs on the server, its reply waits in the proxy
    const attempt = c.lock('inflight').tryAcquire();
    await eventually(async () => (await redis.admin.exists('lockgate:{inflight}')) === 1, 2000, 'the grant on the server');
    proxy.cut();
    proxy.release();
    await assert.rejects(attempt, (e) => {
      assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
      assert.equal(e.retryable, true);
      return true;
    });
    // The engine undoes the grant it may have made, on a new connection.
    await eventually(async () => (await redis.admin.exists('lockgate:{inflight}')) === 0, 5000, 'the undo');
    await (await c.lock('inflight').acquire()).release();
  } finally {
    await proxy.close();
  }
});

test('a restarted server: requests fail while it is down, and work again once it is back', async () => {
  const own = await startRedis();
  try {
    const c = await newClient(own.url, { connectTimeoutMs: 500 });
    await (await c.lock('restart').acquire()).release();
    await own.down();
    await assert.rejects(c.lock('restart').tryAcquire(), lockgate.ConnectionError);
    await own.up(); // on the same port
    await (await c.lock('restart').acquire({ timeoutMs: 5000 })).release();
  } finally {
    await own.stop();
  }
});

test('a stalled server: no reply within commandTimeoutMs drops the connection, the next request reconnects', async () => {
  const own = await startRedis();
  try {
    const c = await newClient(own.url, { commandTimeoutMs: 300, connectTimeoutMs: 300 });
    await (await c.lock('stall').acquire()).release();
    process.kill(own.pid, 'SIGSTOP');
    const t0 = Date.now();
    try {
      await assert.rejects(c.lock('stall').tryAcquire(), (e) => {
        assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
        return true;
      });
      assert.ok(Date.now() - t0 < 3000, `failed after ${Date.now() - t0} ms`);
    } finally {
      process.kill(own.pid, 'SIGCONT');
    }
    await eventually(async () => {
      try {
        await (await c.lock('stall').acquire({ timeoutMs: 2000 })).release();
        return true;
      } catch {
        return false;
      }
    }, 10_000, 'an acquire after SIGCONT');
  } finally {
    await own.stop();
  }
});

test('a reply stream that does not parse fails the request (retryable) and the connection is replaced', async () => {
  let connections = 0;
  const fake = net.createServer((sock) => {
    connections++;
    sock.on('error', () => {});
    let handshaken = false;
    sock.on('data', (d) => {
      if (!handshaken && d.toString().includes('PING')) {
        handshaken = true;
        sock.write('+PONG\r\n');
      } else {
        sock.write('%not RESP2\r\n'); // a RESP3 map header: never sent to a RESP2 client
      }
    });
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  try {
    const c = await lockgate.connect(`redis://127.0.0.1:${fake.address().port}`);
    await assert.rejects(c.lock('garbled').tryAcquire(), (e) => {
      assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
      assert.equal(e.retryable, true);
      return true;
    });
    await eventually(async () => connections >= 2, 5000, 'a new connection');
    await c.close();
  } finally {
    fake.close();
  }
});

test('a server that hangs up during the handshake is a ConnectionError at connect', async () => {
  const fake = net.createServer((sock) => sock.destroy());
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  try {
    await assert.rejects(lockgate.connect(`redis://127.0.0.1:${fake.address().port}`), lockgate.ConnectionError);
  } finally {
    fake.close();
  }
});

test('ACL users: the URL names user and password; wrong ones and missing permissions are AuthenticationErrors', async () => {
  await redis.admin.call('ACL', 'SETUSER', 'app', 'on', '>app-secret-1', '~*', '&*', '+@all');
  await redis.admin.call('ACL', 'SETUSER', 'pinger', 'on', '>pinger-secret', '~*', '&*', '+ping');
  const port = redis.port;
  try {
    const app = await newClient(`redis://app:app-secret-1@127.0.0.1:${port}`);
    const other = await newClient(`redis://app:app-secret-1@127.0.0.1:${port}`);
    const held = await app.lock('acl').acquire();
    const waiting = other.lock('acl').acquire({ timeoutMs: 5000 }); // its subscriber logs in too
    await sleep(50);
    await held.release();
    await (await waiting).release();
    await assert.rejects(lockgate.connect(`redis://app:wrong-app-secret@127.0.0.1:${port}`), (e) => {
      assert.ok(e instanceof lockgate.AuthenticationError, `${e.name}: ${e.message}`);
      assert.ok(!e.message.includes('wrong-app-secret'), e.message);
      return true;
    });
    const pinger = await newClient(`redis://pinger:pinger-secret@127.0.0.1:${port}`);
    await assert.rejects(pinger.lock('acl').tryAcquire(), lockgate.AuthenticationError);
  } finally {
    await redis.admin.call('ACL', 'DELUSER', 'app', 'pinger');
  }
});

test('TLS: rediss:// with the server CA works end to end; an unknown CA is refused', async () => {
  const secure = await startRedis([], { tls: true });
  try {
    const options = { redisOptions: { tls: { ca: secure.ca } } };
    const a = await newClient(secure.url, options);
    const b = await newClient(secure.url, options);
    const held = await a.lock('tls').acquire();
    const waiting = b.lock('tls').acquire({ timeoutMs: 5000 }); // woken through a TLS subscriber
    await sleep(50);
    await held.release();
    const got = await waiting;
    assert.ok(got.fencingToken > held.fencingToken);
    await got.release();
    await assert.rejects(lockgate.connect(secure.url, { connectTimeoutMs: 2000 }), (e) => {
      assert.ok(e instanceof lockgate.ConnectionError, `${e.name}: ${e.message}`);
      return true;
    });
    // The core's tlsCaPem option: the same CA for every connection, on the lean socket, through
    // ioredis, and on a Redlock's masters; refused for a plaintext URL.
    const pem = secure.ca.toString();
    for (const [url, extra] of [
      [secure.url, {}],
      [secure.url, { redisOptions: { enableAutoPipelining: false } }],
      [secure.url.replace('rediss:', 'rediss+redlock:'), { maxLeaseMs: 1000 }],
    ]) {
      const c = await newClient(url, { tlsCaPem: pem, ...extra });
      await (await c.lock('tls-ca').acquire({ timeoutMs: 5000 })).release();
    }
    await assert.rejects(lockgate.connect(secure.url.replace('rediss:', 'redis:'), { tlsCaPem: pem }), lockgate.InvalidArgumentError);
  } finally {
    await secure.stop();
  }
});

test('a database number in the URL is selected', async () => {
  const c = await newClient(`${redis.url}/3`);
  const lease = await c.lock('in-db-3').acquire();
  const db3 = new Redis(redis.port, '127.0.0.1', { db: 3 });
  try {
    assert.equal(await db3.exists('lockgate:{in-db-3}'), 1);
    assert.equal(await redis.admin.exists('lockgate:{in-db-3}'), 0);
  } finally {
    db3.disconnect();
  }
  await lease.release();
});

test('options only ioredis knows keep the ioredis connection', async () => {
  assert.equal(wireEligible({}), true);
  assert.equal(wireEligible({ redisOptions: { tls: {}, keepAlive: 1000 } }), true);
  assert.equal(wireEligible({ redisOptions: { enableAutoPipelining: true } }), false);
  for (const [url, options] of [[redis.url, { redisOptions: { enableAutoPipelining: true } }]]) {
    const c = await newClient(url, options);
    const held = await c.lock('fallback').acquire();
    const waiting = c.lock('fallback').acquire({ timeoutMs: 5000 });
    await sleep(20);
    await held.release();
    await (await waiting).release();
  }
});
