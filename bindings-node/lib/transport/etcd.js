'use strict';
// The etcd transport: performs the engine's etcd operations with etcd3 (on @grpc/grpc-js) and
// hands back what came of each — a reply, or a failure of the kinds the core decides on — plus
// the watch events and watch ends the cluster pushes. Requests, replies and notices are plain
// objects whose forms the core defines (core/src/backend/etcd/data.rs); which key to write, whom to
// watch, when to keep a lease alive and what a reply means are the core's. It does what the
// native transport (core/src/backend/etcd/transport) does:
//
// - Unary requests (lease grant and revoke, linearizable ranges, transactions) go out on the
//   current client, each bounded by `commandTimeoutMs`.
// - Keepalives share one LeaseKeepAlive stream: each request is one keepalive, answered by the
//   server's answer to it (etcd answers a stream's keepalives in order; TTL 0 = leaseNotFound).
// - Watches share one Watch stream, created and canceled in the order the engine asked (named
//   on the stream by ids chosen here); events and ends are pushed as notices. A stream that
//   breaks ends every watch on it (the engine reads again); watches are never re-created here.
// - A request left unanswered for `commandTimeoutMs` is reported lost and replaces the client
//   (new connections to every member, at most once per `commandTimeoutMs`); the old client's
//   streams end with it. HTTP/2 pings (every PING_INTERVAL_MS while a call is open) find a
//   dead connection that carries no request.
// - Transport failures are replies (connectionLost / unavailable); nothing is retried here.
//
// How etcd3 1.1 is used (some of it through its internals, hence package.json's ~1.1.2: patch
// releases only):
// - Its fault handling is replaced by policies that do nothing: etcd3 would otherwise retry a
//   failed call up to three times and stop calling a member for 5 s after three failures — a
//   retry is the engine's to decide.
// - Its streams are opened through the client's connection pool (`pool.withConnection`, the
//   interface its own RPC clients are built on), not through `leaseClient`/`watchClient`, whose
//   error handler would close every service of the member when a stream is canceled here.
// - Every call carries `hasleader: true` (etcd's require-leader metadata, as the native
//   transport's `with_require_leader`): a member cut off from the leader refuses requests and
//   ends its watch streams instead of serving stale ones; added by wrapping the pool's
//   authenticator, which makes every call's metadata.
// - A stream is ended once nothing waits on it (a keepalive answered, the last watch canceled):
//   an open gRPC call keeps its HTTP/2 session ref'd, and an idle client must not hold the
//   process open (the driver's timer keeps it alive while locks are held or awaited).

const { performance } = require('node:perf_hooks');
const { makeError } = require('../errors');
const { requirePeer } = require('../peer');

/**
 * How often HTTP/2 pings check a connection that carries a call. etcd refuses pings more often
 * than every 5 s (`--grpc-keepalive-min-time`) by closing the connection, and pings with no
 * call open count against the client too (so none are sent then).
 */
const PING_INTERVAL_MS = 10_000;
/** The longest wait between two attempts to reach a member (grpc-js's default grows to 120 s). */
const MAX_RECONNECT_BACKOFF_MS = 1000;
/** A policy that runs the call once (etcd3's `faultHandling` slots). */
const ONCE = Object.freeze({ execute: async (fn) => fn({ signal: new AbortController().signal }) });

// gRPC status codes (the same in every gRPC implementation).
const CANCELLED = 1;
const UNKNOWN = 2;
const INVALID_ARGUMENT = 3;
const DEADLINE_EXCEEDED = 4;
const NOT_FOUND = 5;
const PERMISSION_DENIED = 7;
const RESOURCE_EXHAUSTED = 8;
const ABORTED = 10;
const OUT_OF_RANGE = 11;
const INTERNAL = 13;
const UNAVAILABLE = 14;
const UNAUTHENTICATED = 16;

// etcd's enums, by number (rpc.proto).
const SORT_CREATE = 2;
const ASCEND = 1;
const DESCEND = 2;
/** A delete event's type as etcd3's proto names it ('Delete'), etcd's ('DELETE') or its number. */
const DELETE_EVENT = new Set(['Delete', 'DELETE', 1]);
const COMPARE_RESULT = { equal: 0, greater: 1, less: 2, notEqual: 3 };
/** A compare's target: its enum number and the field of the value compared. */
const COMPARE_TARGET = {
  version: [0, 'version'],
  createRevision: [1, 'create_revision'],
  modRevision: [2, 'mod_revision'],
  value: [3, 'value'],
  lease: [4, 'lease'],
};

