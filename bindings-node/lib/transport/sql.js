'use strict';
// The SQL transport: runs the engine's batches of statements on PostgreSQL (with `pg`) or
// MySQL/MariaDB (with `mysql2`) and hands back each statement's rows, or a failure of the kinds
// the core decides on, plus the notices the server pushes. Batches, replies and notices are
// plain objects whose forms the core defines (core/src/backend/sql/data.rs); the statements are
// already written in the server's dialect by the core, which also decides what their rows mean.
// Nothing here knows of locks. It follows the transport contract of core/src/backend/sql/statement.rs,
// as the native transport (core/src/backend/sql/transport) does:
//
// - A batch names its connection: `main` (one per client, the same while it lives: MySQL's
//   named locks live on it), `listen` (PostgreSQL's LISTEN connection; every notification on
//   it is pushed as a `notified` notice) or `wait` (a MySQL blocking GET_LOCK: run on an idle
//   wait connection, a new one opened if none is idle, at most `maxWaitConnections`).
// - A connection runs one batch at a time, its statements in order, each in autocommit, and
//   stops at the first failing statement (a MySQL batch of several: as the one multi-statement
//   script the core rendered, `script`, in one round trip; the server stops at the first
//   failure): the batch's reply is that failure (a server error
//   with its SQLSTATE or MySQL error number, credentials scrubbed). A batch that began a
//   transaction (`BEGIN` first) and failed inside it is rolled back before anything else runs
//   on its connection (the backend's acquire holds row or advisory locks until COMMIT). Batches
//   on one connection run in the order they were asked for.
// - Every batch gets exactly one reply; nothing is retried here. A batch unanswered within its
//   time limit (`timeoutMs`: the response timeout, a wait batch's own wait on top) fails as
//   connectionLost and its connection is dropped; so does the batch on a connection that
//   drops (it may or may not have been applied). Batches queued behind it were never sent:
//   they run on the replacement.
// - A `main` connection that dropped is replaced by the next batch that names it; a `listen`
//   connection at once (again every RECONNECT_MS while the server cannot be reached), and it is
//   pinged every PING_INTERVAL_MS while it carries nothing else (a silent one is replaced). A
//   replacement pushes a `reconnected` notice as soon as it is open, before any reply on it:
//   the core then takes its named locks or LISTENs again. Wait connections carry no session
//   state: an idle one is kept for WAIT_IDLE_LIMIT_MS (and forgotten when the main connection
//   is replaced: the server may have restarted), a dropped one is forgotten.
// - Sockets are unref'd (an idle client never holds the process open; the driver's timer does
//   while the engine has work) until holdOpen(), which close() calls while releases go out.

const { performance } = require('node:perf_hooks');
const { makeError } = require('../errors');
const { requirePeer } = require('../peer');

/** How long a dropped listening connection waits between attempts to open its replacement. */
const RECONNECT_MS = 1000;
/** How often the listening connection is pinged (`SELECT 1`) while it carries nothing else. */
const PING_INTERVAL_MS = 10_000;
/**
 * How long an idle wait connection is kept before it is closed rather than reused (a server's
 * `wait_timeout` or a NAT may have dropped it silently).
 */
const WAIT_IDLE_LIMIT_MS = 60_000;
/** How long close() waits for a connection's polite goodbye before destroying its socket. */
const CLOSE_GRACE_MS = 1000;
/** PostgreSQL's integer types (int8, int2, int4, oid): handed back as integers, the rest as text. */
const PG_INTEGERS = new Set([20, 21, 23, 26]);
/** MySQL's integer column types (mysql2's names): handed back as integers, the rest as text. */
const MYSQL_INTEGERS = new Set(['LONGLONG', 'LONG', 'INT24', 'SHORT', 'TINY', 'YEAR']);
/** SQLSTATEs of a connection the server is ending (admin shutdown, crash shutdown, cannot connect now). */
const PG_CONNECTION_ENDING = new Set(['57P01', '57P02', '57P03']);
/** SQLSTATEs of refused credentials (invalid_authorization_specification, invalid_password). */
const PG_REFUSED = new Set(['28000', '28P01']);
/**
 * MySQL error numbers of refused credentials or rights to the database (access denied, to the
 * database, auth plugin failures).
 */
