'use strict';
// The ZooKeeper transport: performs the engine's ZooKeeper operations with node-zookeeper-client
// in the client's session (and the extra sessions the core asks for, sized from short leases),
// and hands back what came of each — a reply, or a failure of the
// kinds the core decides on — plus the watch events and session changes (disconnected,
// reconnected, expired) the ensemble pushes. Requests, replies and notices are plain objects
// whose forms the core defines (core/src/backend/zookeeper/data.rs); which node to create, whom to
// watch and what a reply means are the core's. Nothing here decides anything about locks.
//
// Where node-zookeeper-client 1.1 falls short, and what this file does instead (some of it
// through the library's internals, hence package.json's ~1.1.3: patch releases only):
// - No create2 (a create answered with the new node's stat): a create goes out as a plain
//   CREATE on the library's connection, and the new node's stat is what a creation sets —
//   czxid = mzxid = the zxid of the reply (ZooKeeper applies writes one at a time and stamps a
//   write's reply with the zxid it was applied at), versions 0, no children, owned by this
//   session when ephemeral.
// - No container nodes: a missing parent is created as a one-op multi with the container flag
//   (the server makes it a createContainer); the library cannot parse that op's result, so
//   `patchLibrary` teaches its multi reply parser the create2-shaped results (path + stat).
// - Transaction.check turns version 0 into "any version": the check's multi is built here.
// - An unknown server error code throws inside the library's socket handler: `patchLibrary`
//   makes it an ordinary exception carrying the code.
// - No read timeout (a member that stops answering with its socket open is never left): a
//   socket that has delivered nothing for 2/3 of the session timeout (while connected; the
//   per-member connect timeout during the handshake) is dropped, as ZooKeeper's Java client
//   does, and so is one with a request unanswered for `commandTimeoutMs` (as the native
//   transport and the Redis socket do); the library then fails what was in flight with a
//   connection loss and moves on to the next member within the session.
// - Its reconnect loop keeps ref'd timers and sockets, so an idle process whose ensemble is
//   down would never end: its member rotation is replaced per client by the same one unref'd.
// - No TLS: `zookeeper+tls://` is refused at connect with UnsupportedError.

const { performance } = require('node:perf_hooks');
const { makeError } = require('../errors');
const { requirePeer } = require('../peer');

// node-zookeeper-client is an optional peer dependency: load() fills these when the first
// ZooKeeper client opens (UnsupportedError naming the npm line when it is not installed).
let zookeeper, jute, STATES, ACL, Exception, State, OP, FAILURES, REFUSED;
/** Op codes the library does not name: creates answered with path and stat. */
const CREATE2 = 15;
const CREATE_CONTAINER = 19;
const CREATE_TTL = 21;

const MODES = { persistent: 0, ephemeral: 1, ephemeralSequential: 3, container: 4 };
const EVENTS = { 1: 'created', 2: 'deleted', 3: 'dataChanged', 4: 'childrenChanged' };
/** Loads node-zookeeper-client and patches its gaps, once. */
function load() {
  if (zookeeper !== undefined) return;
  const backend = 'the ZooKeeper backend';
  const lib = requirePeer('node-zookeeper-client', backend);
  jute = requirePeer('node-zookeeper-client', backend, 'node-zookeeper-client/lib/jute');
  ({ STATES } = requirePeer('node-zookeeper-client', backend, 'node-zookeeper-client/lib/ConnectionManager'));
  ({ ACL, Exception, State } = lib);
  OP = jute.OP_CODES;
  /** The library's error codes the core tells apart (SESSION_MOVED: not applied, retry). */
  FAILURES = new Map([
    [Exception.NO_NODE, 'noNode'],
    [Exception.NODE_EXISTS, 'nodeExists'],
    [Exception.BAD_VERSION, 'badVersion'],
    [Exception.NOT_EMPTY, 'notEmpty'],
    [Exception.CONNECTION_LOSS, 'connectionLoss'],
    [Exception.OPERATION_TIMEOUT, 'connectionLoss'],
    [-118, 'connectionLoss'],
    [Exception.SESSION_EXPIRED, 'sessionExpired'],
  ]);
  /** Refused credentials or rights: never retried. */
  REFUSED = new Set([Exception.NO_AUTH, Exception.AUTH_FAILED]);
  patchLibrary();
  zookeeper = lib;
}