const WATCHING = Object.freeze({ reply: 'watching' });
const WATCH_CANCELED = Object.freeze({ reply: 'watchCanceled' });
const EMPTY = Buffer.alloc(0);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// ---- conversions ----

/** One of etcd3's 64-bit integers (decimal strings) as a number, or a BigInt beyond 2^53. */
function long(s) {
  if (s === undefined || s === null || s === '') return 0;
  const n = BigInt(s);
  return n >= -MAX_SAFE && n <= MAX_SAFE ? Number(n) : n;
}

/** An integer of a request (a number or a BigInt) as etcd3 takes 64-bit integers. */
const int64 = (n) => String(n === undefined || n === null ? 0 : n);

/** Request bytes (a Uint8Array from the engine) as a Buffer, without a copy. */
const bytes = (u8) => (u8 ? Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength) : EMPTY);

/** The end of the range of every key starting with `prefix` (clientv3's GetPrefixRangeEnd). */
function prefixEnd(prefix) {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i] += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // every byte 0xff: no upper bound
}

/** A range of the core's form as etcd's RangeRequest (linearizable: etcd's default). */
function rangeRequest(r) {
  const key = bytes(r.key);
  // `from`: a page of a prefix starts there (a listing, PROTOCOL.md §16).
  const out = { key: r.prefix && r.from != null ? bytes(r.from) : key };
  if (r.prefix) out.range_end = prefixEnd(key);
  if (r.order === 'createAscending' || r.order === 'createDescending') {
    out.sort_target = SORT_CREATE;
    out.sort_order = r.order === 'createAscending' ? ASCEND : DESCEND;
  } else if (r.order !== 'key') {
    throw new Error(`unknown range order ${r.order}`);
  }
  if (r.limit > 0) out.limit = int64(r.limit);
  if (r.maxCreateRevision > 0) out.max_create_revision = int64(r.maxCreateRevision);
  if (r.countOnly) out.count_only = true;
  return out;
}

function compareRequest(c) {
  const result = COMPARE_RESULT[c.op];
  const target = COMPARE_TARGET[c.target];
  if (result === undefined || target === undefined) throw new Error(`unknown compare ${c.op} ${c.target}`);
  const [number, field] = target;
  return { key: bytes(c.key), result, target: number, [field]: field === 'value' ? bytes(c.value) : int64(c.value) };
}

function txnOpRequest(op) {
  switch (op.op) {
    case 'put':
      return { request_put: { key: bytes(op.key), value: bytes(op.value), lease: int64(op.lease) } };
    case 'delete': {
      const key = bytes(op.key);
      return { request_delete_range: op.prefix ? { key, range_end: prefixEnd(key) } : { key } };
    }
    case 'range':
      return { request_range: rangeRequest(op) };
    default:
      throw new Error(`unknown transaction op ${op.op}`);
  }
}

/** An etcd KeyValue as the core's `{ key, value, createRevision, modRevision, version, lease }`. */
function kv(k) {
  return {
    key: k.key || EMPTY,
    value: k.value || EMPTY,
    createRevision: long(k.create_revision),
    modRevision: long(k.mod_revision),
    version: long(k.version),
    lease: long(k.lease),
  };
}

function txnReply(r) {
  const which = r.response || ['response_put', 'response_delete_range', 'response_range', 'response_txn'].find((f) => r[f]);
  switch (which) {
    case 'response_put':
      return { reply: 'put' };
    case 'response_delete_range':
      return { reply: 'delete', deleted: long(r.response_delete_range.deleted) };
    case 'response_range':
      return { reply: 'range', kvs: r.response_range.kvs.map(kv), count: long(r.response_range.count) };
    default:
      throw new Error(`a transaction reply the engine never asks for (${which})`);
  }
}

const revision = (res) => long(res.header && res.header.revision);