const MYSQL_REFUSED = new Set([1044, 1045, 1698, 1251, 2049, 1524]);
/**
 * MySQL error numbers of a connection that is ending (server shutdown, connection killed,
 * server gone, lost during a query, too many connections).
 */
const MYSQL_CONNECTION_ENDING = new Set([1040, 1053, 1077, 1078, 1079, 1080, 1152, 1153, 1156, 1158, 1159, 1160, 1161, 1927, 2006, 2013]);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// ---- values ----

/** An integer in decimal text as a number, or a BigInt beyond 2^53. */
function integer(text) {
  if (text === null || text === undefined) return null;
  const n = BigInt(text);
  return n >= -MAX_SAFE && n <= MAX_SAFE ? Number(n) : n;
}

/** A parameter of the core's form (null, an integer as a number or BigInt, text) for a driver. */
function param(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number' || typeof v === 'string') return v;
  // A BigInt beyond 2^53 (ids never get there): as decimal text, which both servers cast.
  if (typeof v === 'bigint') return v.toString();
  throw new Error(`a parameter that is ${typeof v}, not null, an integer or text`);
}

/** The URL's CA file (`sslrootcert`, `ssl-ca`); INVALID_ARGUMENT if it cannot be read. */
function readCaFile(file) {
  try {
    return require('node:fs').readFileSync(file, 'utf8');
  } catch (err) {
    throw makeError('INVALID_ARGUMENT', `cannot read the URL's CA file ${file}: ${err.code || err.message}`);
  }
}

/** The login's user: the URL's, else the OS user's (as libpq and the native transport). */
function userOf(plan) {
  return plan.user || process.env.USER || (plan.dialect === 'postgres' ? 'postgres' : 'root');
}

// ---- PostgreSQL ----

/** Result parsers: integers as integers, everything else as the server's text. */
const PG_TYPES = {
  getTypeParser: (oid) => (PG_INTEGERS.has(oid) ? integer : (text) => text),
};

/** The TLS options (of `pg` and `mysql2` alike) for the plan's `tls` (null: none). */
function tlsOptions(tls) {
  if (!tls) return undefined;
  const options = { rejectUnauthorized: tls.verify !== 'none' };
  if (tls.caPem) options.ca = tls.caPem;
  // verify-ca: the chain, not the name.
  if (tls.verify === 'ca') options.checkServerIdentity = () => undefined;
  return options;
}

/** One PostgreSQL connection. */
class PgLine {
  /** Opens a connection to `host`:`port` with `ssl` (false or `pg`'s TLS options). */
  static async open(plan, { host, port }, ssl, hooks) {
    const pg = requirePeer('pg', 'the PostgreSQL backend');
    const client = new pg.Client({
      host,
      port,
      user: userOf(plan),
      database: plan.database || undefined,
      // A function: pg would otherwise look for a password in PGPASSWORD and ~/.pgpass, which
      // the URL (the one source of a client's settings in every binding) did not name.
      password: () => (plan.password === null || plan.password === undefined ? '' : plan.password),
      ssl,
      connectionTimeoutMillis: plan.connectTimeoutMs,
      keepAlive: true,
      application_name: plan.applicationName || 'lockgate',
      types: PG_TYPES,
    });
    const line = new PgLine(client);
    if (hooks.background) line.socket.unref();
    // Before connect(): a failed connect also emits 'error' on some paths.
    client.on('error', (err) => hooks.dropped(line, err));
    client.on('end', () => hooks.dropped(line, new Error('the server closed the connection')));
    client.on('notification', (m) => hooks.notified(m.channel, m.payload || ''));
    await client.connect();
    return line;
  }

  constructor(client) {
    this.client = client;
  }

