'use strict';
// The SQL backend through the public API (`postgres://` and `mysql://` URLs) and through its
// transport (lib/transport/sql.js on pg and mysql2), against a real PostgreSQL 15 and a real
// MariaDB 10.11 started by the project's launcher (`test-servers postgres` / `mariadb`), with
// the lock table inspected over a connection of the test's own. What every binding must do alike
// is the conformance suite's (its SQL variants); this file keeps what is Node's: the transport's
// own work (batches in order stopping at the first failure, server codes, the listening and
// wait connections, a replaced connection announced), the Promise API end to end on every
// primitive, and typed errors without the password.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const lockgate = require('..');
const transport = require('../lib/transport/sql');
const { launch, freePort, eventually, sleep } = require('./helpers/redis-server');

/** The lock table, with the core's default prefix. */
const TABLE = 'lockgate_entry';
/** Short leases keep the tests short. */
const LEASE_MS = 3000;

/**
 * One server of `kind` from the launcher (`args`: e.g. `['--tls']`): its description plus
 * `dialect`, `rows(sql, params)` (a statement on an inspection connection of the test's own, as
 * the administrator), `entries(lockKey)` and `close()`.
 */
async function server(kind, args = []) {
  const info = await launch(kind, args);
  const dialect = kind === 'postgres' ? 'postgres' : 'mysql';
  let rows;
  let end;
  if (dialect === 'postgres') {
    const pg = require('pg');
    const admin = new pg.Client({ connectionString: info.admin_url });
    await admin.connect();
    rows = async (sql, params = []) => (await admin.query({ text: sql, values: params, rowMode: 'array' })).rows;
    end = () => admin.end();
  } else {
    const mysql = require('mysql2/promise');
    const admin = await mysql.createConnection({ uri: info.admin_url.replace(/^mariadb:/, 'mysql:'), rowsAsArray: true });
    rows = async (sql, params = []) => (await admin.query(sql, params))[0];
    end = () => admin.end();
  }
  return {
    ...info,
    dialect,
    rows,
    /**
     * The lock table's holder and waiter rows of `key` (`<kind>/<name>`): `[id, owner]`, in id
     * order (not MySQL's per-name anchor row, owner '', which serializes a name's inserts).
     */
    async entries(key) {
      const p = dialect === 'postgres' ? '$1' : '?';
      return rows(`SELECT id, owner FROM ${TABLE} WHERE lock_key = ${p} AND owner <> '' ORDER BY id`, [key]);
    },
    async close() {
      await end().catch(() => {});
      await info.close();
    },
  };
}

/** `url` with `password` as its login's password. */
function withPassword(url, password) {
  const u = new URL(url);
  u.password = password;
  return u.toString();
}