const DELETED = Object.freeze({ reply: 'deleted' });
const CHECKED = Object.freeze({ reply: 'checked' });
const EMPTY = Buffer.alloc(0);

// ---- the library's gaps (see the top of the file) ----

function patchLibrary() {
  const T = jute.TransactionResponse.prototype;
  if (T.lockgateCreate2) return;
  T.lockgateCreate2 = true;
  // The library's parser plus the create2-shaped results (a container, TTL or create2 op).
  T.deserialize = function deserialize(buffer, offset) {
    let read = 0;
    for (;;) {
      const header = new jute.protocol.MultiHeader();
      read += header.deserialize(buffer, offset + read);
      if (header.done) return read;
      const result = { type: header.type };
      const record = (r) => {
        r.setChrootPath(this.chrootPath);
        read += r.deserialize(buffer, offset + read);
        return r;
      };
      switch (header.type) {
        case OP.CREATE:
          result.path = record(new jute.protocol.CreateResponse()).path;
          break;
        case CREATE2:
        case CREATE_CONTAINER:
        case CREATE_TTL:
          result.path = record(new jute.protocol.CreateResponse()).path;
          result.stat = record(new jute.data.Stat());
          break;
        case OP.DELETE:
        case OP.CHECK:
          break;
        case OP.SET_DATA:
          result.stat = record(new jute.protocol.SetDataResponse()).stat;
          break;
        case OP.ERROR:
          result.err = record(new jute.protocol.ErrorResponse()).err;
          break;
        default:
          throw new Error(`Unknown type: ${header.type} in transaction response.`);
      }
      this.results.push(result);
    }
  };
  const create = Exception.create;
  Exception.create = function createKnownOrNot(code, path) {
    try {
      return create(code, path);
    } catch {
      const e = create(Exception.SYSTEM_ERROR, path);
      e.code = code;
      e.message = `Exception: ZooKeeper error [${code}]${path ? `@${path}` : ''}`;
      return e;
    }
  };
}

// ---- conversions ----

const long = (buf) => buf.readBigInt64BE(0);

/** A library stat as the core's `{ czxid, mzxid, version, cversion, ephemeralOwner, numChildren }`. */
function statData(s) {
  return {
    czxid: long(s.czxid),
    mzxid: long(s.mzxid),
    version: s.version,
    cversion: s.cversion,
    ephemeralOwner: long(s.ephemeralOwner),
    numChildren: s.numChildren,
  };
}

/** A library error as the core's failure (never the login: messages name codes and paths). */
function failure(err) {
  const code = err && typeof err.code === 'number' ? err.code : undefined;
  const message = String((err && err.message) || err);
  const kind = FAILURES.get(code);
  if (kind !== undefined) return { failure: kind, message };
  return { failure: 'other', code: REFUSED.has(code) ? 'AUTHENTICATION' : 'PROTOCOL', message };
}

const lost = (message) => ({ failure: 'connectionLoss', message });

/** Request bytes (a Uint8Array from the engine) as a Buffer, without a copy. */
const buffer = (u8) => (u8 ? Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength) : EMPTY);

const version = (v) => (typeof v === 'number' ? v : -1);

/** Queues a request on the library's connection; `cb(err, response)`. */
function queue(c, type, payload, cb) {
  const header = new jute.protocol.RequestHeader();
  header.type = type;
  c.connectionManager.queue(new jute.Request(header, payload), cb);
}

/**
 * A multi of `ops` (the library's op objects); `cb(err, results)` with the first op's error.
 * `absolute`: the paths are not under the URL's chroot (to make the chroot node itself).
 */
function multi(c, ops, cb, absolute = false) {
  const payload = new jute.TransactionRequest(ops);
  if (absolute) payload.setChrootPath = () => {};
  queue(c, OP.MULTI, payload, (err, response) => {
    if (err) return cb(err);
    const { results } = response.payload;
    const failed = results.find((r) => r.type === OP.ERROR && r.err !== Exception.OK);
    cb(failed ? Exception.create(failed.err) : null, results);
  });
}

/**
 * Creates `path` with `flags`; the reply carries the new node's stat (see the top). A
 * container may be `absolute` (see `multi`).
 */
