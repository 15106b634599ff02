'use strict';
// One of N processes contending for one lock (forked by bench.js, IPC channel to it): acquire,
// hold ~1 ms, release, then stay out until another process has held the lock, so that every
// acquisition is a handoff to a process that was already waiting. Prints
// [wantedAt, acquiredAt, releasedAt] per round in CLOCK_MONOTONIC nanoseconds
// (process.hrtime.bigint(): comparable across processes on one machine).

const { libs } = require('./libs');

const [name, url, durationMs, holdMs, index] = process.argv.slice(2);
const me = Number(index);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t = () => process.hrtime.bigint();

// The parent broadcasts { seq, by } for every acquisition of any process, in order.
let ownAcquired = 0; // acquisitions made here
let ownSeen = 0; // ...whose broadcast came back
let lastOwnSeq = -1;
let lastOtherSeq = -1;
let wake = null;
process.on('message', ({ seq, by }) => {
  if (seq === undefined) return; // the start signal
  if (by === me) {
    ownSeen++;
    lastOwnSeq = seq;
  } else {
    lastOtherSeq = seq;
  }
  if (wake && ownSeen === ownAcquired && lastOtherSeq > lastOwnSeq) wake();
});
const someoneElseHeldIt = () =>
  ownSeen === ownAcquired && lastOtherSeq > lastOwnSeq
    ? Promise.resolve()
    : new Promise((r) => {
        wake = () => {
          wake = null;
          r();
        };
      });

(async () => {
  const lib = await libs[name].open(url);
  const lock = lib.lock(`bench:handoff:${name}`);
  const rounds = [];
  const end = Date.now() + Number(durationMs);
  const deadline = sleep(Number(durationMs));
  process.send({ ready: true });
  await new Promise((r) => process.once('message', r)); // start together
  while (Date.now() < end) {
    const wanted = t();
    await lock.acquire();
    const acquired = t();
    ownAcquired++;
    process.send({ acquired: true });
    await sleep(Number(holdMs));
    const released = t();
    await lock.release();
    rounds.push([String(wanted), String(acquired), String(released)]);
    await Promise.race([someoneElseHeldIt(), deadline]);
  }
  await lib.close();
  process.send({ rounds }, () => process.exit(0));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
