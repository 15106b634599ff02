'use strict';
// The memcached transport: performs the engine's four commands (add, gets, cas, stats) with the
// `memcached` npm package, one client per server of the URL (the core picks each lock's server:
// core/src/backend/memcached/key.rs), and hands back what each answered. Requests and replies are
// plain objects whose forms the core defines (core/src/backend/memcached/data.rs); which key,
// which expiry, what an answer means are the core's. Nothing here decides anything about locks.
//
// Where the package (2.2) falls short, and what this file does instead:
// - Its `cas` answers `false` both for EXISTS and NOT_FOUND: this file reports EXISTS, and the
//   core reads the item again, finding it gone if it was NOT_FOUND (one command more, same
//   outcome).
// - It marks a server that failed as dead for a while and fails its requests at once: each
//   server's client is replaced by a new one after any failure of the connection (and after a
//   request unanswered for `commandTimeoutMs`: a frozen server, a silent proxy), so the next
//   request connects again, as the native transport does. A silent request also replaces every
//   other server's idle client (a silence is most often the network's or a proxy's, and an idle
//   connection cannot show it until a request waits a whole response timeout on it).
// - A socket the server closes (a load balancer that accepts and closes at once, a server that
//   stops) only leaves the package's pool: the requests written on it are never called back.
//   This file watches each socket the package opens and, when one closes with queries of its own
//   unanswered, fails this transport's requests in flight to its server with CONNECTION and
//   replaces the client (every request is also bounded by `commandTimeoutMs` regardless). An
//   idle socket closing as a request goes out on a new one fails nothing.
// - It keeps idle sockets open for `idle` ms (ref'd): set to 1 s, so a process that forgot to
//   close its client ends soon after its last lock call.
// - No SASL or TLS in its text protocol: the core refuses a login in the URL before this runs.

const { makeError } = require('../errors');
const { requirePeer } = require('../peer');

/** How long the package keeps an idle socket open. */
const IDLE_MS = 1000;

class Server {
  constructor(transport, location) {
    this.transport = transport;
    this.location = location;
    this.client = null;
    /** Requests on the wire to this server. */
    this.pending = 0;
  }

  /** The server's current client (a new one after a failure). */
  current() {
    if (this.client === null) {
      const { plan } = this.transport;
      const Memcached = requirePeer('memcached', 'the memcached backend');
      this.client = new Memcached(this.location, {
        timeout: plan.connectTimeoutMs,
        retries: 0,
        retry: 0,
        failures: 0,
        remove: false,
        poolSize: 1,
        idle: IDLE_MS,
        maxKeySize: 250,
      });
      // The package emits failures as events too; the request's callback reports them.
      this.client.on('failure', () => {});
      this.client.on('issue', () => {});
      this.watchSockets(this.client);
    }
    return this.client;
  }

  /** Fails this server's requests in flight when a socket of `client` closes under them. */
  watchSockets(client) {
    const connect = client.connect;
    client.connect = (server, callback) =>
      connect.call(client, server, (err, socket) => {
        if (socket && typeof socket.once === 'function' && !socket.lockgateWatched) {
          socket.lockgateWatched = true;
          socket.once('close', () => {
            // A socket closed with none of its own queries unanswered (the package's idle
            // timeout, say) lost nothing: the requests in flight are on another socket.
            const unanswered = Array.isArray(socket.metaData) ? socket.metaData.length : 1;
            if (this.client !== client || this.pending === 0 || unanswered === 0) return;
            this.replace();
            this.transport.failServer(this, `memcached at ${this.location} closed the connection`);
          });
        }
        callback(err, socket);
      });
  }

  /** Drops the current client (its sockets close); the next request makes another. */
  replace() {
    if (this.client !== null) {
      const old = this.client;
      this.client = null;
      try {
        old.end();
      } catch (_) {
        // Already closed.
      }
    }
  }
}

class MemcachedTransport {
  constructor(driver, plan) {
    this.driver = driver;
    this.plan = plan;
    this.servers = plan.servers.map((s) => new Server(this, hostPort(s.host, s.port)));
    /** request id -> its timeout timer; a request is answered once. */
    this.inFlight = new Map();
    this.closed = false;
  }