  get socket() {
    return this.client.connection && this.client.connection.stream;
  }

  async query(sql, params) {
    const r = await this.client.query({ text: sql, values: params.map(param), rowMode: 'array' });
    // rowCount is also a query's row count; the contract's `affected` is only for changes.
    const changes = r.command === 'INSERT' || r.command === 'UPDATE' || r.command === 'DELETE' || r.command === 'MERGE';
    return { affected: changes ? r.rowCount || 0 : 0, rows: r.rows || [] };
  }

  async end() {
    await this.client.end();
  }
}

/**
 * A `pg` or server error as the core's failure: server (with its SQLSTATE), connectionLost
 * for a connection that failed or is ending, other AUTHENTICATION for refused credentials.
 */
function pgFailure(err) {
  const code = err && err.code;
  const serverError = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && err.severity !== undefined;
  if (!serverError) return { failure: 'connectionLost' };
  if (PG_REFUSED.has(code)) return { failure: 'other', code: 'AUTHENTICATION' };
  if (code.startsWith('08') || PG_CONNECTION_ENDING.has(code)) return { failure: 'connectionLost' };
  return { failure: 'server', code };
}

// ---- MySQL / MariaDB ----

/** mysql2's column conversion: integers as integers, everything else as text. */
function mysqlCast(field, next) {
  if (MYSQL_INTEGERS.has(field.type)) return integer(field.string());
  if (field.type === 'NULL') return next();
  return field.string();
}

/** A mysql2 result (rows of a query, or a change's header) as the core's per-statement form. */
function mysqlResult(result) {
  if (Array.isArray(result)) return { affected: 0, rows: result };
  // mysql2's default FOUND_ROWS flag: affectedRows counts the rows an UPDATE matched, as
  // PostgreSQL does, not only those whose value it changed.
  return { affected: (result && result.affectedRows) || 0, rows: [] };
}

/** One MySQL/MariaDB connection. */
class MySqlLine {
  /** Opens a connection to `host`:`port` with `ssl` (false or TLS options). */
  static async open(plan, { host, port }, ssl, hooks) {
    const mysql = requirePeer('mysql2', 'the MySQL/MariaDB backend');
    const conn = mysql.createConnection({
      host,
      port,
      user: userOf(plan),
      password: plan.password === null || plan.password === undefined ? undefined : plan.password,
      database: plan.database || undefined,
      ssl: ssl || undefined,
      connectTimeout: plan.connectTimeoutMs,
      enableKeepAlive: true,
      charset: 'UTF8MB4_GENERAL_CI',
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
      rowsAsArray: true,
      typeCast: mysqlCast,
      // Several statements per query: the core hands a MySQL batch of several as one script
      // (parameters already in place as literals) that runs in one round trip.
      multipleStatements: true,
      // No LOAD DATA LOCAL (a server could ask for a client file).
      flags: ['-LOCAL_FILES'],
    });
    const line = new MySqlLine(conn);
    if (hooks.background) line.socket.unref();
    // Before connect(): an 'error' without a listener would be thrown.
    conn.on('error', (err) => hooks.dropped(line, err));
    conn.on('end', () => hooks.dropped(line, new Error('the server closed the connection')));
    await new Promise((resolve, reject) => {
      conn.connect((err) => (err ? reject(err) : resolve()));
    });
    return line;
  }

  constructor(conn) {
    this.conn = conn;
  }

  get socket() {
    return this.conn.stream;
  }

  query(sql, params) {
    return new Promise((resolve, reject) => {
      this.conn.query({ sql, values: params.map(param) }, (err, result) => {
        if (err) return reject(err);
        resolve(mysqlResult(result));
      });
    });
  }

