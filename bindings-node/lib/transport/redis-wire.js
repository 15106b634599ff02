'use strict';
// Part of the Redis transport (lib/transport/redis.js): the lean command connection of a client
// connected from a URL, one plain (or TLS) socket whose
// bytes go straight to and from the engine, which encodes its pipelines as RESP and parses the
// replies itself (lockgate_core::redis::wire over the core's codec, lockgate_core::redis::resp). It replaces one ioredis `call` per engine request, whose
// per-command objects, reply conversion and timers made the uncontended acquire+release
// CPU-bound in Node. What is left here is plumbing: connecting (TLS, AUTH, SELECT), writing,
// handing over what was read, noticing that the connection went, and reconnecting.
//
// - Connecting: on the first write after the connection went (never on a timer, so an idle
//   process still exits), within `connectTimeout`; the bytes written meanwhile wait for it.
//   The handshake is AUTH (when the URL or options carry a password), SELECT (when a database
//   is named) and a PING, whose replies are single lines.
// - Losing it: a socket error or close, a reply stream the engine cannot parse, or no reply
//   progress for `commandTimeout` while requests wait. The owner is told (`wireClosed(err)`) at
//   once and fails what was in flight; late events of the old socket are ignored.
// - Exit: the socket is unref'd once ready, like the ioredis connections of this package; the
//   driver's timer keeps the process alive while the engine has work. `ref()` undoes it for
//   close().

const net = require('node:net');
const tls = require('node:tls');
const { performance } = require('node:perf_hooks');

const now = () => performance.now();

/** The reply Redis gives AUTH when no password is configured; ioredis ignores it too. */
const NO_PASSWORD_SET = /no password is set|without any password configured/;

/** RESP for one command of string arguments (handshakes only; the engine encodes its own). */
function command(...args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return s;
}

/** redisOptions keys this connection honours; any other key makes connect() use ioredis. */
const WIRE_REDIS_OPTIONS = [
  'tls',
  'username',
  'password',
  'db',
  'connectTimeout',
  'commandTimeout',
  'keepAlive',
  'noDelay',
  'family',
];

/** Whether a client with connect()'s `opts` can use this connection: one whose `redisOptions` hold only keys it understands. */
function wireEligible(opts) {
  const ro = opts.redisOptions;
  return ro === undefined || Object.keys(ro).every((k) => WIRE_REDIS_OPTIONS.includes(k));
}

class WireConnection {
  /**
   * @param {object} at the server, as the core parsed its URL (`host`, `port`, `username`,
   *   `password`, `db`, `tls`)
   * @param {object} opts connect()'s options (`redisOptions`)
   * @param {{ connect: number, command: number }} timeouts in ms
   * @param {{ wireData(buf: Buffer): number, wireFlush(): void, wireClosed(err: Error): void }} owner
   *   `wireData` hands read bytes to the engine and returns how many requests still wait (-1:
   *   the stream broke), `wireFlush` then performs what the engine made of them, `wireClosed`
   *   fails what was in flight.
   */
  constructor(at, opts, timeouts, owner) {
    const ro = opts.redisOptions || {};
    this.owner = owner;
    this.host = at.host;
    this.port = at.port;
    this.tls = at.tls || (ro.tls !== undefined && ro.tls !== false);
    this.tlsOptions = typeof ro.tls === 'object' && ro.tls !== null ? ro.tls : {};
    this.username = at.username ?? ro.username;
    this.password = at.password ?? ro.password;
    this.db = at.db || ro.db || 0;
    this.family = ro.family;
    this.noDelay = ro.noDelay !== false;
    this.keepAlive = ro.keepAlive ?? 0;
    this.connectTimeout = timeouts.connect;
    this.commandTimeout = timeouts.command;
    /** The current socket (connecting, handshaking or ready), or null. */
    this.sock = null;
    this.ready = false;
    /** Requests written before the socket was ready. */
    this.queue = [];
    /** Resolves when the current socket is ready, rejects if it goes first. */
    this.opening = null;
    /** Whether requests wait for replies, and since when nothing arrived for them. */
    this.waiting = false;
    this.since = 0;
    this.timer = null;
    this.settle = null;
    this.connectTimer = undefined;
    /** The handshake of the current socket while it runs: `{ steps, answered, pending }`. */
    this.handshake = null;
    /** Where the socket reads into (see connect()). */
    this.readBuffer = Buffer.allocUnsafe(64 * 1024);
    this.held = false;
  }

  /** Connects now (connect() does, to report a bad URL or credentials at once). */
  open() {
    if (this.sock === null) this.connect();
    return this.opening;
  }

  /** Writes encoded requests (a UTF-8 string or bytes), connecting first if there is no connection. */
  write(bytes) {
    if (!this.waiting) {
      this.waiting = true;
      this.since = now();
      if (this.timer === null) this.armTimer(this.commandTimeout);
    }
    if (this.ready) {
      this.sock.write(bytes);
      return;
    }
    this.queue.push(bytes);
    if (this.sock === null) this.connect();
  }