  perform(req) {
    const { id } = req;
    const server = this.servers[req.server];
    if (this.closed || server === undefined) {
      const why = this.closed ? 'the client is closed' : `no memcached server ${req.server}`;
      queueMicrotask(() => this.driver.failed(id, makeError(this.closed ? 'CONNECTION' : 'PROTOCOL', why)));
      return;
    }
    const ms = this.plan.commandTimeoutMs;
    const timer = setTimeout(() => {
      if (!this.inFlight.has(id)) return;
      server.replace();
      for (const other of this.servers) if (other.pending === 0) other.replace();
      this.fail(id, `memcached at ${server.location} did not answer within the response timeout (${ms} ms); the connection is replaced`);
    }, ms);
    timer.unref();
    this.inFlight.set(id, { timer, server });
    server.pending += 1;
    const client = server.current();
    const lost = (err) => {
      server.replace();
      this.fail(id, `memcached at ${server.location}: ${(err && err.message) || err}`);
    };
    switch (req.command) {
      case 'add':
        return client.add(req.key, req.value, req.exptime, (err, ok) => {
          if (err && err.notStored) return this.settle(id, { status: 'NOT_STORED' });
          if (err) return lost(err);
          this.settle(id, { status: ok ? 'STORED' : 'NOT_STORED' });
        });
      case 'gets':
        return client.gets(req.key, (err, data) => {
          if (err) return lost(err);
          if (data === undefined || data === null || data[req.key] === undefined) return this.settle(id, null);
          this.settle(id, { value: String(data[req.key]), cas: String(data.cas) });
        });
      case 'cas':
        return client.cas(req.key, req.value, req.cas, req.exptime, (err, ok) => {
          if (err) return lost(err);
          this.settle(id, { status: ok ? 'STORED' : 'EXISTS' });
        });
      case 'stats':
        return client.stats((err, results) => {
          if (err) return lost(err);
          const uptime = Array.isArray(results) && results.length === 1 ? results[0].uptime : undefined;
          if (uptime === undefined) return this.fail(id, `memcached at ${server.location}: a stats answer without uptime`, 'PROTOCOL');
          this.settle(id, { uptime: String(uptime) });
        });
      default:
        return this.fail(id, `the memcached transport cannot perform ${req.command}`, 'PROTOCOL');
    }
  }

  /** Fails every request in flight to `server` with CONNECTION. */
  failServer(server, message) {
    for (const [id, entry] of [...this.inFlight]) if (entry.server === server) this.fail(id, message);
  }

  /** Answers request `id` once (a late answer after a timeout is dropped). */
  settle(id, reply) {
    if (this.done(id)) this.driver.answer(id, reply);
  }

  fail(id, message, code = 'CONNECTION') {
    if (this.done(id)) this.driver.failed(id, makeError(code, message));
  }

  /** Forgets request `id`; false if it was already answered. */
  done(id) {
    const entry = this.inFlight.get(id);
    if (entry === undefined) return false;
    clearTimeout(entry.timer);
    entry.server.pending -= 1;
    this.inFlight.delete(id);
    return true;
  }

  /** Every server's version, within connectTimeoutMs: fails if none answers. */
  async check() {
    const ask = (server) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve(`no answer within ${this.plan.connectTimeoutMs} ms`), this.plan.connectTimeoutMs);
        server.current().version((err, versions) => {
          clearTimeout(timer);
          if (err) server.replace();
          resolve(err ? String(err.message || err) : versions === undefined ? 'no version' : null);
        });
      });
    const results = await Promise.all(this.servers.map(ask));
    if (results.every((r) => r !== null)) {
      throw makeError('CONNECTION', `${this.plan.redacted}: no memcached server is reachable: ${results[0]}`);
    }
  }

  holdOpen() {}

  async close() {
    if (this.closed) return;
    this.closed = true;
    for (const id of [...this.inFlight.keys()]) this.fail(id, 'the client is closed');
    for (const s of this.servers) s.replace();
  }
}

function hostPort(host, port) {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Opens the transport of a `memcached://` URL: one client per server, and checks that one of
 * them answers (ConnectionError if none does within connectTimeoutMs); the core's `plan` says
 * where.
 */
async function open(driver, plan) {
  requirePeer('memcached', 'the memcached backend');
  const t = new MemcachedTransport(driver, plan);
  try {
    await t.check();
  } catch (err) {
    await t.close();
    throw err;
  }
  return t;
}

module.exports = { open };