  /**
   * Runs the core's multi-statement `script` of `count` statements as one query (one round
   * trip): the server answers each statement in turn and stops at the first failure, which
   * rejects; else one result per statement, in order.
   */
  script(script, count) {
    return new Promise((resolve, reject) => {
      this.conn.query({ sql: script }, (err, results, fields) => {
        if (err) return reject(err);
        // mysql2 nests the results (and their fields: a list per result set, nothing for a
        // change) once the server sent several; a single result comes back unnested.
        const nested = Array.isArray(results) && Array.isArray(fields) && fields.every((f) => f === undefined || Array.isArray(f));
        const got = nested ? results.length : 1;
        if (!nested || got !== count) {
          return reject(new ScriptMismatch(`the server answered ${got} results to a script of ${count} statements`));
        }
        resolve(results.map(mysqlResult));
      });
    });
  }

  end() {
    return new Promise((resolve) => this.conn.end(() => resolve()));
  }
}

/** A script's results that do not match its statements: a PROTOCOL failure, not the server's. */
class ScriptMismatch extends Error {}

/** A mysql2 or server error as the core's failure (see pgFailure). */
function mysqlFailure(err) {
  if (err instanceof ScriptMismatch) return { failure: 'other', code: 'PROTOCOL' };
  const errno = err && err.errno;
  if (err && err.fatal && !MYSQL_REFUSED.has(errno)) return { failure: 'connectionLost' };
  if (typeof errno !== 'number' || (err.sqlState === undefined && errno < 1000)) return { failure: 'connectionLost' };
  if (MYSQL_REFUSED.has(errno)) return { failure: 'other', code: 'AUTHENTICATION' };
  if (MYSQL_CONNECTION_ENDING.has(errno)) return { failure: 'connectionLost' };
  return { failure: 'server', code: String(errno) };
}

// ---- connections ----

/**
 * One named connection of the client (main, listen, or one wait connection): its batches, run
 * one at a time in the order asked, on its current line.
 */
class Slot {
  constructor(transport, conn) {
    this.t = transport;
    this.conn = conn;
    /** The open line, or null. */
    this.line = null;
    /** Whether a line is being opened. */
    this.opening = false;
    /** Batches waiting to run: { id, statements, timeoutMs }. */
    this.queue = [];
    /** The batch running, or null. */
    this.running = null;
    /** Whether a line was ever open here: its replacement is announced. */
    this.everOpen = false;
    /** The listening connection's timer: its next ping, or the next attempt to replace it. */
    this.keeper = null;
    /** When the last batch here ended (wait connections: how long it has been idle). */
    this.idleSince = performance.now();
  }

  /** Whether a batch given now would run at once. */
  get idle() {
    return this.line !== null && this.running === null && this.queue.length === 0;
  }

  /** How many batches are here. */
  get load() {
    return this.queue.length + (this.running === null ? 0 : 1);
  }

  submit(batch) {
    this.queue.push(batch);
    this.pulse();
  }

  /** Runs the next batch if nothing runs, opening a line first if there is none. */
  pulse() {
    if (this.t.closed || this.running !== null || this.queue.length === 0) return;
    if (this.line === null) return this.connect();
    const batch = this.queue.shift();
    this.running = batch;
    this.run(this.line, batch);
  }

  /** Adopts a line opened elsewhere (connect()'s check). */
  adopt(line) {
    this.line = line;
    this.everOpen = true;
    this.t.refs(line);
  }

  /**
   * Opens a line; batches queued meanwhile run on it, or fail if it cannot be opened. A
   * `background` attempt (the keeper's, which nobody waits for) does not hold the process open.
   */
  connect(background = false) {
    if (this.opening || this.t.closed) return;
    this.opening = true;
    this.t.openLine(this, background && !this.t.held).then(
      (line) => {
        this.opening = false;
        if (this.t.closed) return void line.end().catch(() => {});
        this.line = line;
        this.t.refs(line);
        // Before any reply on the new line: the core re-establishes the session state now.
        if (this.everOpen) this.t.driver.notice({ notice: 'reconnected', conn: this.conn });
        this.everOpen = true;
        if (this.conn === 'main') this.t.forgetIdleWaits();
        this.keep();
        this.pulse();
      },
      (err) => {
        this.opening = false;
        const why = `could not connect to ${this.t.plan.redacted}: ${this.t.describe(err)}`;
        const failure = this.t.failure(err, why);
        for (const batch of this.queue.splice(0)) this.t.settle(batch, failure);
        this.keep();
      },
    );
  }

