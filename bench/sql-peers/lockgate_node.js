// lockgate through its Node binding (bindings-node, built by its ci.sh) on PostgreSQL, the row
// that compares it with npm `advisory-lock` in the same language (lockgate-bench bench-sql).
// The same modes and output as pg_advisory_lock.js; the token is the lease's fencing token.
//   pairs  --url URL --name NAME --pairs N
//   worker --url URL --name NAME --hold-us H --start-ns NS --duration-ms MS
"use strict";
const path = require("path");
const { performance } = require("perf_hooks");
const lockgate = require(path.join(__dirname, "..", "..", "bindings-node"));

function args() {
  const a = { mode: process.argv[2] };
  for (let i = 3; i < process.argv.length; i += 2) a[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
  return a;
}

function wallNs() {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
}

async function pairs(a) {
  const client = await lockgate.connect(a.url);
  const lock = client.lock(a.name);
  const n = Number(a.pairs);
  let t = 0;
  for (let i = 0; i < 50 + n; i++) {
    if (i === 50) t = performance.now();
    const lease = await lock.acquire({ timeoutMs: 5000 });
    if (!(await lease.release())) throw new Error("an uncontended lease was lost");
  }
  console.log((n / ((performance.now() - t) / 1000)).toFixed(1));
  await client.close();
}

async function worker(a) {
  const client = await lockgate.connect(a.url);
  const lock = client.lock(a.name);
  const hold = Number(a["hold-us"]) / 1000;
  const start = BigInt(a["start-ns"]);
  const end = start + BigInt(a["duration-ms"]) * 1000000n;
  const now = wallNs();
  if (start > now) await new Promise((r) => setTimeout(r, Number((start - now) / 1000000n)));
  while (wallNs() < start) {}
  const lines = [];
  while (wallNs() < end) {
    const waitStart = wallNs();
    const lease = await lock.acquire({ timeoutMs: 120000 });
    const acquired = wallNs();
    const spin = performance.now();
    while (performance.now() - spin < hold) {}
    const releaseStart = wallNs();
    await lease.release();
    lines.push(`0 ${lease.fencingToken} ${waitStart} ${acquired} ${releaseStart}`);
  }
  await client.close();
  process.stdout.write(lines.length ? lines.join("\n") + "\n" : "");
}

const a = args();
(a.mode === "pairs" ? pairs(a) : a.mode === "worker" ? worker(a) : Promise.reject(new Error("usage: pairs | worker")))
  .catch((e) => {
    console.error(`lockgate_node.js: ${e.message}`);
    process.exit(1);
  });
