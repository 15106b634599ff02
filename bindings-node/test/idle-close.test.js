'use strict';
// Servers that close idle connections (Redis `timeout`, MariaDB `wait_timeout`, PostgreSQL
// `idle_session_timeout`, memcached `idle_timeout`): a client left idle past that acquires and
// releases as before, nothing surfacing to its caller. Every transport keeps its own sockets
// (the lean RESP socket and ioredis, pg, mysql2, memcached), so each is tried. A connection of
// the test's own, idle as long, shows that the server did close what was idle.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const lockgate = require('..');
const { launch, sleep } = require('./helpers/redis-server');

/** The servers' idle limit, in seconds. */
const IDLE_S = 2;

const servers = [];
after(async () => {
  for (const s of servers) await s.close();
});

/** Resolves once `emitter` emits one of `events`: a connection the server ended. */
function ended(emitter, events) {
  return new Promise((resolve) => {
    for (const e of events) emitter.once(e, () => resolve(true));
  });
}

const BACKENDS = [
  {
    name: 'redis',
    kind: 'single',
    args: ['--', '--timeout', String(IDLE_S)],
    probe: (info) => {
      const s = net.connect(info.nodes[0].port, '127.0.0.1');
      s.on('error', () => {});
      return { closed: ended(s, ['close']), end: () => s.destroy() };
    },
  },
  {
    name: 'mariadb',
    kind: 'mariadb',
    args: ['--', `wait_timeout=${IDLE_S}`],
    probe: async (info) => {
      const mysql = require('mysql2');
      const c = mysql.createConnection({ uri: info.admin_url.replace(/^mariadb:/, 'mysql:') });
      c.on('error', () => {});
      await c.promise().query('SELECT 1');
      return { closed: ended(c, ['end', 'error']), end: () => c.destroy() };
    },
  },
  {
    name: 'postgres',
    kind: 'postgres',
    args: ['--', `idle_session_timeout=${IDLE_S * 1000}`],
    probe: async (info) => {
      const pg = require('pg');
      const c = new pg.Client({ connectionString: info.admin_url });
      c.on('error', () => {});
      await c.connect();
      return { closed: ended(c, ['end', 'error']), end: () => c.end().catch(() => {}) };
    },
  },
  {
    name: 'memcached',
    kind: 'memcached',
    args: ['--', '-o', `idle_timeout=${IDLE_S}`],
    // A server up less than maxLeaseMs grants nothing (PROTOCOL.md §13): a short one.
    clientOptions: { maxLeaseMs: 5000 },
    lockOptions: { leaseMs: 5000 },
    probe: (info) => {
      const s = net.connect(info.nodes[0].port, '127.0.0.1');
      s.on('error', () => {});
      return { closed: ended(s, ['close']), end: () => s.destroy() };
    },
  },
];

for (const b of BACKENDS) {
  test(`${b.name}: connections the server closed while idle cost the next acquire nothing`, async () => {
    const info = await launch(b.kind, b.args);
    servers.push(info);
    const client = await lockgate.connect(info.url, b.clientOptions || {});
    try {
      const lock = client.lock('idle-closed', b.lockOptions || {});
      assert.equal(await (await lock.acquire({ timeoutMs: 15000 })).release(), true);
      const probe = await b.probe(info);
      try {
        await sleep((IDLE_S + 2) * 1000);
        assert.equal(await Promise.race([probe.closed, sleep(1).then(() => false)]), true, 'the server closed an idle connection');
      } finally {
        await probe.end();
      }
      for (let i = 0; i < 3; i++) {
        const lease = await lock.acquire({ timeoutMs: 5000 });
        assert.equal(await lease.release(), true);
      }
    } finally {
      await client.close();
    }
  });
}
