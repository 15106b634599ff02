'use strict';
// Real redis-servers for the tests, started by the project's one test-server launcher
// (`target/release/test-servers`, conformance/README.md): free loopback ports, no persistence,
// a temp dir, stopped by pid when its stdin closes. This file only speaks its JSON lines and adds
// an ioredis `admin` client per server for the tests to inspect keys.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const readline = require('node:readline');
const { once } = require('node:events');
const Redis = require('ioredis');

const ROOT = path.join(__dirname, '..', '..', '..');
const LAUNCHER = path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release', 'test-servers');

/** A port nothing listens on (for connections that must fail). */
async function freePort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/**
 * Starts `test-servers <kind> ...args`; resolves with its description (`url`, `nodes`, ...) plus
 * `command(line)` (one stdin command, resolving with its JSON reply) and `close()` (stops every
 * server it started).
 */
async function launch(kind, args = []) {
  if (!fs.existsSync(LAUNCHER)) {
    throw new Error(`${LAUNCHER} is missing: cargo build --release -p lockgate-conformance (ci.sh test does)`);
  }
  const proc = spawn(LAUNCHER, [kind, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const kill = () => proc.exitCode === null && proc.signalCode === null && proc.kill('SIGKILL');
  process.once('exit', kill);
  const lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`test-servers ${kind} ended without a reply`);
    return JSON.parse(value);
  };
  const info = await next();
  let queue = Promise.resolve();
  info.command = (line) => {
    queue = queue.then(async () => {
      proc.stdin.write(`${line}\n`);
      const reply = await next();
      if (!reply.ok) throw new Error(`test-servers: ${line}: ${reply.error}`);
      return reply;
    });
    return queue;
  };
  info.close = async () => {
    process.removeListener('exit', kill);
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.stdin.end();
      await once(proc, 'exit');
    }
  };
  return info;
}

/** An ioredis client of node `n` of a launcher description (for inspecting keys). */
async function adminOf(n, password, ca) {
  const admin = new Redis(n.port, '127.0.0.1', { password, lazyConnect: true, tls: ca ? { ca } : undefined });
  await admin.connect();
  return admin;
}

/** `{ port, url, admin, pid }` of node `i` of a launcher description. */
async function nodeOf(info, i, password, ca) {
  const n = info.nodes[i];
  return { port: n.port, url: n.url, pid: n.pid, admin: await adminOf(n, password, ca) };
}

/**
 * Starts one redis-server; returns `{ port, url, admin, pid, down(), up(), stop() }` where `admin`
 * is a plain ioredis client for inspecting keys, `down()` stops the server and `up()` starts it
 * again on the same port (empty). Extra args (e.g. `['--requirepass', 'x']`) go to redis-server.
 * `options.tls` makes the port TLS-only: the url is then `rediss://`, and the result also has
 * `ca` (the CA's PEM, for `tls: { ca }`).
 */
async function startRedis(extraArgs = [], options = {}) {
  const info = await launch('single', [...(options.tls ? ['--tls'] : []), '--', ...extraArgs]);
  const i = extraArgs.indexOf('--requirepass');
  const password = i >= 0 ? extraArgs[i + 1] : undefined;
  const ca = info.ca_file ? fs.readFileSync(info.ca_file) : undefined;
  const server = { ...(await nodeOf(info, 0, password, ca)), ca };
  server.down = async () => {
    server.admin.disconnect();
    await info.command('stop 0');
  };
  server.up = async () => {
    server.pid = (await info.command('start 0')).pid;
    server.admin = await adminOf(info.nodes[0], password, ca);
  };
  server.stop = async () => {
    server.admin.disconnect();
    await info.close();
  };
  return server;
}

/**
 * Starts a 3-master Redis Cluster (no replicas). Returns `{ nodes, url, slotOwner(key),
 * keys(pattern), stop() }`; `url` is node 0's `redis://` URL (connect with `cluster: true`).
 */
async function startCluster() {
  const info = await launch('cluster');
  const nodes = [];
  for (let i = 0; i < info.nodes.length; i++) nodes.push(await nodeOf(info, i));
  return {
    nodes,
    url: nodes[0].url,
    /** The node (one of `nodes`) whose slots hold `key`. */
    async slotOwner(key) {
      const slot = await nodes[0].admin.call('CLUSTER', 'KEYSLOT', key);
      return nodes[info.nodes.findIndex((n) => n.slots[0] <= slot && slot <= n.slots[1])];
    },
    /** Every key on every node matching `pattern`. */
    async keys(pattern) {
      const all = [];
      for (const n of nodes) all.push(...(await n.admin.keys(pattern)));
      return all.sort();
    },
    async stop() {
      for (const n of nodes) n.admin.disconnect();
      await info.close();
    },
  };
}

/** Starts a primary and one online replica. Returns `{ primary, replica, stop() }` (each `{ port, url, admin, pid }`). */
async function startPrimaryReplica() {
  const info = await launch('replica');
  const roles = info.nodes.map((n) => n.role);
  const primary = await nodeOf(info, roles.indexOf('primary'));
  const replica = await nodeOf(info, roles.indexOf('replica'));
  return {
    primary,
    replica,
    async stop() {
      primary.admin.disconnect();
      replica.admin.disconnect();
      await info.close();
    },
  };
}

/** Polls `check()` until it returns true (or throws after `ms`). */
async function eventually(check, ms = 3000, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * One redis-server for a test file, started before its tests and stopped after them, and the
 * function its tests connect clients with (each closed after the tests): `newClient(label?)`.
 */
function redisForFile() {
  const { before, after } = require('node:test');
  const lockgate = require('../..');
  let server;
  const clients = [];
  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    for (const c of clients) await c.close();
    await server.stop();
  });
  return async function newClient(label) {
    const c = await lockgate.connect(server.url, label === undefined ? {} : { label });
    clients.push(c);
    return c;
  };
}

module.exports = { launch, startRedis, startCluster, startPrimaryReplica, eventually, sleep, freePort, redisForFile };
