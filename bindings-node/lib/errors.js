'use strict';
// The error classes. Codes and `retryable` come from the core (`errorKinds()`); the engine
// creates every error through `makeError`, registered below, and so does this package.

const wasm = require('./wasm');

/** code -> retryable, straight from the core's ErrorKind table. */
const RETRYABLE = new Map(wasm.errorKinds());

/** Base class of every error lockgate raises: a stable `code` and a `retryable` flag. */
class LockError extends Error {
  /**
   * @param {string} message
   * @param {{ cause?: unknown }} [options]
   */
  constructor(message, options) {
    super(message, options);
    const code = new.target.code;
    /** @type {string} */
    this.code = code;
    /** @type {boolean} */
    this.retryable = RETRYABLE.get(code) ?? false;
  }
}
LockError.code = 'PROTOCOL';

function define(name, code) {
  // A named class expression, so stack traces and util.inspect show the class name.
  const cls = {
    [name]: class extends LockError {},
  }[name];
  cls.code = code;
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
  return cls;
}
Object.defineProperty(LockError.prototype, 'name', {
  value: 'LockError',
  writable: true,
  configurable: true,
});

/**
 * Every error class by name, as the package exports them: one per code of the core's table,
 * named for it (`NOT_HELD`: NotHeldError).
 */
const ERROR_EXPORTS = { LockError };
for (const code of RETRYABLE.keys()) {
  const name = `${code.toLowerCase().replace(/(?:^|_)(\w)/g, (_, c) => c.toUpperCase())}Error`;
  ERROR_EXPORTS[name] = define(name, code);
}

const BY_CODE = new Map(Object.values(ERROR_EXPORTS).slice(1).map((c) => [c.code, c]));

/** Stack frames inside the engine and its glue, hidden from users. */
const INTERNAL_FRAME = /wasm:\/\/|[\\/]pkg[\\/]lockgate_node\.js|[\\/]lib[\\/]errors\.js/;

/**
 * The one mapping from a core error (code, message, retryable) to a JavaScript error. A code
 * this package does not know yet (a newer core) still yields a LockError with that code.
 */
function fromCore(code, message, retryable) {
  const cls = BY_CODE.get(code);
  const err = cls ? new cls(message) : new LockError(message);
  err.code = code;
  err.retryable = retryable;
  // Drop the engine's own frames (WebAssembly and its glue) so the stack shows the caller.
  if (typeof err.stack === 'string') {
    err.stack = err.stack
      .split('\n')
      .filter((line) => !INTERNAL_FRAME.test(line))
      .join('\n');
  }
  return err;
}

wasm.setErrorFactory(fromCore);

/** A LockError for a condition the JavaScript layer detects (closed client, bad signal). */
function makeError(code, message) {
  return wasm.makeError(code, message);
}

/** An InvalidArgumentError: an argument the JavaScript layer rejects before any network call. */
function invalid(message) {
  return makeError('INVALID_ARGUMENT', message);
}

module.exports = {
  ...ERROR_EXPORTS,
  ERROR_EXPORTS,
  makeError,
  invalid,
  ERROR_CLASSES: BY_CODE,
  CORE_CODES: [...RETRYABLE.keys()],
};