for (const kind of ['postgres', 'mariadb']) {
  describe(kind, () => {
    let db;
    const clients = [];

    before(async () => {
      db = await server(kind);
    });

    after(async () => {
      for (const c of clients.splice(0)) await c.close().catch(() => {});
      if (db) await db.close();
    });

    async function connect(options = {}, url = db.url) {
      const c = await lockgate.connect(url, options);
      clients.push(c);
      return c;
    }

    test('a mutex: exclusion, the waiter woken by the release, increasing fencing tokens, no row left', async () => {
      const [a, c] = [await connect(), await connect()];
      assert.equal(a.capabilities.fencing, true);
      const first = await a.lock('orders', { leaseMs: LEASE_MS }).acquire({ timeoutMs: 5000 });
      assert.equal(typeof first.fencingToken, 'bigint');
      const [[id]] = await db.entries('mutex/orders');
      assert.equal(BigInt(id), first.fencingToken, 'the fencing token is the row id');
      assert.equal(await c.lock('orders').tryAcquire(), null);
      const waiting = c.lock('orders', { leaseMs: LEASE_MS }).acquire({ timeoutMs: 5000 });
      await eventually(async () => (await db.entries('mutex/orders')).length === 2, 3000, 'the waiter queued');
      const released = performance.now();
      assert.equal(await first.release(), true);
      const second = await waiting;
      // Woken by the release (a notification, a doorbell), not by the capped re-check (lease/3).
      const handoff = performance.now() - released;
      assert.ok(handoff < LEASE_MS / 3, `handed over in ${handoff.toFixed(0)} ms`);
      assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
      // Held past several renewals.
      await sleep(LEASE_MS * 1.2);
      assert.equal(second.isHeld, true);
      assert.equal(second.signal.aborted, false);
      assert.equal(await second.release(), true);
      assert.equal(await second.release(), false);
      assert.deepEqual(await db.entries('mutex/orders'), []);
      // The token keeps growing after the name's rows are gone (ids are never reused).
      const third = await a.lock('orders').acquire({ timeoutMs: 5000 });
      assert.ok(third.fencingToken > second.fencingToken);
      await third.release();
    });

    test('FIFO: waiters are served in the order they queued', async () => {
      const holder = await connect();
      const held = await holder.lock('fifo', { leaseMs: LEASE_MS }).acquire({ timeoutMs: 5000 });
      const order = [];
      const waiters = [];
      for (const who of ['w1', 'w2', 'w3']) {
        const c = await connect();
        waiters.push(
          c
            .lock('fifo', { leaseMs: LEASE_MS })
            .acquire({ timeoutMs: 10_000 })
            .then(async (lease) => {
              order.push([who, lease.fencingToken]);
              await sleep(50);
              await lease.release();
            }),
        );
        await eventually(async () => (await db.entries('mutex/fifo')).length === order.length + waiters.length + 1, 3000, `${who} queued`);
      }
      await held.release();
      await Promise.all(waiters);
      assert.deepEqual(order.map(([who]) => who), ['w1', 'w2', 'w3']);
      const tokens = order.map(([, token]) => token);
      assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], `${tokens}`);
      assert.deepEqual(await db.entries('mutex/fifo'), []);
    });

    test('a semaphore: two permits, the third holder waits for a release', async () => {
      const [a, c, d] = [await connect(), await connect(), await connect()];
      const one = await a.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
      const two = await c.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
      assert.equal(await d.semaphore('pool', 2).tryAcquire(), null);
      const three = d.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
      await sleep(200);
      assert.equal(await one.release(), true);
      const third = await three;
      assert.equal(third.isHeld, true);
      assert.equal(two.isHeld, true);
      assert.equal(await two.release(), true);
      assert.equal(await third.release(), true);
      assert.deepEqual(await db.entries('semaphore/pool'), []);
    });

    test('a read-write lock: readers share, a writer waits for them, readers wait behind a writer', async () => {
      const [a, c, d] = [await connect(), await connect(), await connect()];
      const r1 = await a.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
      const r2 = await c.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
      assert.equal(await d.readWriteLock('config').writeLock.tryAcquire(), null);
      const writing = d.readWriteLock('config').writeLock.acquire({ timeoutMs: 5000 });
      await sleep(200);
      // A reader arriving after a waiting writer queues behind it (writers first).
      assert.equal(await a.readWriteLock('config').readLock.tryAcquire(), null);
      await r1.release();
      await sleep(100);
      const now = await Promise.race([writing.then(() => 'granted'), sleep(100).then(() => 'waiting')]);
      assert.equal(now, 'waiting', 'a reader still holds');
      await r2.release();
      const w = await writing;
      assert.ok(w.fencingToken > r2.fencingToken);
      assert.equal(await c.readWriteLock('config').readLock.tryAcquire(), null);
      assert.equal(await w.release(), true);
      const r3 = await c.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
      assert.equal(await r3.release(), true);
    });

    test('an election: the leader observed with value and term; the next term is larger', async () => {
      const [a, c] = [await connect(), await connect()];
      assert.equal(await c.election('scheduler').observe(), null);
      const leading = await a.election('scheduler', { leaseMs: LEASE_MS }).campaign('10.0.0.7:8080', { timeoutMs: 5000 });
      const seen = await c.election('scheduler').observe();
      assert.equal(seen.value, '10.0.0.7:8080');
      assert.equal(seen.term, leading.term);
      assert.ok(seen.remainingMs > 0 && seen.remainingMs <= LEASE_MS, `${seen.remainingMs}`);
      const next = c.election('scheduler').campaign('10.0.0.8:8080', { timeoutMs: 5000 });
      await sleep(200);
      assert.equal(await leading.resign(), true);
      const successor = await next;
      assert.ok(successor.term > leading.term);
      assert.equal((await a.election('scheduler').observe()).value, '10.0.0.8:8080');
      await successor.release();
      assert.equal(await a.election('scheduler').observe(), null);
    });

    test('an AbortSignal withdraws a waiter: CancelledError, and its row is gone', async () => {
      const [a, c] = [await connect(), await connect()];
      const held = await a.lock('cancelled').acquire({ timeoutMs: 5000 });
      const ctl = new AbortController();
      const waiting = c.lock('cancelled').acquire({ timeoutMs: 10_000, signal: ctl.signal });
      await eventually(async () => (await db.entries('mutex/cancelled')).length === 2, 3000, 'the waiter queued');
      ctl.abort();
      await assert.rejects(waiting, lockgate.CancelledError);
      await eventually(async () => (await db.entries('mutex/cancelled')).length === 1, 3000, "the waiter's row deleted");
      assert.equal(await held.release(), true);
      assert.deepEqual(await db.entries('mutex/cancelled'), []);
    });

    test('close() releases what the client holds and cancels its waits: no row left', async () => {
      const [a, c] = [await connect(), await connect()];
      await a.lock('closing').acquire({ timeoutMs: 5000 });
      await a.semaphore('closing-sem', 3).acquire({ timeoutMs: 5000 });
      const cancelled = assert.rejects(c.lock('closing').acquire({ timeoutMs: 10_000 }), lockgate.CancelledError);
      await eventually(async () => (await db.entries('mutex/closing')).length === 2, 3000, 'the waiter queued');
      await c.close();
      await cancelled;
      assert.equal((await db.entries('mutex/closing')).length, 1, "the closed waiter's row is gone");
      await a.close();
      assert.deepEqual(await db.entries('mutex/closing'), []);
      assert.deepEqual(await db.entries('semaphore/closing-sem'), []);
    });

    test('an idle client never holds the process open (its listening and wait connections included)', async () => {
      const script = `
        const lockgate = require(${JSON.stringify(path.join(__dirname, '..'))});
        const url = ${JSON.stringify(db.url)};
        lockgate.connect(url).then(async (c) => {
          const held = await c.lock('idle').acquire();
          const other = await lockgate.connect(url);
          const waiting = other.lock('idle').acquire();
          setTimeout(() => held.release(), 300);
          await (await waiting).release();
          console.log('idle');
        });`;
      const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      try {
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        const exited = new Promise((resolve) => child.once('exit', resolve));
        const late = new Promise((resolve) => setTimeout(resolve, 8000, 'still running'));
        assert.equal(await Promise.race([exited, late]), 0, 'the process ends by itself');
        assert.equal(out, 'idle\n');
      } finally {
        child.kill('SIGKILL');
      }
    });

    test('a wrong password is AuthenticationError without the password; an unreachable server is ConnectionError', async () => {
      const secret = 'n0t-the-Passw0rd';
      await assert.rejects(lockgate.connect(withPassword(db.url, secret), { connectTimeoutMs: 3000 }), (err) => {
        assert.ok(err instanceof lockgate.AuthenticationError, `${err.name}: ${err.message}`);
        assert.ok(!err.message.includes(secret), err.message);
        assert.ok(!String(err.stack).includes(secret));
        return true;
      });
      const u = new URL(withPassword(db.url, secret));
      u.port = String(await freePort());
      await assert.rejects(lockgate.connect(u.toString(), { connectTimeoutMs: 2000 }), (err) => {
        assert.ok(err instanceof lockgate.ConnectionError, `${err.name}: ${err.message}`);
        assert.equal(err.retryable, true);
        assert.ok(!err.message.includes(secret), err.message);
        return true;
      });
    });

    test('the transport: statements in order, the first failure ends a batch with its server code, integers back as integers', async () => {
      const { perform, t } = await rawTransport(db);
      try {
        const p = (i) => (db.dialect === 'postgres' ? `$${i}` : '?');
        const table = `t_${kind}`;
        const ok = await perform('main', [
          [`CREATE TABLE IF NOT EXISTS ${table} (id BIGINT PRIMARY KEY, v TEXT)`],
          [`DELETE FROM ${table}`],
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 1, 'a'],
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 2 ** 53 + 2, null],
          [`UPDATE ${table} SET v = ${p(1)} WHERE id = 1`, 'a'],
          [`SELECT id, v FROM ${table} ORDER BY id`],
        ]);
        assert.equal(ok.reply, 'rows');
        assert.deepEqual(ok.results.map((r) => r.affected), [0, 0, 1, 1, 1, 0], 'an UPDATE counts the rows it matched');
        assert.deepEqual(ok.results[5].rows, [[1, 'a'], [2n ** 53n + 2n, null]]);
        // The duplicate fails with its code; the statement after it never runs.
        const dup = await perform('main', [
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 1, 'dup'],
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 3, 'never'],
        ]);
        assert.equal(dup.failure, 'server');
        assert.equal(dup.code, db.dialect === 'postgres' ? '23505' : '1062');
        assert.deepEqual((await perform('main', [[`SELECT count(*) FROM ${table} WHERE id = 3`]])).results[0].rows, [[0]]);
        // A batch's own transaction that failed inside is rolled back before the next batch:
        // its insert is gone and the connection is usable (not left aborted or holding locks).
        const txn = await perform('main', [
          ['BEGIN'],
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 4, 'rolled back'],
          [`INSERT INTO ${table} (id, v) VALUES (${p(1)}, ${p(2)})`, 1, 'dup'],
          ['COMMIT'],
        ]);
        assert.equal(txn.failure, 'server');
        assert.deepEqual((await perform('main', [[`SELECT count(*) FROM ${table} WHERE id = 4`]])).results[0].rows, [[0]]);
        assert.deepEqual(await db.rows(`SELECT count(*) FROM ${table} WHERE id = 4`), [[db.dialect === 'postgres' ? '0' : 0]]);
      } finally {
        await t.close();
      }
    });

    test('the transport: a batch unanswered in time is connectionLost, and the replacement connection is announced first', async () => {
      const { perform, t, notices } = await rawTransport(db, 1000);
      try {
        const sleepSql = db.dialect === 'postgres' ? 'SELECT pg_sleep(3)' : 'SELECT SLEEP(3)';
        const idSql = db.dialect === 'postgres' ? 'SELECT pg_backend_pid()' : 'SELECT CONNECTION_ID()';
        const before = (await perform('main', [[idSql]])).results[0].rows[0][0];
        const lost = await perform('main', [[sleepSql]]);
        assert.equal(lost.failure, 'connectionLost');
        assert.match(lost.message, /1000 ms/);
        assert.deepEqual(notices, []);
        const after = (await perform('main', [[idSql]])).results[0].rows[0][0];
        assert.notEqual(after, before, 'a new connection');
        assert.deepEqual(notices, [{ notice: 'reconnected', conn: 'main' }]);
      } finally {
        await t.close();
      }
    });

    if (kind === 'postgres') {
      test('sslmode=verify-full with the CA the server chains to (sslrootcert): a mutex over TLS; without it (the system roots) CONNECTION', async () => {
        const secure = await server('postgres', ['--tls']);
        try {
          assert.match(secure.tls_url, /sslmode=verify-full/);
          const c = await lockgate.connect(`${secure.tls_url}&sslrootcert=${encodeURIComponent(secure.ca_file)}`);
          try {
            const lease = await c.lock('over-tls').acquire({ timeoutMs: 5000 });
            // Every connection of the client's user is encrypted.
            const ssl = await secure.rows("SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = 'lockgate'");
            assert.ok(ssl.length > 0 && ssl.every(([on]) => on === true), JSON.stringify(ssl));
            assert.equal(await lease.release(), true);
          } finally {
            await c.close();
          }
          await assert.rejects(lockgate.connect(secure.tls_url, { connectTimeoutMs: 2000 }), (e) => {
            assert.equal(e.code, 'CONNECTION', e.message);
            assert.ok(!e.message.includes(secure.password), e.message);
            return true;
          });
        } finally {
          await secure.close();
        }
      });

      test('the transport: notifications on the listening connection are pushed; a killed one is replaced and announced', async () => {
        const { perform, t, notices } = await rawTransport(db);
        try {
          await perform('listen', [['LISTEN lockgate_test']]);
          const pid = (await perform('listen', [['SELECT pg_backend_pid()']])).results[0].rows[0][0];
          await perform('main', [['SELECT pg_notify($1, $2)', 'lockgate_test', 'mutex/a']]);
          await eventually(async () => notices.length === 1, 2000, 'the notification');
          assert.deepEqual(notices[0], { notice: 'notified', channel: 'lockgate_test', payload: 'mutex/a' });
          await db.rows('SELECT pg_terminate_backend($1)', [pid]);
          await eventually(async () => notices.length === 2, 3000, 'the replacement announced');
          assert.deepEqual(notices[1], { notice: 'reconnected', conn: 'listen' });
        } finally {
          await t.close();
        }
      });
    } else {
      test('the transport: a wait batch blocks on its own connection until the named lock is free', async () => {
        const { perform, t } = await rawTransport(db);
        try {
          const name = `lockgate:test-${process.pid}`;
          assert.deepEqual((await perform('main', [['SELECT GET_LOCK(?, 0)', name]])).results[0].rows, [[1]]);
          const started = performance.now();
          const waiting = perform('wait', [['SELECT GET_LOCK(?, ?)', name, 5], ['SELECT RELEASE_LOCK(?)', name]], 6000);
          await sleep(300);
          assert.deepEqual((await perform('main', [['SELECT RELEASE_LOCK(?)', name]])).results[0].rows, [[1]]);
          const woken = await waiting;
          assert.deepEqual(woken.results.map((r) => r.rows), [[[1]], [[1]]]);
          const took = performance.now() - started;
          assert.ok(took >= 250 && took < 2000, `woken after ${took.toFixed(0)} ms`);
        } finally {
          await t.close();
        }
      });
    }
  });
}