function createNode(c, path, data, flags, cb, absolute = false) {
  if (flags === MODES.container) {
    const op = { type: OP.CREATE, path, data, acls: ACL.OPEN_ACL_UNSAFE, mode: flags };
    return multi(c, [op], (err, results) => {
      if (err) return cb(err);
      const [r] = results;
      // A plain create's result has no stat: the server made no container (an old server).
      if (r.stat === undefined) return cb(new Error(`${path}: the server did not create a container node`));
      cb(null, { reply: 'created', path: r.path, stat: statData(r.stat) });
    }, absolute);
  }
  const payload = new jute.protocol.CreateRequest();
  payload.path = path;
  payload.data = data;
  payload.acl = ACL.OPEN_ACL_UNSAFE.map((a) => a.toRecord());
  payload.flags = flags;
  queue(c, OP.CREATE, payload, (err, response) => {
    if (err) return cb(err);
    const zxid = long(response.header.zxid);
    const owner = flags === MODES.ephemeral || flags === MODES.ephemeralSequential ? long(c.getSessionId()) : 0n;
    const stat = { czxid: zxid, mzxid: zxid, version: 0, cversion: 0, ephemeralOwner: owner, numChildren: 0 };
    cb(null, { reply: 'created', path: response.payload.path, stat });
  });
}

/** The parents of `path`, outermost first (`/a/b/c` → `/a`, `/a/b`). */
function parents(path) {
  const parts = path.split('/').slice(1, -1);
  return parts.map((_, i) => `/${parts.slice(0, i + 1).join('/')}`);
}

/** `path` and its parents, outermost first (`/a/b` → `/a`, `/a/b`). */
const lineage = (path) => [...parents(path), path];

const call = (fn) => new Promise((resolve) => fn((err, value) => resolve([err, value])));

/** How often a create is tried again after creating its parents (a container may be reaped between). */
const PARENT_ROUNDS = 3;

// ---- the transport ----

/**
 * One session of the client (a node-zookeeper-client Client at a time): the client's own, or
 * (`sessionMs` a number) the extra session the core opens for locks whose lease is shorter
 * than the client's session (PROTOCOL.md §9, "Sessions sized from the lock"), asking for that
 * timeout; its session notices carry `sessionMs`.
 */
class ZooKeeperSession {
  constructor(driver, plan, sessionMs = null) {
    this.driver = driver;
    this.plan = sessionMs === null ? plan : { ...plan, sessionTimeoutMs: sessionMs };
    this.sessionMs = sessionMs;
    /** The session's client (one node-zookeeper-client Client), or null. */
    this.client = null;
    /** request id -> { to: the client it went to ('open': a session open), at: when }: answered once. */
    this.inFlight = new Map();
    /** Session opens waiting for `opening`. */
    this.opens = [];
    this.opening = null;
    this.held = false;
    this.closed = false;
  }

  // ---- requests ----

  perform(req) {
    const { id } = req;
    if (req.op === 'openSession') return this.openSession(id);
    const c = this.client;
    if (c === null || c.dead || c.getState() !== State.SYNC_CONNECTED) {
      // Never queued behind a reconnect: the engine decides what to do without the session.
      this.inFlight.set(id, { to: c, at: performance.now() });
      const why = c !== null && c.dead ? { failure: 'sessionExpired' } : lost(`not connected to ${this.plan.redacted}`);
      return queueMicrotask(() => this.settle(id, why));
    }
    this.inFlight.set(id, { to: c, at: performance.now() });
    const done = (err, reply) => this.settle(id, err ? failure(err) : reply);
    const watch = req.watch ? c.lockgateWatcher : undefined;
    switch (req.op) {
      case 'create':
        return this.create(c, req, done);
      case 'delete':
        return c.remove(req.path, version(req.version), (err) => done(err, DELETED));
      case 'check':
        return multi(c, [{ type: OP.CHECK, path: req.path, version: version(req.version) }], (err) => done(err, CHECKED));
      case 'children':
        return c.getChildren(req.path, watch, (err, children) => done(err, { reply: 'children', children }));
      case 'exists':
        return c.exists(req.path, watch, (err, s) => done(err, { reply: 'exists', stat: s ? statData(s) : null }));
      case 'getData':
        return c.getData(req.path, watch, (err, data, s) => done(err, err ? undefined : { reply: 'data', data: data || EMPTY, stat: statData(s) }));
      default:
        return queueMicrotask(() => this.settle(id, { failure: 'other', message: `the ZooKeeper transport cannot perform ${req.op}` }));
    }
  }

