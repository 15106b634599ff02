'use strict';
// lockgate's fencing token enforced in the application's OWN table (docs/fencing-sql.md), on a
// real PostgreSQL (pg) and a real MariaDB (mysql2) from the project's launcher: a holder paused
// past its lease writes late with its old token and the database refuses it (0 rows: "you lost
// the lock, stop"), while the next holder's writes land. The fenced write is
// `UPDATE account SET ..., fence = <token> WHERE id = <id> AND fence <= <token>`; the next holder
// claims the row (the same UPDATE setting only `fence`) before it reads it.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lockgate = require('..');
const { launch } = require('./helpers/redis-server');

/** A fixed (not renewed) lease: a paused process renews nothing either. */
const PAUSED_LEASE_MS = 1000;

const DDL = 'CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)';

/**
 * The application's own connection: `run(pgSql, mySql, params)` → rows changed (MySQL: matched,
 * mysql2 sets FOUND_ROWS by default), `row(id)` → `[balance, fence]` as bigints.
 */
async function application(kind, url) {
  if (kind === 'postgres') {
    const pg = require('pg');
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return {
      run: async (sql, _my, params = []) => (await c.query(sql, params)).rowCount,
      row: async (id) => {
        const { rows } = await c.query({ text: 'SELECT balance, fence FROM account WHERE id = $1', values: [id], rowMode: 'array' });
        return rows[0].map(BigInt);
      },
      end: () => c.end(),
    };
  }
  const mysql = require('mysql2/promise');
  const c = await mysql.createConnection({ uri: url.replace(/^mariadb:/, 'mysql:'), supportBigNumbers: true, bigNumberStrings: true });
  return {
    run: async (_pg, sql, params = []) => (await c.query(sql, params))[0].affectedRows,
    row: async (id) => {
      const [rows] = await c.query({ sql: 'SELECT balance, fence FROM account WHERE id = ?', rowsAsArray: true }, [id]);
      return rows[0].map(BigInt);
    },
    end: () => c.end(),
  };
}

/** The fenced write: 1 row while this token is the row's newest, 0 once a later holder wrote or claimed it. */
const write = (app, id, balance, fence) =>
  app.run(
    'UPDATE account SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2',
    'UPDATE account SET balance = ?, fence = ? WHERE id = ? AND fence <= ?',
    app.pg ? [balance, fence, id] : [balance, fence, id, fence],
  );

/** A new holder's first statement, before it reads the row: cuts off every older holder. */
const claim = (app, id, fence) =>
  app.run('UPDATE account SET fence = $1 WHERE id = $2 AND fence <= $1', 'UPDATE account SET fence = ? WHERE id = ? AND fence <= ?', app.pg ? [fence, id] : [fence, id, fence]);

for (const kind of ['postgres', 'mariadb']) {
  describe(`fencing in the application's table (${kind})`, () => {
    let db;
    let app;
    const clients = [];

    before(async () => {
      db = await launch(kind);
      app = { ...(await application(kind, db.url)), pg: kind === 'postgres' };
      await app.run(DDL, `${DDL} ENGINE=InnoDB`);
      await app.run('INSERT INTO account (id, balance) VALUES (1, 100)', 'INSERT INTO account (id, balance) VALUES (1, 100)');
    });

    after(async () => {
      for (const c of clients) await c.close().catch(() => {});
      if (app) await app.end().catch(() => {});
      if (db) await db.close();
    });

    async function connect() {
      const c = await lockgate.connect(db.url);
      clients.push(c);
      return c;
    }

    test("a paused holder's late write is refused, the next holder's lands", async () => {
      const [a, b] = [await connect(), await connect()];
      const name = `fence-account-1-${process.pid}-${Date.now()}`;
      const first = await a.lock(name, { leaseMs: PAUSED_LEASE_MS, autoRenew: false }).acquire({ timeoutMs: 10000 });
      const old = first.fencingToken;
      assert.equal(typeof old, 'bigint');
      assert.equal(await write(app, 1, 110, old), 1, "the holder's write lands");
      assert.equal(await write(app, 1, 110, old), 1, 'and again with the same token and value (a retry)');
      assert.equal(await write(app, 1, 120, old), 1, 'and again with a new value');

      // A pauses past its lease; B, waiting meanwhile, is granted when A's lease is over.
      const second = await b.lock(name).acquire({ timeoutMs: 10000 });
      const fresh = second.fencingToken;
      assert.ok(fresh > old, `${fresh} > ${old}`);
      assert.equal(first.isHeld, false);
      assert.equal(await claim(app, 1, fresh), 1, 'B claims the row before reading it');

      // A wakes up and finishes its work: refused, the row is B's.
      assert.equal(await write(app, 1, 999, old), 0, 'the late write of the old token changes nothing');
      assert.deepEqual(await app.row(1), [120n, fresh]);
      assert.equal(await write(app, 1, 200, fresh), 1, "B's write lands");
      assert.equal(await write(app, 1, 999, old), 0);
      assert.deepEqual(await app.row(1), [200n, fresh]);
      await second.release();
    });
  });
}
