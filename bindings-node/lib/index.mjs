// The ES module entry of `lockgate` (package.json `exports` → `import`): the CommonJS module
// (lib/index.js) re-exported name by name, so `import { TimeoutError } from 'lockgate'` works for
// every export — Node can only guess the named exports of a CommonJS module from its source,
// and guesses few of these. One module instance serves both: `instanceof` agrees between
// `import` and `require`. test/package.test.js checks that this list equals lib/index.js's.
import lockgate from './index.js';

export const {
  connect,
  Client,
  Lock,
  Semaphore,
  ReadWriteLock,
  Election,
  Candidate,
  Lease,
  Leadership,
  telemetryChannels,
  instrumentOpenTelemetry,
  uninstrumentOpenTelemetry,
  LockError,
  InvalidArgumentError,
  TimeoutError,
  NotHeldError,
  ConnectionError,
  AuthenticationError,
  ProtocolError,
  CancelledError,
  ClosedError,
  AlreadyHeldError,
  UnsupportedError,
} = lockgate;

export default lockgate;