  /**
   * A create; missing parents are made as containers first (ZkOp::Create's contract), the
   * URL's chroot node too (as the native transport does).
   */
  async create(c, req, done) {
    const flags = MODES[req.mode];
    if (flags === undefined) return done(null, { failure: 'other', message: `unknown create mode ${req.mode}` });
    const data = buffer(req.data);
    const container = (path, absolute) => call((cb) => createNode(c, path, EMPTY, MODES.container, cb, absolute));
    for (let round = 0; ; round++) {
      const [err, reply] = await call((cb) => createNode(c, req.path, data, flags, cb));
      if (!err || err.code !== Exception.NO_NODE || round === PARENT_ROUNDS) return done(err, reply);
      for (const parent of parents(req.path)) {
        let [perr] = await container(parent, false);
        if (perr && perr.code === Exception.NO_NODE && this.plan.chroot) {
          // The chroot node itself is missing.
          for (const node of lineage(this.plan.chroot)) {
            [perr] = await container(node, true);
            if (perr && perr.code !== Exception.NODE_EXISTS) return done(perr);
          }
          [perr] = await container(parent, false);
        }
        if (perr && perr.code !== Exception.NODE_EXISTS) return done(perr);
      }
    }
  }

  /** Answers request `id` once (a late answer after a session ended is dropped). */
  settle(id, reply) {
    if (this.inFlight.delete(id)) this.driver.answer(id, reply);
  }

  /** Fails every request still waiting on client `c` (the library drops queued ones at expiry). */
  failAll(c, reply) {
    for (const [id, { to }] of this.inFlight) if (to === c) this.settle(id, reply);
  }

  // ---- the session ----

  /** OpenSession: the live session (reconnected if need be), else a new one. */
  openSession(id) {
    this.inFlight.set(id, { to: 'open', at: performance.now() });
    this.opens.push(id);
    if (this.opening !== null) return;
    this.opening = this.session().then(
      (c) => ({ reply: 'session', sessionId: long(c.getSessionId()), timeoutMs: c.getSessionTimeout() }),
      (why) => why,
    );
    this.opening.then((reply) => {
      this.opening = null;
      for (const waiting of this.opens.splice(0)) this.settle(waiting, reply);
    });
  }

  /**
   * Resolves with a connected client within `connectTimeoutMs`: the current one once it is
   * connected (a session that is only disconnected lives on), else a new session; rejects with
   * the failure to answer.
   */
  async session() {
    const deadline = performance.now() + this.plan.connectTimeoutMs;
    for (;;) {
      if (this.closed) throw lost('the client is closed');
      if (this.client === null || this.client.dead) this.client = this.newClient();
      const c = this.client;
      const state = await this.connected(c, deadline - performance.now());
      if (state === State.SYNC_CONNECTED) return c;
      if (state === State.AUTH_FAILED) {
        throw { failure: 'other', code: 'AUTHENTICATION', message: `could not connect to ${this.plan.redacted}: the ensemble refused the credentials` };
      }
      if (state !== State.EXPIRED) {
        // Never connected: give the attempt up (a session that was connected keeps trying).
        if (!c.everConnected) this.discard(c);
        // The core's connect-failure wording (core/src/connect/failure.rs), so every binding
        // and backend says a failed connect alike.
        throw lost(`could not connect to ${this.plan.redacted}: no member answered within ${this.plan.connectTimeoutMs} ms`);
      }
    }
  }

  /**
   * Resolves with `c`'s state once it is connected, expired or refused, or after `ms` (at once
   * if the client is discarded meanwhile: its timer must not outlive close()).
   */
  connected(c, ms) {
    const now = c.getState();
    if (now === State.SYNC_CONNECTED || c.dead) return Promise.resolve(c.dead ? State.EXPIRED : now);
    return new Promise((resolve) => {
      const done = (state) => {
        clearTimeout(timer);
        c.removeListener('state', onState);
        c.removeListener('discarded', onDiscard);
        resolve(state);
      };
      const onState = (s) => {
        if (s === State.SYNC_CONNECTED || s === State.EXPIRED || s === State.AUTH_FAILED) done(s);
      };
      const onDiscard = () => done(c.getState());
      const timer = setTimeout(onDiscard, Math.max(0, ms));
      c.on('state', onState);
      c.once('discarded', onDiscard);
    });
  }

