'use strict';
// The Redis transport: performs the engine's requests on Redis connections, for every Redis
// backend the core knows (a single server or primary, a Redis Cluster, Redlock's independent
// masters). It only moves commands and replies; every rule (URL grammar, option defaults,
// quorum, retries, undo) is the core's.
//
// - A single server from a URL: the lean RESP socket (redis-wire.js) carries the commands as
//   the core's bytes (`pollWire`), unless `redisOptions` hold keys only ioredis understands; an
//   ioredis connection subscribes.
// - A Redis Cluster (or a caller's ioredis client or Cluster): ioredis. On a cluster the commands
//   of one engine pipeline go one by one (each routed to its slot's primary; the engine batches
//   several locks) and their replies are handed back in order; the subscriber is a plain
//   connection to one node (PUBLISH is cluster-wide), replaced by another node's when it drops.
// - Every request is plain data in the core's form (lockgate_core::redis::data: `{ id, commands }`
//   or `{ id, subscribe }`, and on a Cluster a listing's `{ id, masters }` and `{ id, node,
//   commands }`; Redlock's, lockgate_core::redlock::data: `{ id, master, command }`),
//   answered with the replies as they came, a server's error reply as `{ error: message }`.
// - Redlock: one ioredis connection per master; each request names a master and carries one
//   command, answered exactly once.
//   A master this package connected to that is down fails its requests at once, and the first
//   request for it starts one connection attempt in the background (never on a timer, so an
//   idle process with a dead master still exits).
//
// Passwords never reach ioredis's options for connections opened from URLs: ioredis prints every
// command it writes under `DEBUG=ioredis:*`, AUTH included, so a small connector logs in first
// and hands the socket over (loginConnector). The lean socket sends its own AUTH.

const net = require('node:net');
const tls = require('node:tls');
const { makeError, invalid } = require('../errors');
const { requirePeer } = require('../peer');
const { now } = require('../driver');
const { WireConnection, wireEligible, NO_PASSWORD_SET, command } = require('./redis-wire');

/** ioredis, an optional peer dependency: loaded by the first client that opens Redis connections. */
let Redis;
function ioredis() {
  if (Redis === undefined) Redis = requirePeer('ioredis', 'the Redis backends (Redis, Redis Cluster, Redlock)');
  return Redis;
}

/** Whether `x` looks like an ioredis client (or Cluster). */
function isIoredis(x) {
  return (
    (Redis !== undefined && x instanceof Redis) ||
    (x !== null &&
      typeof x === 'object' &&
      typeof x.call === 'function' &&
      typeof x.pipeline === 'function' &&
      typeof x.duplicate === 'function')
  );
}

/** Whether `err` is the server's own error reply (ioredis's ReplyError, or one of redis-wire.js's handshake). */
const isReply = (err) => err != null && err.name === 'ReplyError';

/** A reply value as the core's data: a server's error reply as `{ error: message }`. */
const replyData = (v) => (isReply(v) ? { error: v.message } : v);

/** `redis://host:port/db` of a caller's ioredis client (a Cluster: its first startup node). */
function urlOf(redis) {
  if (redis.isCluster) {
    const [n] = redis.startupNodes;
    return typeof n === 'object' ? `redis://${n.host || 'localhost'}:${n.port || 6379}` : `redis://${n}`;
  }
  const o = redis.options || {};
  const host = String(o.host || 'localhost').toLowerCase();
  return `redis://${host.includes(':') ? `[${host}]` : host}:${o.port || 6379}/${o.db || 0}`;
}

/** What connect() takes here besides a URL, for its error message. */
const GIVEN = 'an ioredis client, an ioredis Cluster, or an array of ioredis clients (Redlock masters)';

/**
 * What a caller's own connection stands for, for the core's rules: an ioredis client, an
 * ioredis Cluster or an array of ioredis clients, one per Redlock master, as `{ url,
 * commandTimeoutMs }` (`url`: the server's `redis://host:port/db` or the Cluster's
 * `redis+cluster://host:port`; for masters, the list of theirs, which the core makes one URL
 * of; the command timeout the caller configured, in ms). Returns undefined for anything else.
 */
