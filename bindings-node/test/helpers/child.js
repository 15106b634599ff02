'use strict';
// Child Node processes for the exit tests (test/exit.test.js, test/redlock-exit.test.js): run a
// fixture script, and check that it exits by itself.

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

/** Runs `node test/fixtures/<name> ...args`; `exited` resolves with `{ code, signal, out, err }`. */
function runFixture(name, args) {
  const script = path.join(__dirname, '..', 'fixtures', name);
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out, err })));
  return { child, exited };
}

/**
 * Waits for a fixture run to exit by itself (it is killed after `killAfterMs`, which fails the
 * test), successfully, having printed `done`.
 */
async function assertExitsByItself({ child, exited }, killAfterMs) {
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  const { code, signal, out, err } = await exited;
  clearTimeout(timer);
  assert.equal(
    signal,
    null,
    `the process had to be killed (still running after ${killAfterMs / 1000} s); stderr: ${err}`,
  );
  assert.equal(code, 0, err);
  assert.equal(out, 'done\n');
}

/** Fixture scripts: awaits `promise` and checks that it rejects with an instance of `cls`. */
async function expectRejects(promise, cls, expected) {
  try {
    await promise;
  } catch (err) {
    if (!(err instanceof cls)) throw err;
    return;
  }
  throw new Error(expected);
}

/** Fixture scripts: runs `main`, then prints `done`; a failure is printed and exits with 1. */
function fixtureMain(main) {
  main().then(
    () => process.stdout.write('done\n'),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

module.exports = { assertExitsByItself, expectRejects, fixtureMain, runFixture };