/** A failure retrying cannot fix: refused credentials or rights. */
const refused = (message) => ({ failure: 'other', code: 'AUTHENTICATION', message });

/** The gRPC status code of an error (etcd3's typed errors keep it only in their message). */
function grpcCode(err) {
  if (err && typeof err.code === 'number') return err.code;
  const m = /^(\d+) [A-Z_]+:/.exec(String((err && err.message) || ''));
  return m ? Number(m[1]) : undefined;
}

// ---- the transport ----

class EtcdTransport {
  constructor(driver, plan) {
    this.driver = driver;
    this.plan = plan;
    /** request id -> its timeout timer; a request is answered once. */
    this.inFlight = new Map();
    /** The etcd3 client requests go to, and how many times it was replaced. */
    this.client = this.newClient();
    this.generation = 0;
    this.replacedAt = -Infinity;
    /** The open keepalive stream, or null. */
    this.keepalives = null;
    /** The open watch stream, or null. */
    this.watches = null;
    /** The next watch id on a stream (etcd needs them non-zero and unique on the stream). */
    this.nextStreamWatch = 1;
    this.closed = false;
  }

  /** A new etcd3 client (it connects on its first call). */
  newClient() {
    const { plan } = this;
    const options = {
      hosts: plan.hosts,
      faultHandling: { host: () => ONCE, global: ONCE },
      grpcOptions: {
        'grpc.keepalive_time_ms': PING_INTERVAL_MS,
        'grpc.keepalive_timeout_ms': plan.commandTimeoutMs,
        'grpc.keepalive_permit_without_calls': 0,
        'grpc.initial_reconnect_backoff_ms': Math.min(100, MAX_RECONNECT_BACKOFF_MS),
        'grpc.max_reconnect_backoff_ms': MAX_RECONNECT_BACKOFF_MS,
      },
    };
    if (plan.auth) options.auth = { username: plan.auth.username, password: plan.auth.password };
    if (plan.tls && plan.tlsCaPem) options.credentials = { rootCertificate: Buffer.from(plan.tlsCaPem) };
    const { Etcd3 } = requirePeer('etcd3', 'the etcd backend');
    const client = new Etcd3(options);
    const auth = client.pool.authenticator;
    const metadata = auth.getMetadata.bind(auth);
    auth.getMetadata = () =>
      metadata().then((m) => {
        const withLeader = m.clone();
        withLeader.set('hasleader', 'true');
        return withLeader;
      });
    return client;
  }

  /** A message without the URL's password (server and library errors may echo input). */
  scrub(message) {
    const password = this.plan.auth && this.plan.auth.password;
    return password ? String(message).split(password).join('***') : String(message);
  }

  /**
   * An error of etcd3 or gRPC as the core's failure: connectionLost for whatever may or may not
   * have been applied, unavailable for what the cluster refused before applying it (no leader,
   * too many requests), leaseNotFound, compacted, and other for what retrying cannot fix.
   */
  failure(err, what) {
    const raw = String((err && err.message) || err);
    const message = this.scrub(`${what}: ${raw}`);
    const code = grpcCode(err);
    if (raw.includes('lease not found')) return { failure: 'leaseNotFound' };
    if (code === OUT_OF_RANGE && raw.includes('compacted')) return { failure: 'compacted' };
    switch (code) {
      case RESOURCE_EXHAUSTED:
        return { failure: 'unavailable', message };
      case UNAVAILABLE:
        return { failure: raw.includes('no leader') ? 'unavailable' : 'connectionLost', message };
      case CANCELLED:
      case UNKNOWN:
      case DEADLINE_EXCEEDED:
      case ABORTED:
      case INTERNAL:
        return { failure: 'connectionLost', message };
      case UNAUTHENTICATED:
      case PERMISSION_DENIED:
        return refused(this.scrub(`${what}: not authorized (${raw}): the URL's login, or its absence, lacks the permission`));
      case INVALID_ARGUMENT:
        if (raw.includes('authentication failed') || raw.includes('user name')) {
          return refused(this.scrub(`${what}: the cluster refused the URL's login (${raw})`));
        }
        break;
      default:
        if (err && err.constructor && err.constructor.name === 'ClientClosedError') return { failure: 'connectionLost', message };
    }
    return { failure: 'other', code: 'PROTOCOL', message };
  }