  /** A new client (a new session once it connects), connecting, with its listeners. */
  newClient() {
    const { plan } = this;
    const c = zookeeper.createClient(plan.connectString, { sessionTimeout: plan.sessionTimeoutMs, spinDelay: 100, retries: 0 });
    c.dead = false;
    c.everConnected = false;
    c.lockgateWatcher = (event) => {
      const kind = EVENTS[event.type];
      if (c === this.client && kind) this.driver.notice({ notice: 'watch', path: event.path, event: kind });
    };
    if (plan.digest) c.addAuthInfo('digest', Buffer.from(`${plan.digest.username}:${plan.digest.password}`));
    c.on('state', (s) => this.onState(c, s));
    this.watchSockets(c);
    c.connect();
    return c;
  }

  /** Session changes as the core's notices; an expired or refused session is finished. */
  onState(c, s) {
    // Nothing of a session follows its end (the library still reports its socket closing).
    if (c !== this.client || c.dead) return;
    const session = (event) =>
      this.driver.notice(this.sessionMs === null ? { notice: 'session', event } : { notice: 'session', event, sessionMs: this.sessionMs });
    if (s === State.SYNC_CONNECTED) {
      if (c.everConnected) session('reconnected');
      c.everConnected = true;
    } else if (s === State.DISCONNECTED) {
      if (c.everConnected) session('disconnected');
    } else if (s === State.EXPIRED || s === State.AUTH_FAILED) {
      c.dead = true;
      clearInterval(c.lockgateTick);
      this.failAll(c, s === State.EXPIRED ? { failure: 'sessionExpired' } : failure(Exception.create(Exception.AUTH_FAILED)));
      if (c.everConnected) session('expired');
    }
  }

  /**
   * The read timeout the library lacks (see the top), and the refs of its sockets and timers:
   * all unref'd until holdOpen(), so an idle client never holds the process open, even while
   * the ensemble is unreachable (the driver's timer keeps it alive while locks are held or
   * awaited).
   */
  watchSockets(c) {
    const cm = c.connectionManager;
    const transport = this;
    // The library's own member rotation (index.js 1.1.3), with its timers and sockets unref'd.
    cm.findNextServer = function (callback) {
      this.nextServerIndex %= this.servers.length;
      const next = () => {
        callback(this.servers[this.nextServerIndex]);
        this.nextServerIndex += 1;
        if (!transport.held) {
          if (this.socket) this.socket.unref();
          if (this.connectTimeoutHandler) this.connectTimeoutHandler.unref();
        }
      };
      if (this.serverAttempts === this.servers.length) {
        const spin = setTimeout(() => {
          next();
          this.serverAttempts = 0;
        }, Math.random() * this.spinDelay);
        if (!transport.held) spin.unref();
      } else {
        this.serverAttempts += 1;
        process.nextTick(next);
      }
    };
    const onSocketConnected = cm.onSocketConnected;
    cm.onSocketConnected = function () {
      // A frame left half-read by a dropped socket must not prefix the next handshake.
      cm.pendingBuffer = null;
      c.lastHeard = performance.now();
      c.socket = cm.socket;
      cm.socket.on('data', () => (c.lastHeard = performance.now()));
      return onSocketConnected.apply(this, arguments);
    };
    const { sessionTimeoutMs, commandTimeoutMs } = this.plan;
    const tick = Math.min(1000, Math.max(50, Math.floor(Math.min(sessionTimeoutMs, commandTimeoutMs) / 10)));
    c.lockgateTick = setInterval(() => {
      const socket = c.socket;
      if (!socket || socket.destroyed) return;
      if (this.held) socket.ref();
      else socket.unref();
      const now = performance.now();
      const limit = cm.state === STATES.CONNECTED ? (cm.sessionTimeout * 2) / 3 : cm.connectTimeout;
      if (now - c.lastHeard > limit || this.overdue(c, now - commandTimeoutMs)) {
        socket.destroy();
        // What the library still holds goes out on the next connection, timed from there.
        for (const entry of this.inFlight.values()) if (entry.to === c) entry.at = now;
      }
    }, tick);
    c.lockgateTick.unref();
  }

