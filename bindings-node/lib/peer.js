'use strict';
// The database drivers are optional peer dependencies (package.json's peerDependenciesMeta):
// installing lockgate pulls none of them, and the application installs the one its backend
// uses. Each transport loads its driver here when a client first needs it, so a missing driver
// is one clear UnsupportedError (code UNSUPPORTED) naming the npm line that fixes it, instead of
// a MODULE_NOT_FOUND from deep inside the package.

const { makeError } = require('./errors');

/**
 * `require(request)` of the peer package `pkg` (its main module, or a file of it), for
 * `backend` (the words the message uses). Only the package itself being absent becomes the
 * UnsupportedError; an error thrown while the driver loads is the driver's, and propagates.
 *
 * @param {string} pkg the npm package name, e.g. `ioredis`
 * @param {string} backend what needs it, e.g. `the Redis backend`
 * @param {string} [request] the module to load (default: `pkg`)
 */
function requirePeer(pkg, backend, request = pkg) {
  try {
    return require(request);
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && missing(err, request)) {
      const e = makeError('UNSUPPORTED', `${backend} needs the ${pkg} package, which is not installed: npm install ${pkg}`);
      e.cause = err;
      throw e;
    }
    throw err;
  }
}

/** Whether a MODULE_NOT_FOUND is about `request` itself, not a module the driver requires. */
function missing(err, request) {
  return typeof err.message === 'string' && err.message.startsWith(`Cannot find module '${request}'`);
}

module.exports = { requirePeer };