  // ---- requests ----

  perform(req) {
    const { id } = req;
    this.inFlight.set(id, null);
    if (this.closed) return this.later(id, { failure: 'connectionLost', message: 'the client is closed' });
    try {
      switch (req.op) {
        case 'leaseKeepAlive':
          return this.keepAlive(id, req.lease);
        case 'watch':
          return this.watch(id, req);
        case 'cancelWatch':
          return this.cancelWatch(id, req.watch);
        default:
          return this.unary(id, req);
      }
    } catch (err) {
      // Request data this file cannot send: the engine never emits it.
      const message = `the etcd transport cannot perform ${req.op}: ${err.message}`;
      this.later(id, { failure: 'other', code: 'PROTOCOL', message });
    }
  }

  /** Answers request `id` once (a late answer after a timeout is dropped). */
  settle(id, reply) {
    if (!this.inFlight.has(id)) return;
    clearTimeout(this.inFlight.get(id));
    this.inFlight.delete(id);
    this.driver.answer(id, reply);
  }

  /** Answers request `id` after the driver's current pump (never from inside `perform`). */
  later(id, reply) {
    queueMicrotask(() => this.settle(id, reply));
  }

  /** Arms request `id`'s timeout: `onTimeout()` then answers it as lost. */
  limit(id, what, onTimeout) {
    const ms = this.plan.commandTimeoutMs;
    const timer = setTimeout(() => {
      if (!this.inFlight.has(id)) return;
      const why = `no answer to ${what} within the response timeout (${ms} ms)`;
      onTimeout(why);
      this.settle(id, { failure: 'connectionLost', message: why });
    }, ms);
    // The driver's timer keeps the process alive while the engine waits for something.
    timer.unref();
    this.inFlight.set(id, timer);
  }

  /** A lease grant or revoke, a range or a transaction, on the current client. */
  unary(id, req) {
    const { client, generation } = this;
    const what = describe(req);
    const options = { deadline: Date.now() + this.plan.commandTimeoutMs + 1000 };
    let call;
    switch (req.op) {
      case 'leaseGrant':
        call = client.leaseClient.leaseGrant({ TTL: int64(req.ttlSecs) }, options).then((r) => {
          if (r.error) return { failure: 'other', code: 'PROTOCOL', message: this.scrub(`${what}: ${r.error}`) };
          return { reply: 'leaseGranted', lease: long(r.ID), ttlSecs: long(r.TTL) };
        });
        break;
      case 'leaseRevoke':
        call = client.leaseClient.leaseRevoke({ ID: int64(req.lease) }, options).then(() => ({ reply: 'leaseRevoked' }));
        break;
      case 'range':
        call = client.kv.range(rangeRequest(req), options).then((r) => ({
          reply: 'range',
          revision: revision(r),
          kvs: r.kvs.map(kv),
          count: long(r.count),
        }));
        break;
      case 'txn': {
        const request = {
          compare: req.compares.map(compareRequest),
          success: req.success.map(txnOpRequest),
          failure: req.failure.map(txnOpRequest),
        };
        call = client.kv.txn(request, options).then((r) => ({
          reply: 'txn',
          revision: revision(r),
          succeeded: r.succeeded,
          replies: r.responses.map(txnReply),
        }));
        break;
      }
      default:
        throw new Error('unknown op');
    }
    this.limit(id, what, () => this.replace(generation));
    call.then(
      (reply) => this.settle(id, reply),
      (err) => this.settle(id, this.failure(err, what)),
    );
  }

  /** One keepalive of `lease` on the keepalive stream (opened if none is). */
  keepAlive(id, lease) {
    const key = int64(lease);
    let stream = this.keepalives;
    if (stream === null || stream.generation !== this.generation) {
      if (stream !== null) stream.close('the keepalive stream was replaced');
      stream = this.keepalives = new KeepAliveStream(this);
    }
    this.limit(id, `a keepalive of lease ${BigInt(lease).toString(16)}`, (why) => {
      stream.close(why);
      this.replace(stream.generation);
    });
    stream.send(id, key);
  }