  /**
   * The listening connection's keeper (it carries no requests of its own that would find it
   * dead): replaces it when there is none, else pings it when it has been quiet.
   */
  keep(delay) {
    if (this.conn !== 'listen' || !this.everOpen || this.t.closed) return;
    clearTimeout(this.keeper);
    const ping = this.line !== null;
    if (delay === undefined) delay = ping ? PING_INTERVAL_MS : RECONNECT_MS;
    this.keeper = setTimeout(() => {
      this.keeper = null;
      if (this.t.closed || this.opening) return;
      if (this.line === null) return this.connect(true);
      if (!this.idle) return this.keep();
      const statements = [{ sql: 'SELECT 1', params: [] }];
      this.submit({ id: null, statements, timeoutMs: this.t.plan.commandTimeoutMs, internal: () => this.keep() });
    }, delay);
    this.keeper.unref();
  }

  /**
   * Runs `batch`'s statements in order on `line`, stopping at the first failure: a MySQL batch
   * of several as the one script the core rendered for it (one round trip), else one at a time.
   */
  async run(line, batch) {
    const { t } = this;
    const ms = batch.timeoutMs;
    batch.timer = setTimeout(() => {
      const why = `no answer within ${ms} ms (the response timeout, and a wait batch's own wait)`;
      this.drop(line, new Error(why), true);
    }, ms);
    batch.timer.unref();
    let results = [];
    let reply;
    // Whether the batch's own transaction may be open (its BEGIN was sent and ran or may have).
    let began = false;
    const transaction = batch.statements.length > 0 && /^\s*BEGIN\b/i.test(batch.statements[0].sql);
    try {
      if (typeof batch.script === 'string' && line.script) {
        began = transaction;
        results = await line.script(batch.script, batch.statements.length);
      } else {
        for (const s of batch.statements) {
          if (batch.settled) return;
          results.push(await line.query(s.sql, s.params || []));
          began = transaction;
        }
      }
    } catch (err) {
      if (batch.settled) return;
      reply = t.failure(err, t.describe(err));
      // Anything but a statement the server refused leaves the connection in a state
      // unknown here: it is not used again (as the native transport closes it).
      if (reply.failure !== 'server') {
        t.settle(batch, reply);
        return this.drop(line, err, true);
      }
      // A failure inside the batch's own transaction leaves it open (PostgreSQL: aborted;
      // MySQL: holding its row locks): it is rolled back before anything else runs here,
      // or, if that fails too, the connection is dropped (the server rolls back then).
      if (began) {
        try {
          await line.query('ROLLBACK', []);
        } catch (rollback) {
          t.settle(batch, reply);
          return this.drop(line, rollback, true);
        }
      }
    }
    if (batch.settled) return;
    t.settle(batch, reply || { reply: 'rows', results });
    if (this.running === batch) {
      this.running = null;
      this.idleSince = performance.now();
      this.pulse();
    }
  }

  /**
   * `line` dropped (or, `destroy`, is dropped here): the batch on it fails as connectionLost;
   * those queued run on a replacement.
   */
  drop(line, err, destroy = false) {
    if (line !== this.line) return;
    this.line = null;
    if (destroy && line.socket) line.socket.destroy();
    const running = this.running;
    this.running = null;
    if (running !== null) {
      const message = `the connection to ${this.t.plan.redacted} was lost: ${this.t.describe(err)}`;
      this.t.settle(running, { failure: 'connectionLost', message });
    }
    if (this.conn === 'wait' && this.queue.length === 0) this.t.forgetWait(this);
    this.keep(0);
    this.pulse();
  }

