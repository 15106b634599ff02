'use strict';
// The driver: performs the engine's requests and keeps its one timer. A client connected from a
// URL sends its pipelines on a lean connection (lib/wire.js: RESP bytes the engine encodes and
// parses itself); one given an ioredis client or Cluster, or options only ioredis understands,
// sends them with ioredis. Subscriptions always use an ioredis connection.
//
// It follows the engine's driving contract (core/src/engine/mod.rs): every input is fed with a
// `performance.now()` timestamp, then `pump()` drains requests (performed in emission order on
// the command connection, subscribes on the subscriber connection), drains events (settling the
// caller's promise or aborting a lease's signal), and re-arms the timer at `pollTimeout()`.
// The pump, the settlement of operations, the loss signals, the timer and the shutdown are
// lib/engine-driver.js's, shared with the Redlock driver; this file performs the requests.
// It holds no lock logic: no quorum, token, retry, expiry or queue decisions are made here.
//
// On a Redis Cluster (an ioredis `Cluster` as the command connection) the same holds, with two
// transport differences: the commands of one engine pipeline are sent one by one (each routed
// by ioredis to the primary owning its key's slot; every key of one lock shares a hash tag, but
// a pipeline batches several locks) and their replies handed back in order; and the subscriber
// is a plain connection to one node of the cluster (PUBLISH is cluster-wide), replaced by a
// connection to another node when it drops.

const { makeError } = require('./errors');
const { EngineDriver, LossSignal, SHAPES, now } = require('./engine-driver');
const { refSocket, unrefSocket } = require('./targets');
const { WireConnection } = require('./wire');

/** A random element, or undefined for an empty array. */
function sample(items) {
  return items.length ? items[Math.floor(Math.random() * items.length)] : undefined;
}

class Driver extends EngineDriver {
  /**
   * @param {import('../pkg/lockgate_node').Engine} engine
   * @param {object} transport either `{ redis, owns }`: an ioredis client or Cluster as the
   *   command connection (`owns`: whether close() quits it, and its sockets may be unref'd), or
   *   `{ url, options, makeSubscriber }`: a lean connection (lib/wire.js) to a checked URL, with
   *   connect()'s options, plus a factory of the ioredis subscriber connection.
   */
  constructor(engine, transport) {
    super(engine, 'client');
    /** @type {import('ioredis').Redis | import('ioredis').Cluster | null} the ioredis command connection */
    this.redis = transport.redis || null;
    this.ownsRedis = this.redis === null || transport.owns === true;
    /** @type {WireConnection | null} the lean command connection, instead of `redis` */
    this.wire = transport.url ? new WireConnection(transport.url, transport.options, this) : null;
    this.makeSubscriber = transport.makeSubscriber || (() => this.redis.duplicate());
    /** Whether `redis` is an ioredis Cluster (commands go one by one, see perform()). */
    this.cluster = this.redis !== null && this.redis.isCluster === true;
    /** @type {import('ioredis').Redis | null} created on the engine's first subscribe */
    this.sub = null;
    const redis = this.redis;
    if (redis !== null && this.ownsRedis && this.cluster) {
      // The same for every node connection of an owned Cluster, including ones opened later
      // (after a MOVED or a failover).
      const watch = (node) => {
        node.on('ready', () => {
          if (!this.closed) unrefSocket(node);
        });
        if (node.status === 'ready') unrefSocket(node);
      };
      for (const node of redis.nodes('all')) watch(node);
      redis.on('+node', watch);
    } else if (redis !== null && this.ownsRedis) {
      // An idle client must not keep the process alive: the socket is unref'd and a ref'd
      // timer stands in for it while the engine has work (see arm()).
      redis.on('ready', () => unrefSocket(redis));
      if (redis.status === 'ready') unrefSocket(redis);
    }
  }

  // ---- inputs ----

  /** Re-enters a held lease (reentrant handles); completes at once, `acquired` or NOT_HELD. */
  reacquire(lease) {
    this.ensureOpen();
    return this.track(this.engine.reacquire(now(), lease), undefined, undefined);
  }

  /** Reads the leader of election `name`; resolves with the `observed` event. */
  observe(name) {
    this.ensureOpen();
    return this.track(this.engine.observe(now(), name), undefined, undefined);
  }

  /** The one-command fast path of input(): a command that failed (a server or transport error). */
  failed(id, err) {
    if (!this.accepting) return;
    this.engine.handleReply(now(), id, [[err, null]]);
    this.pump();
  }

  // ---- the lean connection's owner side (lib/wire.js) ----

  /** Bytes the lean connection read; returns how many requests still wait (-1: the stream broke). */
  wireData(buf) {
    return this.accepting ? this.engine.handleWireData(now(), buf) : 0;
  }

  /** Performs what the engine made of the bytes handed over by wireData(). */
  wireFlush() {
    if (this.accepting) this.pump();
  }

  /** The lean connection went: what was in flight on it fails (retryable, unless refused credentials). */
  wireClosed(err) {
    this.input(() => this.engine.handleWireClosed(now(), err));
  }