  /** Creates a watch on the watch stream (opened if none is). */
  watch(id, req) {
    let stream = this.watches;
    if (stream !== null && stream.generation !== this.generation) {
      stream.end('the connection went silent and was replaced');
      stream = null;
    }
    if (stream === null) stream = this.watches = new WatchStream(this);
    const what = `a watch of ${bytes(req.key).toString('utf8')}`;
    this.limit(id, what, (why) => {
      stream.end(why);
      this.replace(stream.generation);
    });
    stream.create(id, req);
  }

  /**
   * Cancels a watch: answered at once, and no notice of it follows (the server is told; its
   * confirmation is not waited for: etcd sends none for a watch it already ended).
   */
  cancelWatch(id, watch) {
    if (this.watches !== null) this.watches.cancel(watch);
    this.later(id, WATCH_CANCELED);
  }

  /**
   * Replaces the client of `generation` (if it is still the current one, and none was replaced
   * within the last response timeout) by a new one: a request went unanswered on it, so its
   * connections may be silent. Its streams end (their keepalives fail, their watches end).
   */
  replace(generation) {
    if (this.closed || generation !== this.generation) return;
    const now = performance.now();
    if (now - this.replacedAt < this.plan.commandTimeoutMs) return;
    this.replacedAt = now;
    const old = this.client;
    this.client = this.newClient();
    this.generation += 1;
    const why = 'the connection went silent and was replaced';
    if (this.keepalives !== null) this.keepalives.close(why);
    if (this.watches !== null) this.watches.end(why);
    old.close();
  }

  /**
   * Checks that a member answers (a Status within connectTimeoutMs, asked again of a member
   * picked at random after each failure), so a wrong address or login fails connect(), not the
   * first lock.
   */
  async check() {
    const { plan } = this;
    const deadline = performance.now() + plan.connectTimeoutMs;
    let last;
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      try {
        await this.client.maintenance.status({ deadline: Date.now() + left });
        return;
      } catch (err) {
        const f = this.failure(err, `could not connect to ${plan.redacted}`);
        if (f.code === 'AUTHENTICATION') throw makeError('AUTHENTICATION', f.message);
        last = this.failure(err, 'the last attempt').message;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(0, deadline - performance.now()))));
    }
    const within = `within the connect timeout (${plan.connectTimeoutMs} ms)`;
    // The core's connect-failure wording (core/src/connect/failure.rs).
    throw makeError('CONNECTION', `could not connect to ${plan.redacted}: no member answered ${within}${last ? `; ${last}` : ''}`);
  }

  /** Nothing to hold: open calls keep their connections ref'd until they end. */
  holdOpen() {}

  /** Ends the streams and the client's connections. */
  async close() {
    if (this.closed) return;
    this.closed = true;
    if (this.keepalives !== null) this.keepalives.close('the client is closed');
    if (this.watches !== null) this.watches.end('the client is closed');
    for (const id of [...this.inFlight.keys()]) this.settle(id, { failure: 'connectionLost', message: 'the client is closed' });
    this.client.close();
  }
}

/** Opens a stream of `service` on `transport`'s client; resolves with the gRPC call. */
function openStream(transport, service, method) {
  return transport.client.pool.withConnection(service, ({ client, metadata }) => client[method](metadata, {}));
}

/** Ends a gRPC call without it counting as a failure of its member. */
function endCall(call) {
  // Canceling emits an 'error' (CANCELLED): a call ended before it had listeners needs one.
  if (call.listenerCount('error') === 0) call.on('error', () => {});
  call.end();
  call.cancel();
}

/**
 * One LeaseKeepAlive stream: keepalives written in order, each answered by the server's answer
 * to it (matched by lease, first sent first answered).
 */
class KeepAliveStream {
  constructor(transport) {
    this.transport = transport;
    this.generation = transport.generation;
    /** lease (decimal) -> request ids waiting for an answer, in order sent. */
    this.waiting = new Map();
    /** Writes made before the stream was open. */
    this.queued = [];
    this.call = null;
    this.closed = false;
    openStream(transport, 'Lease', 'leaseKeepAlive').then(
      (call) => this.opened(call),
      (err) => this.close(transport.failure(err, 'opening the keepalive stream')),
    );
  }

