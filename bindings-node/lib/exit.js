'use strict';
// Process exit: what lockgate leaves on the server when the process ends without close()
// (README.md, "Process exit", says it for users). SIGINT / SIGTERM that nobody else listens for
// (listeners of the `signal-exit` package do not count: they step aside for others, as this does)
// close every open client for at most CLEANUP_MS, then raise the signal again with Node's
// default action, so the process ends as killed by it; a second signal ends it at once. An
// application that listens itself has taken charge of shutdown (Node turns the default action
// off), so nothing is done. On process.exit(), an uncaught exception or the end of the program
// only synchronous code runs: each client writes its releases and withdrawals to its sockets
// there and does not wait. The listeners exist only while a client is open (its driver
// registered here) and hold only weak references: an unreachable, idle client is collected.

/** How long a signal waits for the releases before the process ends anyway: the core's one grace. */
const CLEANUP_MS = require('./wasm').exitGraceMs();
const SIGNALS = ['SIGINT', 'SIGTERM'];

/** @type {Set<WeakRef<object>>} the open drivers (lib/driver.js) */
const open = new Set();
let installed = false;
let cleaning = false;

/** Registers an open driver (lib/driver.js): from now on process exit cleans it up. */
function register(driver) {
  for (const ref of open) if (ref.deref() === undefined) open.delete(ref);
  open.add(driver.exitRef);
  if (!installed) install();
}

/** Forgets a driver that close() is closing. */
function unregister(driver) {
  open.delete(driver.exitRef);
  if (open.size === 0 && installed && !cleaning) uninstall();
}

/** The open drivers still reachable. */
function liveDrivers() {
  const out = [];
  for (const ref of open) {
    const d = ref.deref();
    if (d === undefined) open.delete(ref);
    else if (!d.closed) out.push(d);
  }
  return out;
}

function install() {
  installed = true;
  for (const s of SIGNALS) process.on(s, onSignal);
  process.on('exit', onExit);
}

function uninstall() {
  installed = false;
  for (const s of SIGNALS) process.removeListener(s, onSignal);
  process.removeListener('exit', onExit);
}

/** Re-raises `signal` with Node's default action (the process ends as if lockgate never listened). */
function reraise(signal) {
  uninstall();
  process.kill(process.pid, signal);
  // With no listener left the kill is immediate. A listener that stepped aside (signal-exit)
  // gets the signal from the event loop: keep the loop alive until then, or the process would
  // end with status 0 first, now that the cleanup closed every connection.
  setTimeout(() => {}, 1000);
}

/**
 * How many listeners of a signal belong to the `signal-exit` package (v3 and v4), which many
 * tools load: like lockgate, it steps aside when anybody else listens, so counting it as an
 * application handler would leave nobody to end the process.
 */
function signalExitListeners() {
  let n = 0;
  for (const emitter of [globalThis[Symbol.for('signal-exit emitter')], process.__signal_exit_emitter__]) {
    if (emitter && typeof emitter.count === 'number') n += emitter.count;
  }
  return n;
}

/** Waits for `promise`, but at most `ms` milliseconds. */
async function within(promise, ms) {
  let timer;
  await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

function onSignal(signal) {
  // Someone else listens: the application handles this signal (see above).
  if (process.listenerCount(signal) - signalExitListeners() > 1) return;
  if (cleaning) {
    reraise(signal);
    return;
  }
  cleaning = true;
  within(Promise.allSettled(liveDrivers().map((d) => d.close())), CLEANUP_MS).then(() => reraise(signal));
}

function onExit() {
  for (const d of liveDrivers()) d.abandon();
}

module.exports = { register, unregister, within, CLEANUP_MS };
