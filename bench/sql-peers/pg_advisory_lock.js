// The PostgreSQL peer of the SQL benchmark (scripts/bench_sql.sh, lockgate-bench bench-sql):
// npm `advisory-lock` 2.0.0, the most used advisory-lock mutex for Node (pg_advisory_lock on a
// connection of its own per lock(), pg_advisory_unlock + closing it on unlock), used as its
// README shows. Prints what lockgate-bench's own bench worker prints, so one parser reads both:
//   pairs  --url URL --name NAME --pairs N        → uncontended lock()+unlock() pairs per second
//                                                   (after 50 warm-up pairs), one number
//   worker --url URL --name NAME --hold-us H --start-ns NS --duration-ms MS
//          → from wall-clock NS for MS: lock, hold ~H µs (spinning), unlock, at once again; then
//            one line per holding: `0 count wait_start acquired release_start` (ns; the
//            library has no fencing token, so the second field is this process's own count).
"use strict";
const { performance } = require("perf_hooks");
const mutexes = require("advisory-lock").default;

function args() {
  const a = { mode: process.argv[2] };
  for (let i = 3; i < process.argv.length; i += 2) a[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
  return a;
}

// Wall-clock nanoseconds with sub-millisecond resolution (comparable across processes).
function wallNs() {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
}

async function pairs(a) {
  const mutex = mutexes(a.url)(a.name);
  const n = Number(a.pairs);
  let t = 0;
  for (let i = 0; i < 50 + n; i++) {
    if (i === 50) t = performance.now();
    const unlock = await mutex.lock();
    await unlock();
  }
  console.log((n / ((performance.now() - t) / 1000)).toFixed(1));
}

async function worker(a) {
  const mutex = mutexes(a.url)(a.name);
  const hold = Number(a["hold-us"]) / 1000;
  const start = BigInt(a["start-ns"]);
  const end = start + BigInt(a["duration-ms"]) * 1000000n;
  const now = wallNs();
  if (start > now) await new Promise((r) => setTimeout(r, Number((start - now) / 1000000n)));
  while (wallNs() < start) {}
  const lines = [];
  let count = 0;
  while (wallNs() < end) {
    const waitStart = wallNs();
    const unlock = await mutex.lock();
    const acquired = wallNs();
    const spin = performance.now();
    while (performance.now() - spin < hold) {}
    const releaseStart = wallNs();
    await unlock();
    count += 1;
    lines.push(`0 ${count} ${waitStart} ${acquired} ${releaseStart}`);
  }
  process.stdout.write(lines.length ? lines.join("\n") + "\n" : "");
}

const a = args();
(a.mode === "pairs" ? pairs(a) : a.mode === "worker" ? worker(a) : Promise.reject(new Error("usage: pairs | worker")))
  .catch((e) => {
    console.error(`pg_advisory_lock.js: ${e.message}`);
    process.exit(1);
  });
