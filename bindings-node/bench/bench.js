'use strict';
// Benchmark: lockgate vs redlock vs redis-semaphore's Mutex on one redis-server this starts.
//   node bench/bench.js [--out FILE] [--seconds S] [--processes N] [--rounds R] [--only lib1,lib2]
// 1. Uncontended: one process, sequential acquire+release of one lock; ops/s (median of rounds,
//    libraries interleaved so machine noise hits all of them alike).
// 2. Contended handoff: N processes loop acquire, hold ~1 ms, release, then stay out until
//    another process has held the lock (so every acquisition goes to a process that was already
//    waiting). Handoff = from the holder being done (just before its release call) to the next
//    process holding the lock. p50/p99 over all handoffs.

const { fork, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis } = require('../test/helpers/redis-server');
const { libs } = require('./libs');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
}

const OUT = arg('out', path.join(__dirname, '..', '..', 'target', 'bench', 'node.md'));
const SECONDS = Number(arg('seconds', '2'));
const PROCESSES = Number(arg('processes', '4'));
const ROUNDS = Number(arg('rounds', '3'));
const HOLD_MS = 1;
const HANDOFF_SECONDS = Math.max(3, SECONDS * 3);
const NAMES = Object.keys(libs).filter((n) => !arg('only', '') || arg('only').split(',').includes(n));

const log = (...a) => console.error('[bench]', ...a);

/**
 * The server's own account of its work: the CPU seconds its process used (`INFO cpu`, user +
 * system, network I/O included) and the commands it ran (`INFO commandstats`, calls made from
 * scripts included; the INFO calls that read them left out).
 */
async function serverStats(admin) {
  const info = await admin.call('INFO', 'cpu', 'commandstats');
  const cpu = ['used_cpu_user', 'used_cpu_sys'].reduce(
    (sum, field) => sum + Number(info.match(new RegExp(`^${field}:([\\d.]+)`, 'm'))[1]),
    0,
  );
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls += Number(m[2]);
  }
  return { cpu, calls };
}

/**
 * One round of sequential acquire+release: the rate, and per acquire+release the server's CPU
 * microseconds and commands (its share of the round trip, which no client-side work can win back).
 */
async function uncontended(name, url, seconds, admin) {
  const lib = await libs[name].open(url);
  const lock = lib.lock(`bench:uncontended:${name}`);
  for (let i = 0; i < 200; i++) {
    await lock.acquire();
    await lock.release();
  }
  const before = await serverStats(admin);
  let n = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (performance.now() < end) {
    await lock.acquire();
    await lock.release();
    n++;
  }
  const rate = n / ((performance.now() - t0) / 1000);
  const after = await serverStats(admin);
  await lib.close();
  return { rate, serverUs: ((after.cpu - before.cpu) * 1e6) / n, commands: (after.calls - before.calls) / n };
}