  // ---- outputs ----

  /** With the lean connection: the engine's pipelines leave as bytes, one write per batch. */
  performRequests() {
    if (this.wire === null) {
      super.performRequests();
      return;
    }
    let req;
    while ((req = this.engine.pollWireRequests(now())) !== undefined) {
      if (Array.isArray(req)) this.perform(req);
      else this.wire.write(req);
    }
  }

  /**
   * Performs one request, given flat (see pollRequest in src/lib.rs): `[id, n, argc, name,
   * ...args, ...]` for a pipeline of n commands, `[id, -1, channel]` for a subscribe,
   * `[id, -2, description]` for a kind this driver cannot perform.
   */
  perform(req) {
    const id = req[0];
    const n = req[1];
    if (n === 1) {
      // One command: no pipeline object, and its reply goes back without [[err, value]] wrapping.
      this.redis.call(...req.slice(3, 3 + req[2])).then(
        (value) => this.replied(id, value),
        (err) => this.failed(id, err),
      );
    } else if (n >= 0 && this.cluster) {
      // A cluster pipeline must stay in one slot, and the engine batches scripts of several
      // locks: each command goes on its own (still issued in order), replies are collected in
      // the pipeline's order. Server errors stay in place (NOSCRIPT is the engine's to handle);
      // a transport error on any command fails the request, as with a pipeline.
      const sends = [];
      for (let i = 2, c = 0; c < n; c++) {
        const argc = req[i];
        sends.push(
          this.redis.call(...req.slice(i + 1, i + 1 + argc)).then(
            (value) => [null, value],
            (err) => [err, null],
          ),
        );
        i += 1 + argc;
      }
      Promise.all(sends).then((results) =>
        this.input(() => this.engine.handleReply(now(), id, results)),
      );
    } else if (n >= 0) {
      const p = this.redis.pipeline();
      for (let i = 2, c = 0; c < n; c++) {
        const argc = req[i];
        p.call(...req.slice(i + 1, i + 1 + argc));
        i += 1 + argc;
      }
      p.exec().then(
        (results) => this.input(() => this.engine.handleReply(now(), id, results)),
        (err) => this.input(() => this.engine.handleReplyError(now(), id, err)),
      );
    } else if (n === -1) {
      this.subscribe(req[2]).then(
          () => this.input(() => this.engine.handleReply(now(), id, [])),
          (err) => this.input(() => this.engine.handleReplyError(now(), id, err)),
        );
    } else {
      this.engine.rejectRequest(now(), id, String(req[2]));
    }
  }

  /** Subscribes the subscriber connection (made if needed) to `channel`. */
  async subscribe(channel) {
    const sub = this.cluster ? await this.clusterSubscriber() : this.subscriber();
    await sub.subscribe(channel);
  }

  /**
   * The one subscriber connection of this client, opened on the engine's first subscribe (and
   * again if the previous one ended for good).
   */
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
    if (this.redis.nodes('all').length === 0) {
      // A Cluster that has not connected yet knows no node; a round trip makes it connect.
      await this.redis.ping();
    }
    if (this.closed) throw makeError('CLOSED', 'the client is closed');
    if (this.sub && this.sub.status !== 'end') return this.sub;
    const nodes = this.redis.nodes('all');
    const node = sample(nodes.filter((n) => n.status === 'ready')) || sample(nodes);
    if (!node) throw makeError('CONNECTION', 'no node of the Redis Cluster is reachable');
    return this.watchSubscriber(
      node.duplicate({ lazyConnect: true, retryStrategy: null, readOnly: false, enableOfflineQueue: true }),
    );
  }

  /** Wires a new subscriber connection's messages and disconnects to the engine. */
  watchSubscriber(sub) {
    let ready = false;
    sub.on('message', (channel, message) =>
      this.input(() => this.engine.handleNotification(now(), channel, message)),
    );
    sub.on('ready', () => {
      ready = true;
      if (!this.closed) unrefSocket(sub);
    });
    sub.on('close', () => {
      if (!ready) return;
      ready = false;
      this.input(() => this.engine.handleDisconnect(now()));
    });
    // Connection errors reach callers through the engine (failed subscribes, retries).
    sub.on('error', () => {});
    this.sub = sub;
    return sub;
  }

  // ---- shutdown ----

  /** Keeps the connections ref'd while close() releases. */
  holdOpen() {
    if (this.wire) this.wire.ref();
    if (this.redis && this.ownsRedis) refSocket(this.redis);
    if (this.sub) refSocket(this.sub);
  }

  /** Closes the subscriber and, if this client opened it, the command connection. */
  async closeConnections() {
    if (this.sub) this.sub.disconnect();
    if (this.wire) await this.wire.close();
    if (this.redis && this.ownsRedis) {
      try {
        await this.redis.quit();
      } catch {
        this.redis.disconnect();
      }
    }
  }
}

module.exports = { Driver, LossSignal, SHAPES, now };
