'use strict';
// How a Redis server is named: URLs (redis://, rediss://) and ioredis clients, shared by
// connect() and connectRedlock().

const Redis = require('ioredis');
const { makeError } = require('./errors');

function invalid(message) {
  return makeError('INVALID_ARGUMENT', message);
}

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

/** Parses a client URL (redis:// or rediss://); throws InvalidArgumentError. */
function checkUrl(target) {
  let url;
  try {
    url = new URL(target);
  } catch {
    throw invalid('the Redis URL is not a valid URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw invalid(`the Redis URL must start with redis:// or rediss://, got ${url.protocol}//`);
  }
  return url;
}

module.exports = { checkUrl, isIoredis, redact };