  /** Whether a request sent on `c` before `since` is still unanswered. */
  overdue(c, since) {
    for (const { to, at } of this.inFlight.values()) if (to === c && at < since) return true;
    return false;
  }

  /** Closes a client that never connected, so it stops trying in the background. */
  discard(c) {
    if (c.discarded) return;
    c.discarded = true;
    c.dead = true;
    clearInterval(c.lockgateTick);
    if (this.client === c) this.client = null;
    c.close();
    if (c.socket) c.socket.destroy();
    c.emit('discarded');
  }

  /** Keeps the session's socket ref'd while close() releases. */
  holdOpen() {
    this.held = true;
    const c = this.client;
    if (c && c.socket && !c.socket.destroyed) c.socket.ref();
  }

  /** Closes the session (the ensemble deletes its ephemeral nodes at once). */
  async close() {
    this.closed = true;
    const c = this.client;
    this.client = null;
    if (c === null) return;
    clearInterval(c.lockgateTick);
    if (c.dead || c.getState() !== State.SYNC_CONNECTED) return this.discard(c);
    await new Promise((resolve) => {
      const timer = setTimeout(finish, 1000);
      function finish() {
        clearTimeout(timer);
        if (c.socket) c.socket.destroy();
        resolve();
      }
      if (c.socket) c.socket.once('close', finish);
      c.close();
    });
  }
}

/**
 * The transport of one client: its own session, and the extra sessions the core opens
 * (`openSession` with `sessionMs`) and closes (`closeSession`), each a ZooKeeperSession; a
 * request goes to the session its `sessionMs` names.
 */
class ZooKeeperTransport {
  constructor(driver, plan) {
    this.driver = driver;
    this.plan = plan;
    this.own = new ZooKeeperSession(driver, plan);
    /** sessionMs -> ZooKeeperSession: the extra sessions. */
    this.extras = new Map();
    this.held = false;
  }

  perform(req) {
    const ms = req.sessionMs;
    if (ms === undefined || ms === null) return this.own.perform(req);
    let s = this.extras.get(ms);
    if (req.op === 'closeSession') {
      // Answered once the ensemble closed it (its ephemeral nodes are gone then).
      this.extras.delete(ms);
      const closed = () => this.driver.answer(req.id, { reply: 'closed' });
      return s ? s.close().then(closed, closed) : queueMicrotask(closed);
    }
    if (s === undefined) {
      // Gone (closed, or never opened): its nodes are gone too; an open makes a new one.
      if (req.op !== 'openSession') return queueMicrotask(() => this.driver.answer(req.id, { failure: 'sessionExpired' }));
      s = new ZooKeeperSession(this.driver, this.plan, ms);
      if (this.held) s.holdOpen();
      this.extras.set(ms, s);
    }
    return s.perform(req);
  }

  /** Connects the client's own session (what open() waits for). */
  session() {
    return this.own.session();
  }

  holdOpen() {
    this.held = true;
    this.own.holdOpen();
    for (const s of this.extras.values()) s.holdOpen();
  }

  /** Closes every session (the ensemble deletes their ephemeral nodes at once). */
  async close() {
    const all = [this.own, ...this.extras.values()];
    this.extras.clear();
    await Promise.all(all.map((s) => s.close()));
  }
}

/**
 * Opens the transport of a `zookeeper://` URL: connects the session (ConnectionError if no
 * member answers within connectTimeoutMs); the core's `plan` says where and how.
 */
async function open(driver, plan) {
  load();
  if (plan.tls) {
    throw makeError('UNSUPPORTED', `${plan.redacted}: node-zookeeper-client has no TLS; use zookeeper:// (or a binding on the native transport)`);
  }
  const t = new ZooKeeperTransport(driver, plan);
  try {
    await t.session();
  } catch (why) {
    await t.close();
    throw makeError(why.code === 'AUTHENTICATION' ? 'AUTHENTICATION' : 'CONNECTION', why.message || String(why));
  }
  return t;
}

module.exports = { open };