  /** Fails what is here and ends the line (close()). */
  async close() {
    clearTimeout(this.keeper);
    const lost = { failure: 'connectionLost', message: 'the client is closed' };
    if (this.running !== null) this.t.settle(this.running, lost);
    this.running = null;
    for (const batch of this.queue.splice(0)) this.t.settle(batch, lost);
    const line = this.line;
    this.line = null;
    if (line === null) return;
    // Politely (PostgreSQL ends the session's LISTENs, MySQL releases its named locks at once
    // either way), but not for longer than CLOSE_GRACE_MS.
    let timer;
    await Promise.race([
      line.end().catch(() => {}),
      new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS))),
    ]);
    clearTimeout(timer);
    if (line.socket) line.socket.destroy();
  }
}

// ---- the transport ----

class SqlTransport {
  constructor(driver, plan) {
    this.driver = driver;
    this.plan = plan;
    this.postgres = plan.dialect === 'postgres';
    this.Line = this.postgres ? PgLine : MySqlLine;
    this.main = new Slot(this, 'main');
    this.listen = new Slot(this, 'listen');
    /** The core's batched refreshes of its waiters' rows: never queued behind main's batches. */
    this.refresh = new Slot(this, 'refresh');
    /** The wait connections' slots (at most maxWaitConnections). */
    this.waits = [];
    /** Set by holdOpen(): sockets stay ref'd until closed. */
    this.held = false;
    this.closed = false;
  }

  /** Opens a line for `slot`: the plan's hosts in order, the first that accepts. */
  async openLine(slot, background = false) {
    const hooks = {
      background,
      dropped: (line, err) => slot.drop(line, err),
      notified: (channel, payload) => {
        if (!this.closed) this.driver.notice({ notice: 'notified', channel, payload });
      },
    };
    let last;
    for (const host of this.plan.hosts) {
      try {
        return await this.openTo(host, hooks);
      } catch (err) {
        last = err;
        // Refused credentials are refused by every host.
        if (this.failure(err, '').code === 'AUTHENTICATION') throw err;
      }
    }
    throw last;
  }

  /** A line to `host` with the plan's TLS (falling back to plaintext only where it says so). */
  async openTo(host, hooks) {
    const { tls } = this.plan;
    try {
      return await this.Line.open(this.plan, host, tls ? tlsOptions(tls) : false, hooks);
    } catch (err) {
      // sslmode=prefer / ssl-mode=PREFERRED: a server without TLS is spoken to in plaintext.
      const noTls = /does not support (SSL|secure connection)/i.test(String(err && err.message));
      if (tls && tls.optional && noTls) return this.Line.open(this.plan, host, false, hooks);
      throw err;
    }
  }

  /** Refs or unrefs `line`'s socket as this transport is held or not. */
  refs(line) {
    const socket = line.socket;
    if (!socket) return;
    if (this.held) socket.ref();
    else socket.unref();
  }

  /** A message without the URL's password (server and driver errors may echo input). */
  scrub(message) {
    const { password } = this.plan;
    return password ? String(message).split(password).join('***') : String(message);
  }

  /** An error in words (its code if it has one), scrubbed. */
  describe(err) {
    // Node's AggregateError (every address of a name refused) has no message of its own.
    const inner = err && Array.isArray(err.errors) ? err.errors.map((e) => e.message).join('; ') : '';
    const message = (err && err.message) || inner || String(err);
    const code = err && (err.code || err.errno);
    return this.scrub(code && !message.includes(String(code)) ? `${message} (${code})` : message);
  }

  /** An error as the core's failure form, with `message`. */
  failure(err, message) {
    const f = (this.postgres ? pgFailure : mysqlFailure)(err);
    f.message = this.scrub(message);
    return f;
  }

  // ---- requests ----

