'use strict';
// How a Redis server is named and connected: URLs (redis://, rediss://), ioredis clients, the
// connection options and sockets, shared by connect() and connectRedlock().

const Redis = require('ioredis');
const { invalid } = require('./errors');

/** The URL without its password, for messages. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
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

/** The largest database number a URL may name (core: a `u32`). */
const MAX_DB = 4294967295;

/** A percent-encoded URL component as text, for messages (left as it is if it does not decode). */
function decoded(component) {
  try {
    return decodeURIComponent(component);
  } catch {
    return component;
  }
}

/**
 * Parses and checks a client URL by core's rules (core/src/native/url.rs, which the native,
 * Python and JVM clients use): `redis[s]://[[user]:password@]host[:port][/db][?protocol=resp2|resp3]`
 * with `db` in plain decimal digits; no other query parameter, no fragment, and no user name
 * without a password (which would otherwise log in as the server's `default` user: a silent
 * change of identity). Returns the URL without its query (`protocol` picks the native client's
 * RESP version; the Node connections choose their own, and ioredis would read any query
 * parameter as one of its options). Throws InvalidArgumentError; messages never echo the
 * password.
 */
function checkUrl(target) {
  let url;
  try {
    url = new URL(target);
  } catch {
    throw invalid('malformed Redis URL: it is not a valid URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw invalid(
      `unsupported URL scheme ${JSON.stringify(url.protocol.replace(/:$/, ''))}: use redis:// or rediss:// (TLS)`,
    );
  }
  if (url.hostname === '') throw invalid('Redis URL has no host');
  if (url.username !== '' && url.password === '') {
    const user = decoded(url.username);
    throw invalid(
      `the Redis URL names user ${JSON.stringify(user)} but gives no password; write ` +
        `redis://${user}:PASSWORD@host (lockgate never connects as another user than the one ` +
        'named, and a user without a password cannot be told apart from a forgotten one)',
    );
  }
  const path = url.pathname.replace(/^\//, '');
  if (path !== '' && !(/^[0-9]+$/.test(path) && Number(path) <= MAX_DB)) {
    throw invalid(
      'the path of a Redis URL must be a database number (decimal digits, like /0 or /2), ' +
        `got /${decoded(path)}`,
    );
  }
  for (const [key, value] of url.searchParams) {
    if (key !== 'protocol') {
      throw invalid(`unsupported Redis URL parameter ${JSON.stringify(key)} (the only one accepted is protocol)`);
    }
    if (value !== 'resp2' && value !== 'resp3') {
      throw invalid(
        `unsupported Redis URL protocol ${JSON.stringify(value)}: use resp2 or resp3 (lockgate speaks RESP3 either way)`,
      );
    }
  }
  if (url.hash !== '' || target.includes('#')) throw invalid('a Redis URL takes no #fragment');
  url.search = '';
  return url;
}

/**
 * Where a checked URL points and how to log in: `{ host, port, username, password, tls }`
 * (credentials decoded, `undefined` when absent; `tls` for rediss://).
 */
function endpointOf(url) {
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : 6379,
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    tls: url.protocol === 'rediss:',
  };
}

/** The command timeout in ms of a connection this package opens from a URL: `commandTimeoutMs`, else `redisOptions.commandTimeout`, else 5 s. */
function urlCommandTimeout(opts) {
  return opts.commandTimeoutMs ?? (opts.redisOptions || {}).commandTimeout ?? 5000;
}

/** The connect timeout in ms of a connection this package opens from a URL: `connectTimeoutMs`, else `redisOptions.connectTimeout`, else 5 s. */
function urlConnectTimeout(opts) {
  return opts.connectTimeoutMs ?? (opts.redisOptions || {}).connectTimeout ?? 5000;
}

/** Checks the connection options the drivers use themselves (`connectTimeoutMs`, `commandTimeoutMs`, `redisOptions`). */
function checkTransportOptions(opts) {
  for (const key of ['connectTimeoutMs', 'commandTimeoutMs']) {
    const v = opts[key];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) {
      throw invalid(`${key} must be a positive number of milliseconds`);
    }
  }
  const ro = opts.redisOptions;
  if (ro !== undefined && (typeof ro !== 'object' || ro === null || Array.isArray(ro))) {
    throw invalid('redisOptions must be an object of ioredis options');
  }
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
  checkTransportOptions,
  checkUrl,
  urlCommandTimeout,
  urlConnectTimeout,
  endpointOf,
  isIoredis,
  redact,
  refSocket,
  unrefSocket,
};