/** Forks the N workers of one library, relays every acquisition to all, returns their rounds. */
function contend(name, url) {
  return new Promise((resolve, reject) => {
    const children = [];
    const results = new Array(PROCESSES);
    let ready = 0;
    let done = 0;
    let seq = 0;
    for (let i = 0; i < PROCESSES; i++) {
      const child = fork(
        path.join(__dirname, 'handoff-worker.js'),
        [name, url, String(HANDOFF_SECONDS * 1000), String(HOLD_MS), String(i)],
        { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
      );
      children.push(child);
      child.on('error', reject);
      child.on('exit', (code) => {
        if (code !== 0) reject(new Error(`${name} worker ${i} exited with ${code}`));
      });
      child.on('message', (m) => {
        if (m.ready && ++ready === PROCESSES) for (const c of children) c.send({ start: true }, () => {});
        if (m.acquired) {
          const msg = { seq: seq++, by: i };
          // A worker that already reported may be gone: ignore failed sends to it.
          for (const c of children) if (c.connected && !c.reported) c.send(msg, () => {});
        }
        if (m.rounds) {
          child.reported = true;
          results[i] = m.rounds;
          if (++done === PROCESSES) resolve(results);
        }
      });
    }
  });
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

async function handoff(name, url) {
  const perProc = await contend(name, url);
  const rounds = [];
  perProc.forEach((rs, proc) => {
    for (const [w, a, r] of rs) rounds.push({ proc, wanted: BigInt(w), acquired: BigInt(a), released: BigInt(r) });
  });
  rounds.sort((x, y) => (x.acquired < y.acquired ? -1 : x.acquired > y.acquired ? 1 : 0));
  const samples = [];
  let selfHandoffs = 0;
  for (let i = 1; i < rounds.length; i++) {
    const prev = rounds[i - 1];
    const cur = rounds[i];
    if (cur.proc === prev.proc) {
      selfHandoffs++;
      continue;
    }
    if (cur.wanted < prev.released) samples.push(Number(cur.acquired - prev.released) / 1e6);
  }
  samples.sort((a, b) => a - b);
  const first = rounds[0].acquired;
  const last = rounds[rounds.length - 1].acquired;
  return {
    acquisitions: rounds.length,
    perSecond: rounds.length / (Number(last - first) / 1e9),
    handoffs: samples.length,
    selfHandoffs,
    p50: quantile(samples, 0.5),
    p99: quantile(samples, 0.99),
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');
const fmtInt = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a');

(async () => {
  const redis = await startRedis();
  const redisVersion = execFileSync('redis-server', ['--version']).toString().match(/v=(\S+)/)[1];
  try {
    const rates = Object.fromEntries(NAMES.map((n) => [n, []]));
    const serverUs = Object.fromEntries(NAMES.map((n) => [n, []]));
    const commands = Object.fromEntries(NAMES.map((n) => [n, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const name of NAMES) {
        const round = await uncontended(name, redis.url, SECONDS, redis.admin);
        rates[name].push(round.rate);
        serverUs[name].push(round.serverUs);
        commands[name].push(round.commands);
        log(
          `uncontended round ${r + 1} ${name}: ${fmtInt(round.rate)} acquire+release/s, ` +
            `server ${fmt(round.serverUs, 1)} us and ${fmt(round.commands, 1)} commands per pair`,
        );
      }
    }
    const contended = {};
    for (const name of NAMES) {
      contended[name] = await handoff(name, redis.url);
      const c = contended[name];
      log(`handoff ${name}: p50 ${fmt(c.p50)} ms, p99 ${fmt(c.p99)} ms over ${c.handoffs} handoffs (${c.acquisitions} acquisitions)`);
    }
    const rows = NAMES.map((name) => {
      const c = contended[name];
      return `| ${libs[name].label} | ${fmtInt(median(rates[name]))} | ${fmt(median(serverUs[name]), 1)} | ${fmt(median(commands[name]), 1)} | ${fmt(c.p50)} | ${fmt(c.p99)} | ${fmtInt(c.perSecond)} | ${c.handoffs} |`;
    });
    const lg = { rate: median(rates.lockgate), serverUs: median(serverUs.lockgate), ...contended.lockgate };
    // lockgate-ioredis is lockgate itself on its other transport: not an "other library".
    const others = NAMES.filter((n) => !n.startsWith('lockgate'));
    const bestRate = Math.max(...others.map((n) => median(rates[n])));
    const bestName = others.find((n) => median(rates[n]) === bestRate);
    const bestP50 = Math.min(...others.map((n) => contended[n].p50));
    const bestP99 = Math.min(...others.map((n) => contended[n].p99));
    const verdict = [
      `uncontended ${fmt(lg.rate / bestRate)}x the best other library`,
      `handoff p50 ${fmt(bestP50 / lg.p50, 1)}x faster`,
      `handoff p99 ${fmt(bestP99 / lg.p99, 1)}x faster`,
    ];
    const md = [
      '## Node binding (`lockgate` npm package: the core as WebAssembly; its own RESP connection for commands, ioredis for subscriptions)',
      '',
      `Command: \`bindings-node/ci.sh bench\` (run by \`./run bench\`), i.e. \`node bench/bench.js --out $LOCKGATE_BENCH_OUT/node.md --seconds ${SECONDS} --processes ${PROCESSES}\` in \`bindings-node/\`.`,
      `One redis-server ${redisVersion} on loopback started by the benchmark; Node ${process.version}; ${os.cpus().length} cores (shared); ${new Date().toISOString().slice(0, 10)}.`,
      '',
      '| library | uncontended acquire+release/s | server µs per acquire+release | server commands per acquire+release | handoff p50 (ms) | handoff p99 (ms) | contended acquisitions/s | handoffs measured |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      ...rows,
      '',
      `lockgate vs the best other library on each row: ${verdict.join('; ')}.`,
      ...(rates['lockgate-telemetry']
        ? [
            '',
            `Telemetry fully on vs off (issue 27; a subscriber on every \`lockgate.*\` diagnostics_channel formatting each message, same rounds): uncontended ${fmtInt(
              median(rates['lockgate-telemetry']),
            )} vs ${fmtInt(lg.rate)} acquire+release/s, ${fmt((lg.rate / median(rates['lockgate-telemetry']) - 1) * 100, 1)} % per pair (target: at most 3 %).`,
            ...(rates['lockgate-telemetry-floor']
              ? [
                  '',
                  `Its floor, the same messages formatted by the application with telemetry off (same rounds): ${fmtInt(
                    median(rates['lockgate-telemetry-floor']),
                  )} acquire+release/s, ${fmt((lg.rate / median(rates['lockgate-telemetry-floor']) - 1) * 100, 1)} % per pair; ` +
                    `lockgate's own share, its cost less the floor's: ${fmt(
                      (lg.rate / median(rates['lockgate-telemetry']) - lg.rate / median(rates['lockgate-telemetry-floor'])) * 100,
                      1,
                    )} % of a pair.`,
                ]
              : []),
          ]
        : []),
      ...(rates['lockgate-ioredis']
        ? [
            '',
            `Lean RESP socket vs ioredis for lockgate's commands (same rounds): uncontended ${fmt(
              lg.rate / median(rates['lockgate-ioredis']),
            )}x (the socket stays while this is at least 1.2x, issue 14).`,
          ]
        : []),
      ...(lg.rate < bestRate
        ? [
            '',
            `lockgate is slower on the uncontended row. The server alone spends ${fmt(lg.serverUs, 1)} µs per ` +
              `lockgate acquire+release against ${fmt(median(serverUs[bestName]), 1)} µs for ${libs[bestName].label} ` +
              '(its CPU time in `INFO cpu`, same rounds): its scripts also keep the fencing counter and check the waiter ' +
              'queue, and on a 2-core machine the server and the client share the CPU, so that difference is paid ' +
              'on every round trip whatever the client does.',
          ]
        : []),
      '',
      `- Uncontended: one process, sequential acquire then release of one lock, median of ${ROUNDS} rounds of ${SECONDS} s, libraries interleaved. Server µs per acquire+release: the redis-server process's CPU time (\`INFO cpu\`, user + system) over the same rounds, divided by the pairs; server commands: \`INFO commandstats\` calls, a script counted with the calls it makes.`,
      `- Contended: ${PROCESSES} processes loop acquire, hold ${HOLD_MS} ms, release, then stay out until another process has held the lock, for ${HANDOFF_SECONDS} s per library; so the releasing process never competes and every handoff goes to a process that was already waiting. A handoff is measured from the holder being done (just before its release call) to the next process holding the lock (CLOCK_MONOTONIC, comparable across processes).`,
      ...NAMES.map((n) => `- ${libs[n].label}: ${libs[n].settings}.`),
      '',
    ].join('\n');
    fs.mkdirSync(path.dirname(OUT), { recursive: true });
    fs.writeFileSync(OUT, md);
    process.stdout.write(md);
    log(`wrote ${OUT}`);
  } finally {
    await redis.stop();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