  perform(req) {
    const batch = { id: req.id, statements: req.statements, script: req.script, timeoutMs: req.timeoutMs || this.plan.commandTimeoutMs };
    if (this.closed) return this.later(batch, { failure: 'connectionLost', message: 'the client is closed' });
    if (!Array.isArray(req.statements)) {
      return this.later(batch, { failure: 'other', code: 'PROTOCOL', message: 'a batch without statements' });
    }
    // Statements the core could not render as one script: its failure is the reply.
    if (req.refused) return this.later(batch, req.refused);
    switch (req.conn) {
      case 'main':
        return this.main.submit(batch);
      case 'listen':
        return this.listen.submit(batch);
      case 'refresh':
        return this.refresh.submit(batch);
      case 'wait':
        return this.waitSlot().submit(batch);
      default:
        return this.later(batch, { failure: 'other', code: 'PROTOCOL', message: `a batch on connection ${req.conn}` });
    }
  }

  /**
   * The wait connection for a new wait batch: an idle one, else a new one while there are
   * fewer than maxWaitConnections (the core never asks for more at once), else the least busy.
   */
  waitSlot() {
    const now = performance.now();
    for (const s of this.waits) if (s.idle && now - s.idleSince > WAIT_IDLE_LIMIT_MS) this.endWait(s);
    const idle = this.waits.find((s) => s.idle);
    if (idle) return idle;
    if (this.waits.length < (this.plan.maxWaitConnections || 4)) {
      const slot = new Slot(this, 'wait');
      this.waits.push(slot);
      return slot;
    }
    return this.waits.reduce((a, b) => (b.load < a.load ? b : a));
  }

  /** Forgets a wait connection that dropped. */
  forgetWait(slot) {
    this.waits = this.waits.filter((s) => s !== slot);
  }

  /** Closes an idle wait connection. */
  endWait(slot) {
    this.forgetWait(slot);
    slot.close();
  }

  /** Closes the idle wait connections (the main one was replaced: the server may have restarted). */
  forgetIdleWaits() {
    for (const s of this.waits) if (s.idle) this.endWait(s);
  }

  /** Answers `batch` once (a late answer after a timeout or a drop is dropped). */
  settle(batch, reply) {
    if (batch.settled) return;
    batch.settled = true;
    clearTimeout(batch.timer);
    if (batch.internal) return batch.internal(reply);
    this.driver.answer(batch.id, reply);
  }

  /** Answers after the driver's current pump (never from inside `perform`). */
  later(batch, reply) {
    queueMicrotask(() => this.settle(batch, reply));
  }

  /** Keeps every socket ref'd while close() releases. */
  holdOpen() {
    this.held = true;
    for (const slot of this.slots()) if (slot.line) this.refs(slot.line);
  }

  slots() {
    return [this.main, this.listen, this.refresh, ...this.waits];
  }

  /** Fails what is pending and ends every connection (MySQL's named locks end with them). */
  async close() {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.slots().map((s) => s.close()));
  }
}

/**
 * Opens the transport of a `postgres://`, `postgresql://`, `mysql://` or `mariadb://` URL:
 * opens the main connection (ConnectionError if no host accepts within connectTimeoutMs,
 * AuthenticationError if the server refuses the login; the password never in a message); the
 * core's `plan` says where and how.
 */
async function open(driver, plan) {
  // The plan's driver first: a missing one is an UnsupportedError, not a connection failure.
  if (plan.dialect === 'postgres') requirePeer('pg', 'the PostgreSQL backend');
  else requirePeer('mysql2', 'the MySQL/MariaDB backend');
  if (plan.tls && !plan.tls.caPem && plan.tls.caFile) plan = { ...plan, tls: { ...plan.tls, caPem: readCaFile(plan.tls.caFile) } };
  const t = new SqlTransport(driver, plan);
  try {
    t.main.adopt(await t.openLine(t.main));
  } catch (err) {
    await t.close();
    const f = t.failure(err, '');
    const code = f.code === 'AUTHENTICATION' ? 'AUTHENTICATION' : 'CONNECTION';
    const what = code === 'AUTHENTICATION' ? 'refused the login of' : 'could not be reached at';
    throw makeError(code, `the database ${what} ${plan.redacted}: ${t.describe(err)}`);
  }
  return t;
}

module.exports = { open };