  connect() {
    let sock = null;
    const options = {
      host: this.host,
      port: this.port,
      ...this.tlsOptions,
      // Reads land in one reused buffer and reach us without the stream machinery ('data'
      // events, chunk objects): each is consumed (copied into the engine) before we return.
      onread: {
        buffer: this.readBuffer,
        callback: (n, buf) => {
          if (sock === this.sock) this.read(sock, buf.subarray(0, n));
        },
      },
    };
    if (this.family !== undefined) options.family = this.family;
    sock = this.tls ? tls.connect(options) : net.connect(options);
    this.sock = sock;
    this.ready = false;
    this.opening = new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // Lazy reconnects have no one awaiting them: their failure reaches the engine via wireClosed().
    this.opening.catch(() => {});
    sock.setNoDelay(this.noDelay);
    sock.setKeepAlive(true, this.keepAlive);
    this.connectTimer = setTimeout(
      () => this.drop(sock, new Error(`connect ETIMEDOUT: no ready connection within ${this.connectTimeout} ms`)),
      this.connectTimeout,
    );
    const steps = [];
    if (this.password !== undefined && this.password !== null && this.password !== '') {
      const args = this.username ? [this.username, this.password] : [this.password];
      steps.push({ bytes: command('AUTH', ...args), auth: true });
    }
    if (this.db) steps.push({ bytes: command('SELECT', String(this.db)), auth: false });
    steps.push({ bytes: command('PING'), auth: false });
    this.handshake = { steps, answered: 0, pending: '' };
    sock.once(this.tls ? 'secureConnect' : 'connect', () => sock.write(steps.map((s) => s.bytes).join('')));
    sock.on('error', (err) => this.drop(sock, err));
    sock.on('close', () => this.drop(sock, new Error('Connection is closed.')));
  }

  /** Bytes `sock` (the current socket) read: the handshake's replies, then the engine's. */
  read(sock, buf) {
    if (this.ready) {
      this.received(sock, buf);
      return;
    }
    // Handshake replies are single lines: +OK / +PONG, or -ERR ...
    const h = this.handshake;
    h.pending += buf.toString('latin1');
    let eol;
    while (h.answered < h.steps.length && (eol = h.pending.indexOf('\r\n')) >= 0) {
      const reply = Buffer.from(h.pending.slice(0, eol), 'latin1').toString('utf8');
      h.pending = h.pending.slice(eol + 2);
      const step = h.steps[h.answered++];
      if (reply[0] === '-' && !(step.auth && NO_PASSWORD_SET.test(reply))) {
        const err = new Error(reply.slice(1));
        err.name = 'ReplyError';
        this.drop(sock, err);
        return;
      }
      if (reply[0] !== '+' && reply[0] !== '-') {
        this.drop(sock, new Error(`unexpected handshake reply ${JSON.stringify(reply.slice(0, 40))}`));
        return;
      }
    }
    if (h.answered < h.steps.length) return;
    this.handshake = null;
    this.becomeReady(sock);
    if (h.pending.length) this.received(sock, Buffer.from(h.pending, 'latin1'));
  }

  /** The handshake went through: what waited is written, and the socket stops holding the process. */
  becomeReady(sock) {
    clearTimeout(this.connectTimer);
    this.ready = true;
    if (!this.held) sock.unref();
    const queued = this.queue;
    this.queue = [];
    for (const q of queued) sock.write(q);
    if (this.waiting) this.since = now();
    this.settle.resolve();
  }

  /** Hands read bytes to the engine (a stream it cannot parse ends the connection), then lets the driver pump. */
  received(sock, buf) {
    const left = this.owner.wireData(buf);
    if (left < 0) {
      this.drop(sock, new Error('the reply stream from the server could not be parsed'));
      return;
    }
    this.since = now();
    this.waiting = left > 0;
    // Only now: what the engine sends in reply must find `waiting` already updated.
    this.owner.wireFlush();
  }

  /**
   * Gives up `sock` (if it is still the current one): destroys it, fails what was in flight
   * (and what waited for it to connect) with `err`, and lets the next write connect afresh.
   */
  drop(sock, err) {
    if (sock !== this.sock) return;
    clearTimeout(this.connectTimer);
    this.sock = null;
    this.queue = [];
    this.waiting = false;
    if (!this.ready) this.settle.reject(err);
    this.ready = false;
    sock.destroy();
    this.owner.wireClosed(err);
  }

  /** One timer for the reply progress while requests wait; re-armed only when it fires. */
  armTimer(ms) {
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.waiting || this.sock === null) return;
      const idle = now() - this.since;
      // While connecting, connectTimeout is the limit (becomeReady() restarts the count).
      if (idle >= this.commandTimeout && this.ready) {
        this.drop(this.sock, new Error(`Command timed out: no reply within ${this.commandTimeout} ms`));
      } else {
        this.armTimer(this.ready ? this.commandTimeout - idle : this.commandTimeout);
      }
    }, Math.max(1, Math.ceil(ms)));
    this.timer.unref();
  }

  /** Keeps the process alive while the connection is open (close() releasing leases). */
  ref() {
    this.held = true;
    if (this.sock) this.sock.ref();
  }

  /** Ends the connection (after what was written); resolves once it is closed. */
  async close() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const sock = this.sock;
    if (sock === null) return;
    await new Promise((resolve) => {
      const force = setTimeout(() => sock.destroy(), 1000);
      sock.once('close', () => {
        clearTimeout(force);
        resolve();
      });
      if (this.ready) sock.end(command('QUIT'));
      else sock.destroy();
    });
  }
}

module.exports = { WireConnection, wireEligible, NO_PASSWORD_SET, command };