  opened(call) {
    if (this.closed) return endCall(call);
    this.call = call;
    call.on('data', (res) => this.answer(res));
    call.on('error', (err) => this.close(this.transport.failure(err, 'the keepalive stream')));
    call.on('end', () => this.close('the server ended the keepalive stream'));
    for (const key of this.queued.splice(0)) call.write({ ID: key });
  }

  send(id, key) {
    const queue = this.waiting.get(key) || [];
    queue.push(id);
    this.waiting.set(key, queue);
    if (this.call !== null) this.call.write({ ID: key });
    else this.queued.push(key);
  }

  answer(res) {
    const key = String(res.ID);
    const queue = this.waiting.get(key);
    const id = queue && queue.shift();
    if (queue && queue.length === 0) this.waiting.delete(key);
    if (id !== undefined) {
      const ttl = long(res.TTL);
      const reply = ttl > 0 ? { reply: 'keptAlive', lease: long(res.ID), ttlSecs: ttl } : { failure: 'leaseNotFound' };
      this.transport.settle(id, reply);
    }
    // Nothing waits: end the stream (an open call would hold the process open).
    if (this.waiting.size === 0) this.close();
  }

  /**
   * Ends the stream; keepalives still waiting fail with `why` (a message: connectionLost; or
   * the failure that broke the stream, e.g. a refused login).
   */
  close(why = 'the keepalive stream ended') {
    if (this.closed) return;
    this.closed = true;
    const t = this.transport;
    if (t.keepalives === this) t.keepalives = null;
    if (this.call !== null) endCall(this.call);
    const reply = typeof why === 'string' ? { failure: 'connectionLost', message: why } : why;
    for (const queue of this.waiting.values()) for (const id of queue) t.settle(id, reply);
    this.waiting.clear();
  }
}

/** One Watch stream: creates and cancels in the order asked, events pushed. */
class WatchStream {
  constructor(transport) {
    this.transport = transport;
    this.generation = transport.generation;
    /** Creates sent, waiting for the server's `created`: { id, watch, streamId }, in order. */
    this.creating = [];
    /** stream watch id (decimal) -> the engine's watch. */
    this.live = new Map();
    /** Watches canceled before their `created` arrived: canceled on the server once it does. */
    this.canceledEarly = new Set();
    this.queued = [];
    this.call = null;
    this.ended = false;
    openStream(transport, 'Watch', 'watch').then(
      (call) => this.opened(call),
      (err) => this.end(transport.failure(err, 'opening the watch stream')),
    );
  }

  opened(call) {
    if (this.ended) return endCall(call);
    this.call = call;
    call.on('data', (res) => this.answer(res));
    call.on('error', (err) => this.end(this.transport.failure(err, 'the watch stream')));
    call.on('end', () => this.end('the server ended the watch stream'));
    for (const w of this.queued.splice(0)) call.write(w);
  }

  write(request) {
    if (this.call !== null) this.call.write(request);
    else this.queued.push(request);
  }

  create(id, req) {
    const streamId = this.transport.nextStreamWatch++;
    const key = bytes(req.key);
    const create = { key, start_revision: int64(req.startRevision), watch_id: int64(streamId) };
    if (req.prefix) create.range_end = prefixEnd(key);
    this.creating.push({ id, watch: req.watch, streamId: String(streamId) });
    this.write({ create_request: create });
  }

  cancel(watch) {
    for (const [streamId, w] of this.live) {
      if (w === watch) {
        this.live.delete(streamId);
        this.write({ cancel_request: { watch_id: streamId } });
        return this.endIfIdle();
      }
    }
    if (this.creating.some((c) => c.watch === watch)) this.canceledEarly.add(watch);
  }

