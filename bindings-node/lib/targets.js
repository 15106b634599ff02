'use strict';
// How a Redis server is named and connected: URLs (redis://, rediss://), ioredis clients, the
// connection options and sockets, shared by connect() and connectRedlock(). The rules (URL
// grammar, option ranges and defaults) are the core's, through the wasm module.

const Redis = require('ioredis');
const wasm = require('./wasm');

/** The URL without its password, for messages. */
function redact(url) {
  try {
    return wasm.parseUrl(String(url)).redacted;
  } catch {
    return '<invalid URL>';
  }
}

/** Whether `x` looks like an ioredis client (or Cluster). */
function isIoredis(x) {
  return (
    x instanceof Redis ||
    (x !== null &&
      typeof x === 'object' &&
      typeof x.call === 'function' &&
      typeof x.pipeline === 'function' &&
      typeof x.duplicate === 'function')
  );
}

/** What the core parsed from each URL checkUrl() returned. */
const endpoints = new WeakMap();

/**
 * Parses and checks a client URL by the core's grammar (core/src/connect/url.rs, the same for
 * the native, Python and JVM clients): `redis[s]://[[user]:password@]host[:port][/db]
 * [?protocol=resp2|resp3]`. Returns the URL without its query (`protocol` picks the native
 * client's RESP version; the Node connections choose their own, and ioredis would read any query
 * parameter as one of its options). Throws InvalidArgumentError; messages never echo the
 * password.
 */
function checkUrl(target) {
  const endpoint = wasm.parseUrl(target);
  // WHATWG URL and the core's `url` crate implement the same standard: what the core accepted
  // parses here too.
  const url = new URL(target);
  url.search = '';
  endpoints.set(url, endpoint);
  return url;
}

/**
 * Where a checked URL points and how to log in, as the core parsed it: `{ host, port, username,
 * password, tls, db, identity }` (credentials decoded, `undefined` when absent; `tls` for
 * rediss://; `identity` is `host:port/db`).
 */
function endpointOf(url) {
  return endpoints.get(url);
}

/**
 * The client options of `connect(target, options)` checked and defaulted by the core (unknown
 * keys, types, timeouts, replicaAcks with its 1000 ms default WAIT, cluster rules): `{ keyPrefix,
 * connectTimeoutMs, commandTimeoutMs, cluster, replicaAcks }`. For an ioredis client or Cluster
 * `target`, its own command timeout bounds replicaAcks' WAIT.
 */
function clientSettings(target, options) {
  if (typeof target === 'string') return wasm.clientSettings(target, options, false, undefined);
  const o = (target && target.options) || {};
  const own = target && target.isCluster ? (o.redisOptions || {}).commandTimeout : o.commandTimeout;
  return wasm.clientSettings(undefined, options, Boolean(target && target.isCluster), own);
}

/** The command timeout in ms of a connection this package opens from a URL: `commandTimeoutMs`, else `redisOptions.commandTimeout`, else 5 s. */
function urlCommandTimeout(opts) {
  return opts.commandTimeoutMs ?? (opts.redisOptions || {}).commandTimeout ?? 5000;
}

/** The connect timeout in ms of a connection this package opens from a URL: `connectTimeoutMs`, else `redisOptions.connectTimeout`, else 5 s. */
function urlConnectTimeout(opts) {
  return opts.connectTimeoutMs ?? (opts.redisOptions || {}).connectTimeout ?? 5000;
}

/** The node connections of an ioredis Cluster, or the one connection of a Redis client. */
function connectionsOf(redis) {
  return redis && redis.isCluster ? redis.nodes('all') : [redis];
}

/** Lets the process exit while these connections are open (and idle). */
function unrefSocket(redis) {
  for (const r of connectionsOf(redis)) {
    const s = r && r.stream;
    if (s && typeof s.unref === 'function') s.unref();
  }
}

/** Keeps the process alive while these connections are open. */
function refSocket(redis) {
  for (const r of connectionsOf(redis)) {
    const s = r && r.stream;
    if (s && typeof s.ref === 'function') s.ref();
  }
}

module.exports = {
  checkUrl,
  clientSettings,
  urlCommandTimeout,
  urlConnectTimeout,
  endpointOf,
  isIoredis,
  redact,
  refSocket,
  unrefSocket,
};