/**
 * The SQL transport on its own against `db`, with a driver that only records: `{ t,
 * perform(conn, [[sql, ...params]], timeoutMs?) → Promise<reply>, notices }`.
 */
async function rawTransport(db, commandTimeoutMs = 3000) {
  const answers = new Map();
  const notices = [];
  const driver = { answer: (id, reply) => answers.get(id)(reply), notice: (n) => notices.push(n) };
  const u = new URL(db.url);
  const plan = {
    dialect: db.dialect,
    hosts: [{ host: u.hostname, port: Number(u.port) }],
    user: decodeURIComponent(u.username),
    password: u.password ? decodeURIComponent(u.password) : null,
    database: u.pathname.slice(1) || null,
    tls: null,
    connectTimeoutMs: 3000,
    commandTimeoutMs,
    maxWaitConnections: 4,
    redacted: db.url,
  };
  const t = await transport.open(driver, plan);
  // The driver's timer keeps a real client's process alive while it waits; this does here.
  const alive = setInterval(() => {}, 1000);
  const close = t.close.bind(t);
  t.close = async () => {
    clearInterval(alive);
    await close();
  };
  let next = 1;
  const perform = (conn, statements, timeoutMs) =>
    new Promise((resolve) => {
      const id = next++;
      answers.set(id, resolve);
      t.perform({ id, conn, statements: statements.map(([sql, ...params]) => ({ sql, params })), timeoutMs });
    });
  return { t, perform, notices };
}