  answer(res) {
    const t = this.transport;
    if (res.created) {
      const c = this.creating.shift();
      if (c === undefined) return this.end('the server confirmed a watch nobody created');
      const early = this.canceledEarly.delete(c.watch);
      if (res.canceled) {
        const compacted = long(res.compact_revision);
        if (compacted > 0) {
          // Created and ended at once (its start revision is compacted): the engine hears of it
          // as an ended watch, and reads again.
          t.settle(c.id, WATCHING);
          const why = `the watch's start revision was compacted (oldest kept: ${compacted})`;
          if (!early) t.driver.notice({ notice: 'watchEnded', watch: c.watch, why });
        } else {
          const reason = res.cancel_reason || 'no reason given';
          const code = reason.includes('permission denied') ? 'AUTHENTICATION' : 'PROTOCOL';
          t.settle(c.id, { failure: 'other', code, message: `the cluster refused a watch: ${reason}` });
        }
        return this.endIfIdle();
      }
      if (String(res.watch_id) !== c.streamId) {
        t.settle(c.id, { failure: 'connectionLost', message: 'the server confirmed another watch' });
        return this.end('the server confirmed watches out of order');
      }
      if (early) {
        // Canceled before it was created: cancel it on the server now, never push its events.
        this.write({ cancel_request: { watch_id: c.streamId } });
      } else {
        this.live.set(c.streamId, c.watch);
      }
      t.settle(c.id, WATCHING);
      if (early) return this.endIfIdle();
    }
    const watch = this.live.get(String(res.watch_id));
    if (watch === undefined) return;
    if (res.canceled) {
      this.live.delete(String(res.watch_id));
      const compacted = long(res.compact_revision);
      const why =
        compacted > 0
          ? `the watch's start revision was compacted (oldest kept: ${compacted})`
          : res.cancel_reason
            ? `the server ended the watch: ${res.cancel_reason}`
            : 'the server ended the watch';
      t.driver.notice({ notice: 'watchEnded', watch, why });
      return this.endIfIdle();
    }
    if (res.events && res.events.length) {
      const events = res.events.map((e) => ({ type: DELETE_EVENT.has(e.type) ? 'delete' : 'put', kv: kv(e.kv) }));
      t.driver.notice({ notice: 'watch', watch, events });
    }
  }

  /** Ends the stream once no watch is live or being created (an open call holds the process). */
  endIfIdle() {
    if (this.live.size === 0 && this.creating.length === 0) this.end();
  }

  /**
   * Ends the stream: every live watch on it is pushed as ended, every create waiting fails
   * (`why`: a message, or the failure that broke the stream).
   */
  end(why = 'the watch stream ended') {
    if (this.ended) return;
    this.ended = true;
    const t = this.transport;
    if (t.watches === this) t.watches = null;
    if (this.call !== null) endCall(this.call);
    const reply = typeof why === 'string' ? { failure: 'connectionLost', message: why } : why;
    if (typeof why !== 'string') why = why.message || why.failure;
    for (const c of this.creating.splice(0)) t.settle(c.id, reply);
    const live = [...this.live.values()].sort((a, b) => a - b);
    this.live.clear();
    if (!t.closed) for (const watch of live) t.driver.notice({ notice: 'watchEnded', watch, why });
  }
}

/** The operation in words, for messages (keys are lock names, not secret). */
function describe(req) {
  const key = (k) => bytes(k).toString('utf8');
  switch (req.op) {
    case 'leaseGrant':
      return `a lease grant (${req.ttlSecs} s)`;
    case 'leaseRevoke':
      return `the revoke of lease ${BigInt(req.lease).toString(16)}`;
    case 'range':
      return `a read of ${key(req.key)}${req.prefix ? '*' : ''}`;
    case 'txn':
      return req.compares && req.compares.length ? `a transaction on ${key(req.compares[0].key)}` : 'a transaction';
    default:
      return req.op;
  }
}

/**
 * Opens the transport of an `etcd://` or `etcds://` URL: makes the client and checks that a
 * member answers (ConnectionError if none does within connectTimeoutMs, AuthenticationError if
 * the cluster refuses the login, InvalidArgumentError for a TLS CA gRPC cannot use); the core's
 * `plan` says where and how.
 */
async function open(driver, plan) {
  requirePeer('etcd3', 'the etcd backend');
  let t;
  try {
    t = new EtcdTransport(driver, plan);
  } catch (err) {
    const why = `the etcd client could not be made (${err.message}); is the TLS CA option a PEM certificate?`;
    throw makeError('INVALID_ARGUMENT', `${plan.redacted}: ${why}`);
  }
  try {
    await t.check();
  } catch (err) {
    await t.close();
    throw err;
  }
  return t;
}

module.exports = { open };