function describe(target, options) {
  const masters = Array.isArray(target);
  const all = masters ? target : [target];
  if (!all.every((t) => isIoredis(t) && !(masters && t.isCluster))) return undefined;
  const o = target.options || {};
  const cluster = target.isCluster === true;
  if (options != null && options.cluster !== undefined) {
    throw invalid('the cluster option is for URLs; an ioredis client is a Cluster or not by itself');
  }
  const commandTimeoutMs = cluster ? (o.redisOptions || {}).commandTimeout : o.commandTimeout;
  if (masters && new Set(target).size < target.length) throw invalid('a Redlock master is listed twice');
  const urls = all.map(urlOf);
  return { url: masters ? urls : cluster ? urls[0].replace('redis', 'redis+cluster') : urls[0], commandTimeoutMs };
}

// ---- sockets and logins ----

/** The node connections of an ioredis Cluster, or the one connection of a Redis client. */
function connectionsOf(redis) {
  return redis && redis.isCluster ? redis.nodes('all') : [redis];
}

/** Lets the process exit while these connections are open (and idle). */
function unrefSocket(redis) {
  for (const r of connectionsOf(redis)) if (r && r.stream && r.stream.unref) r.stream.unref();
}

/** Keeps the process alive while these connections are open. */
function refSocket(redis) {
  for (const r of connectionsOf(redis)) if (r && r.stream && r.stream.ref) r.stream.ref();
}

/**
 * An ioredis connector class that logs in as `username` (may be undefined: the default user)
 * with `password` before ioredis sees the socket. Where to connect (host, port, family, tls,
 * connectTimeout) comes from the options ioredis constructs it with, so a Cluster's node
 * connections use it too.
 */
function loginConnector(username, password) {
  const auth = command('AUTH', ...(username ? [username, password] : [password]));
  return class LoginConnector extends ioredis().AbstractConnector {
    constructor(options) {
      super(options.disconnectTimeout);
      this.options = options;
    }

    connect() {
      const o = this.options;
      this.connecting = true;
      return new Promise((resolve, reject) => {
        // On the next tick, as ioredis's own connector does: disconnect() may come first.
        process.nextTick(() => {
          if (!this.connecting) return reject(new Error('Connection is closed.'));
          const at = { host: o.host, port: o.port };
          if (o.family != null) at.family = o.family;
          const stream = o.tls ? tls.connect({ ...at, ...o.tls }) : net.createConnection(at);
          this.stream = stream;
          let reply = '';
          let timer;
          const done = (err) => {
            clearTimeout(timer);
            stream.removeListener('data', onData);
            stream.removeListener('error', done);
            stream.removeListener('close', onClose);
            if (err === undefined) return resolve(stream);
            this.firstError = err;
            stream.destroy();
            reject(err);
          };
          const onClose = () => done(new Error('Connection is closed.'));
          const onData = (chunk) => {
            reply += chunk.toString('latin1');
            const eol = reply.indexOf('\r\n');
            if (eol < 0) return;
            const line = Buffer.from(reply.slice(0, eol), 'latin1').toString('utf8');
            // Nothing else arrives before ioredis writes its first command, so no byte is lost
            // between this listener and ioredis's own.
            // An error reply to AUTH is refused credentials, whatever its code.
            if (line[0] === '-' && !NO_PASSWORD_SET.test(line)) done(makeError('AUTHENTICATION', line.slice(1)));
            else if (line[0] === '+' || line[0] === '-') done();
            else done(new Error(`unexpected reply to AUTH ${JSON.stringify(line.slice(0, 40))}`));
          };
          stream.on('data', onData);
          stream.once('error', done);
          stream.once('close', onClose);
          stream.once(o.tls ? 'secureConnect' : 'connect', () => stream.write(auth));
          if (o.connectTimeout) {
            timer = setTimeout(() => done(Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' })), o.connectTimeout);
          }
        });
      });
    }
  };
}

/**
 * The caller's `redisOptions` `ro` for a connection to server `at` (as the core parsed its URL),
 * with the credentials (the URL's, else `ro`'s) moved out of them into a login connector, and
 * `tls` set for TLS URLs. A caller's own `Connector` is kept, and then ioredis logs in itself.
 */
function loginOptions(at, ro) {
  const { username: roUser, password: roPass, ...options } = ro;
  const user = at.username ?? roUser;
  const pass = at.password ?? roPass;
  if (at.tls && !options.tls) options.tls = {};
  if (pass === undefined || pass === null || pass === '') return options;
  if (options.Connector) return { ...options, username: user, password: pass };
  options.Connector = loginConnector(user, pass);
  return options;
}

/** ioredis options for one server `at` (not a Cluster): loginOptions() plus host, port and db. */
function serverOptions(at, ro) {
  const options = { ...loginOptions(at, ro), host: at.host, port: at.port };
  if (at.db) options.db = at.db;
  return options;
}

/** A failed first connection as a ConnectionError or AuthenticationError (the core's reading) naming the server (without its password). */
function connectError(engine, cause, at) {
  const e = engine.transportError(cause, isReply(cause));
  e.message = `${e.message} (connecting to ${at.redacted})`;
  return e;
}

/**
 * Connects an ioredis client or Cluster this package made (lazyConnect) within `limitMs`; a
 * failure becomes a ConnectionError or AuthenticationError naming `at`.
 */
async function firstConnect(engine, redis, at, limitMs) {
  // While connecting, the emitted error (e.g. a refused AUTH) says more than connect()'s own
  // "Connection is closed."; afterwards failures surface as rejected operations.
  let lastError;
  const onError = (err) => (lastError = err);
  redis.on('error', onError);
  let timer;
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no ready connection within ${limitMs} ms`)), limitMs);
      }),
    ]);
  } catch (err) {
    if (redis.status !== 'end') redis.disconnect();
    // A Cluster reports "Failed to refresh slots cache." and keeps the node's own error aside.
    const cause = lastError && lastError.lastNodeError ? lastError.lastNodeError : lastError;
    throw connectError(engine, cause ?? err, at);
  } finally {
    clearTimeout(timer);
    redis.removeListener('error', onError);
    // Failures reach callers through the engine (failed requests, retries, lost votes).
    redis.on('error', () => {});
  }
}

// ---- one server or a Cluster ----

/** The transport of a Redis (single or Cluster) client: one command connection, one subscriber. */
class RedisTransport {
  constructor(driver, redis, owns) {
    this.driver = driver;
    this.engine = driver.engine;
    /** @type {import('ioredis').Redis | import('ioredis').Cluster | null} the ioredis command connection */
    this.redis = redis;
    this.owns = owns;
    /** @type {WireConnection | null} the lean command connection, instead of `redis` */
    this.wire = null;
    this.cluster = redis !== null && redis.isCluster === true;
    /** @type {import('ioredis').Redis | null} created on the engine's first subscribe */
    this.sub = null;
    /** Makes the subscriber connection (not for a Cluster, see clusterSubscriber()). */
    this.makeSubscriber = () => redis.duplicate();
    if (redis !== null && owns && this.cluster) {
      // The same for every node connection of an owned Cluster, including ones opened later
      // (after a MOVED or a failover).
      const watch = (node) => {
        node.on('ready', () => this.driver.closed || unrefSocket(node));
        if (node.status === 'ready') unrefSocket(node);
      };
      for (const node of redis.nodes('all')) watch(node);
      redis.on('+node', watch);
    } else if (redis !== null && owns) {
      // An idle client must not keep the process alive: the socket is unref'd and the driver's
      // ref'd timer stands in for it while the engine has work.
      redis.on('ready', () => unrefSocket(redis));
      if (redis.status === 'ready') unrefSocket(redis);
    }
  }

  /** With the lean connection: the engine's pipelines leave as bytes, one write per batch. */
  performWire() {
    let req;
    while ((req = this.engine.pollWire(now())) !== undefined) {
      if (typeof req === 'string' || req instanceof Uint8Array) this.wire.write(req);
      else this.perform(req);
    }
  }

  // The lean connection's owner side (redis-wire.js).
  wireData(buf) {
    return this.driver.accepting ? this.engine.handleWireData(now(), buf) : 0;
  }

  wireFlush() {
    if (this.driver.accepting) this.driver.pump();
  }

  wireClosed(err) {
    this.driver.input(() => this.engine.handleWireClosed(now(), err, isReply(err)));
  }

  /**
   * Performs one request: a subscription, or a pipeline whose replies are answered in order
   * (server errors in place); a transport error fails the request.
   */
  perform({ id, commands, subscribe, masters, node }) {
    const d = this.driver;
    if (masters !== undefined) {
      // A Cluster listing's first step: the masters as ioredis routes to them.
      this.masters().then((list) => d.answer(id, list), (err) => d.failed(id, err));
    } else if (node !== undefined) {
      this.onNode(node, commands).then((replies) => d.answer(id, replies), (err) => d.failed(id, err));
    } else if (commands === undefined) {
      this.subscribe(subscribe).then(() => d.answer(id, []), (err) => d.failed(id, err));
    } else if (commands.length === 1) {
      // One command: no pipeline object.
      this.redis.call(...commands[0]).then((v) => d.answer(id, [v]), (e) => (isReply(e) ? d.answer(id, [replyData(e)]) : d.failed(id, e)));
    } else if (this.cluster) {
      // A cluster pipeline must stay in one slot: each command goes on its own (still issued in
      // order), replies are collected in the pipeline's order.
      Promise.all(commands.map((c) => this.redis.call(...c).then((v) => v, (e) => e))).then((results) => {
        const lost = results.find((r) => r instanceof Error && !isReply(r));
        if (lost) d.failed(id, lost);
        else d.answer(id, results.map(replyData));
      });
    } else {
      const p = this.redis.pipeline();
      for (const c of commands) p.call(...c);
      p.exec().then((results) => {
        const lost = results.find(([e]) => e && !isReply(e));
        if (lost) d.failed(id, lost[0]);
        else d.answer(id, results.map(([e, v]) => (e ? replyData(e) : v)));
      }, (err) => d.failed(id, err));
    }
  }

  /** Every master of the Cluster as `host:port`, from ioredis's own view of its slots. */
  async masters() {
    if (!this.cluster) throw makeError('PROTOCOL', 'a single server has no masters to list');
    // A Cluster that has not connected yet knows no node; a round trip makes it connect.
    if (this.redis.nodes('master').length === 0) await this.redis.ping();
    return this.redis.nodes('master').map(addressOf);
  }

  /**
   * Sends `commands` in order to the Cluster node at `address` (one masters() named), answered
   * as a pipeline is: server errors in place, a transport error fails the request.
   */
  async onNode(address, commands) {
    const node = this.cluster ? this.redis.nodes('all').find((n) => addressOf(n) === address) : undefined;
    if (node === undefined) throw makeError('CONNECTION', `no connection to the Cluster node ${address}`);
    const replies = [];
    for (const c of commands) {
      try {
        replies.push(await node.call(...c));
      } catch (e) {
        if (!isReply(e)) throw e;
        replies.push(replyData(e));
      }
    }
    return replies;
  }

  /** Subscribes the subscriber connection (made if needed) to `channel`. */
  async subscribe(channel) {
    const sub = this.cluster ? await this.clusterSubscriber() : this.subscriber();
    await sub.subscribe(channel);
  }

  /** The one subscriber connection, opened on the first subscribe (again if it ended for good). */
  subscriber() {
    if (this.sub && this.sub.status !== 'end') return this.sub;
    return this.watchSubscriber(this.makeSubscriber());
  }

  /**
   * On a Cluster: a connection to one node (a ready one if any), made like that node's own
   * connection (credentials, TLS, NAT mapping) but not reconnecting: when it drops, the engine
   * learns of it (handleDisconnect), subscribes again, and this picks a node that is up.
   */
  async clusterSubscriber() {
    if (this.sub && this.sub.status !== 'end') return this.sub;
    // A Cluster that has not connected yet knows no node; a round trip makes it connect.
    if (this.redis.nodes('all').length === 0) await this.redis.ping();
    this.driver.ensureOpen();
    if (this.sub && this.sub.status !== 'end') return this.sub;
    const nodes = this.redis.nodes('all');
    const node = sample(nodes.filter((n) => n.status === 'ready')) || sample(nodes);
    if (!node) throw makeError('CONNECTION', 'no node of the Redis Cluster is reachable');
    const options = { lazyConnect: true, retryStrategy: null, readOnly: false, enableOfflineQueue: true };
    return this.watchSubscriber(node.duplicate(options));
  }

  /** Wires a new subscriber connection's messages and disconnects to the engine. */
  watchSubscriber(sub) {
    let ready = false;
    const d = this.driver;
    sub.on('message', (channel, payload) => d.notice({ channel, payload }));
    sub.on('ready', () => {
      ready = true;
      if (!d.closed) unrefSocket(sub);
    });
    sub.on('close', () => {
      if (!ready) return;
      ready = false;
      d.input(() => this.engine.handleDisconnect(now()));
    });
    // Connection errors reach callers through the engine (failed subscribes, retries).
    sub.on('error', () => {});
    this.sub = sub;
    return sub;
  }

  /** Keeps the connections ref'd while close() releases. */
  holdOpen() {
    if (this.wire) this.wire.ref();
    if (this.redis && this.owns) refSocket(this.redis);
    if (this.sub) refSocket(this.sub);
  }

  /** Closes the subscriber and, if this client opened it, the command connection. */
  async close() {
    if (this.sub) this.sub.disconnect();
    if (this.wire) await this.wire.close();
    if (this.redis && this.owns) await quit(this.redis);
  }
}

/** The `host:port` of an ioredis node connection (as the Cluster's slots name it). */
const addressOf = (node) => `${node.options.host}:${node.options.port}`;

/** A random element, or undefined for an empty array. */
function sample(items) {
  return items.length ? items[Math.floor(Math.random() * items.length)] : undefined;
}

/** Closes an ioredis connection politely if it is up. */
async function quit(redis) {
  try {
    if (redis.status === 'ready') return void (await redis.quit());
  } catch {
    // fall through
  }
  redis.disconnect();
}

/**
 * An ioredis client (or Cluster, for `cluster`) for server `at` that this package owns. It does
 * not reconnect or time commands out until the first connection is ready (`connected()`), so a
 * failed connect leaves no timer behind (ioredis keeps a command timer and a reconnect timer
 * alive past a failed first attempt).
 */
function ownIoredis(at, opts, timeouts, cluster) {
  const ro = opts.redisOptions || {};
  const state = { connected: false };
  const retry = (times) => (state.connected ? (ro.retryStrategy || ((t) => Math.min(t * 50, 2000)))(times) : null);
  const base = { maxRetriesPerRequest: 2, connectTimeout: timeouts.connect, commandTimeout: undefined };
  const redis = cluster
    ? new Redis.Cluster([{ host: at.host, port: at.port }], {
        redisOptions: { ...base, ...loginOptions(at, ro), connectTimeout: timeouts.connect, commandTimeout: undefined },
        lazyConnect: true,
        clusterRetryStrategy: (times) => (state.connected ? Math.min(100 + times * 2, 2000) : null),
      })
    : new Redis({ ...base, ...serverOptions(at, ro), connectTimeout: timeouts.connect, lazyConnect: true, commandTimeout: undefined, retryStrategy: retry });
  /** From now on it reconnects and times its commands out. */
  redis.connected = () => {
    state.connected = true;
    if (cluster) {
      // Nodes connected later copy redisOptions; the ones already open get it directly.
      redis.options.redisOptions.commandTimeout = timeouts.command;
      for (const node of redis.nodes('all')) node.options.commandTimeout = timeouts.command;
    } else {
      redis.options.commandTimeout = timeouts.command;
    }
    return redis;
  };
  return redis;
}

// ---- Redlock's masters ----

/** One Redlock master: its connection, whether this package owns it, and its name for messages. */
class Master {
  constructor(redis, owned, label, scripts) {
    this.redis = redis;
    this.owned = owned;
    this.label = label;
    /** A background connection attempt in progress (owned connections only). */
    this.connecting = false;
    /** Set by holdOpen(): the socket stays ref'd until it is closed. */
    this.keepRef = false;
    /** Loads the Redlock scripts on every new connection (a restarted master lost its cache). */
    this.onReady = () => {
      if (this.owned && !this.keepRef) unrefSocket(this.redis);
      // An optimisation only: the engine handles NOSCRIPT itself; this spares a fresh master
      // the one attempt it would otherwise sit out.
      for (const source of scripts) this.redis.script('LOAD', source).catch(() => {});
    };
    redis.on('ready', this.onReady);
    if (redis.status === 'ready') this.onReady();
  }

  /** Whether requests go out now: a caller's client always takes them (its own settings apply), an owned one only when ready. */
  get usable() {
    return !this.owned || this.redis.status === 'ready';
  }

  /** Starts one connection attempt if the owned connection is down and none is under way. */
  reconnect() {
    const status = this.redis.status;
    if (!this.owned || this.connecting || (status !== 'end' && status !== 'wait')) return;
    this.connecting = true;
    this.redis
      .connect()
      .catch(() => {})
      .finally(() => (this.connecting = false));
  }

  /** Closes an owned connection; leaves a caller's client as it was. */
  async close() {
    this.redis.removeListener('ready', this.onReady);
    if (this.owned) await quit(this.redis);
  }
}

/**
 * The transport of a Redlock client: request `{ id, master, command }` goes to that master; the
 * reply is handed back as it came, a server's error reply as `{ error: message }` (the core's
 * forms: lockgate_core::redlock::data).
 */
class RedlockTransport {
  constructor(driver, masters) {
    this.driver = driver;
    this.masters = masters;
  }

  perform({ id, master: index, command }) {
    const master = this.masters[index];
    const d = this.driver;
    if (!master.usable) {
      // Down: answer at once (after this pump) and try to connect in the background.
      if (!d.closed) master.reconnect();
      const err = makeError('CONNECTION', `master ${master.label} is not connected`);
      Promise.resolve().then(() => d.failed(id, err));
      return;
    }
    master.redis.call(...command).then(
      (v) => d.answer(id, v),
      (e) => (isReply(e) ? d.answer(id, replyData(e)) : d.failed(id, e)),
    );
  }

  holdOpen() {
    for (const m of this.masters) {
      m.keepRef = true;
      if (m.owned) refSocket(m.redis);
    }
  }

  async close() {
    await Promise.all(this.masters.map((m) => m.close()));
  }
}

/**
 * Redlock's masters: the plan's `servers` (each connected here; those down now count as failed
 * votes and are connected again when next needed; it fails only if none is reachable or one
 * refuses the credentials) or the caller's ioredis clients in `given`; each loads the plan's
 * `scripts` whenever its connection becomes ready.
 */
async function openMasters(engine, { servers, scripts }, given, opts, timeouts) {
  const label = (i) => servers[i].identity.replace(/\/0$/, '');
  if (given) return given.map((c, i) => new Master(c, false, label(i), scripts));
  const ro = opts.redisOptions || {};
  const redises = servers.map((at) => {
    const options = { ...serverOptions(at, ro), connectTimeout: timeouts.connect, commandTimeout: timeouts.command };
    return new Redis({ ...options, lazyConnect: true, enableOfflineQueue: false, retryStrategy: null });
  });
  const results = await Promise.allSettled(redises.map((r, i) => firstConnect(engine, r, servers[i], timeouts.connect + 1000)));
  const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
  const refused = failures.find((e) => e && e.code === 'AUTHENTICATION');
  if (refused || failures.length === servers.length) {
    for (const r of redises) r.disconnect();
    throw refused || makeError('CONNECTION', `no master is reachable: ${failures[0] && failures[0].message}`);
  }
  return redises.map((r, i) => new Master(r, true, label(i), scripts));
}

// ---- opening ----

/**
 * Opens the connections of a client for `driver` and returns its transport. `plan` is what
 * the core made of connect()'s target and options (its form: lockgate_core::redis::data::plan, lockgate_core::redlock::data::plan):
 * `backend` (`redis`, `redis+cluster`, `redlock`), `servers` (for `given`, its clients'
 * addresses), `connectTimeoutMs`, `commandTimeoutMs`, `tlsCaPem` (if set, the certificate(s) TLS
 * connections trust) and, for Redlock, `scripts`. `given` is the caller's ioredis client,
 * Cluster or array of clients (Redlock masters), used as they are and left open by close().
 * `opts` are connect()'s options (for `redisOptions`).
 */
async function open(driver, plan, given, opts) {
  ioredis();
  if (plan.tlsCaPem !== undefined) {
    // The core's TLS root certificates: every connection opened from the URL trusts them.
    const ro = opts.redisOptions || {};
    opts = { ...opts, redisOptions: { ...ro, tls: { ...(ro.tls || {}), ca: plan.tlsCaPem } } };
  }
  const timeouts = { connect: plan.connectTimeoutMs, command: plan.commandTimeoutMs };
  if (plan.backend === 'redlock') {
    return new RedlockTransport(driver, await openMasters(driver.engine, plan, given, opts, timeouts));
  }
  if (given) return new RedisTransport(driver, given, false);
  const at = plan.servers[0];
  if (plan.backend === 'redis' && wireEligible(opts)) {
    const t = new RedisTransport(driver, null, true);
    t.wire = new WireConnection(at, opts, timeouts, t);
    t.performRequests = () => t.performWire();
    // The subscriber is made like an owned ioredis connection, but reconnects from the start.
    t.makeSubscriber = () => ownIoredis(at, opts, timeouts, false).connected();
    try {
      await t.wire.open();
    } catch (err) {
      throw connectError(driver.engine, err, at);
    }
    return t;
  }
  const redis = ownIoredis(at, opts, timeouts, plan.backend === 'redis+cluster');
  await firstConnect(driver.engine, redis, at, timeouts.connect + timeouts.command);
  return new RedisTransport(driver, redis.connected(), true);
}

module.exports = { open, describe, GIVEN, isIoredis };
