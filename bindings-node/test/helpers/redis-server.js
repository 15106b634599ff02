'use strict';
// Starts a throwaway redis-server for a test file: loopback, a free port, no persistence, its
// own temp dir, stopped by pid (never by name).

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

/** Resolves when `port` on 127.0.0.1 can be bound (nothing listens there), else rejects. */
function probe(port) {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(port, '127.0.0.1', () => {
      const bound = srv.address().port;
      srv.close(() => resolve(bound));
    });
  });
}

/** The first port of the kernel's ephemeral range (0 where it cannot be read). */
function firstEphemeralPort() {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 0;
  } catch {
    return 0;
  }
}

/**
 * A loopback port nothing listens on now, chosen below the kernel's ephemeral range. Why not
 * port 0: that hands out ephemeral ports, which client sockets also take as their local ports,
 * so one can take the port before redis-server binds it. Below the range only explicit binds
 * take ports; startRedis retries the remaining race (another probe) on a new port.
 */
async function freePort() {
  const top = firstEphemeralPort();
  for (let i = 0; i < 200 && top > 10000; i++) {
    const port = 10000 + Math.floor(Math.random() * (top - 10000));
    try {
      return await probe(port);
    } catch {
      // taken: try another
    }
  }
  return probe(0);
}

function redisServerBinary() {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return 'redis-server';
  } catch {
    throw new Error(
      'redis-server is not installed: the Node tests need a real Redis (apt-get install redis-server)',
    );
  }
}

async function waitReady(port, proc, logFile) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null) {
      throw new Error(`redis-server exited early:\n${fs.readFileSync(logFile, 'utf8')}`);
    }
    const ok = await new Promise((resolve) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.end();
        resolve(true);
      });
      sock.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A throwaway CA and a certificate for 127.0.0.1 it signed, made with the openssl CLI in `dir`;
 * returns the paths and the CA's PEM.
 */
function makeTlsFiles(dir) {
  const run = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=lockgate test CA', '-keyout', 'ca.key', '-out', 'ca.crt');
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.crt');
  return {
    args: [
      '--tls-cert-file', path.join(dir, 'server.crt'),
      '--tls-key-file', path.join(dir, 'server.key'),
      '--tls-ca-cert-file', path.join(dir, 'ca.crt'),
      '--tls-auth-clients', 'no',
    ],
    ca: fs.readFileSync(path.join(dir, 'ca.crt')),
  };
}

/**
 * Starts redis-server; returns `{ port, url, admin, stop() }` where `admin` is a plain ioredis
 * client for inspecting keys. Extra args (e.g. `['--requirepass', 'x']`) are passed through.
 * `options.port` asks for that port (e.g. to bring back a server a client already knows).
 * `options.tls` makes the port TLS-only (a fresh CA and certificate, made with openssl): the
 * url is then `rediss://`, and the result also has `ca` (the CA's PEM, for `tls: { ca }`).
 */
async function startRedis(extraArgs = [], options = {}) {
  const bin = redisServerBinary();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockgate-node-redis-'));
  const logFile = path.join(dir, 'redis.log');
  const tls = options.tls ? makeTlsFiles(dir) : null;
  for (let attempt = 0; ; attempt++) {
    const port = options.port ?? (await freePort());
    const ports = tls ? ['--port', '0', '--tls-port', String(port), ...tls.args] : ['--port', String(port)];
    const proc = spawn(
      bin,
      [
        ...ports,
        '--bind', '127.0.0.1',
        '--save', '',
        '--appendonly', 'no',
        '--dir', dir,
        '--logfile', logFile,
        ...extraArgs,
      ],
      { stdio: 'ignore' },
    );
    const kill = () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    };
    process.once('exit', kill);
    try {
      await waitReady(port, proc, logFile);
    } catch (err) {
      kill();
      if (attempt < 3 && options.port === undefined) continue; // the port was taken between probe and bind
      throw err;
    }
    const password = passwordOf(extraArgs);
    const url = `${tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`;
    const admin = new Redis(port, '127.0.0.1', { password, lazyConnect: true, tls: tls ? { ca: tls.ca } : undefined });
    await admin.connect();
    return {
      port,
      url,
      admin,
      ca: tls ? tls.ca : undefined,
      pid: proc.pid,
      async stop() {
        admin.disconnect();
        process.removeListener('exit', kill);
        if (proc.exitCode === null && proc.signalCode === null) {
          const exited = new Promise((r) => proc.once('exit', r));
          proc.kill('SIGTERM');
          const t = setTimeout(() => proc.kill('SIGKILL'), 3000);
          await exited;
          clearTimeout(t);
        }
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}

/**
 * Starts a 3-master Redis Cluster (no replicas): three startRedis() nodes with cluster mode on
 * (each with its own free bus port and config file in its temp dir), slots 0..16383 split in
 * three with CLUSTER ADDSLOTSRANGE, joined with CLUSTER MEET, ready once every node reports
 * `cluster_state:ok` and knows all three. Returns `{ nodes, url, slotOwner(key), stop() }`.
 */
async function startCluster() {
  const nodes = [];
  const busPorts = [];
  try {
    for (let i = 0; i < 3; i++) {
      const bus = await freePort();
      busPorts.push(bus);
      nodes.push(
        await startRedis([
          '--cluster-enabled', 'yes',
          '--cluster-config-file', 'nodes.conf',
          '--cluster-port', String(bus),
          '--cluster-node-timeout', '2000',
        ]),
      );
    }
    const ranges = [[0, 5460], [5461, 10922], [10923, 16383]];
    for (let i = 0; i < 3; i++) {
      await nodes[i].admin.call('CLUSTER', 'ADDSLOTSRANGE', ranges[i][0], ranges[i][1]);
    }
    for (let i = 1; i < 3; i++) {
      await nodes[0].admin.call('CLUSTER', 'MEET', '127.0.0.1', nodes[i].port, busPorts[i]);
    }
    await eventually(
      async () => {
        for (const n of nodes) {
          const info = await n.admin.call('CLUSTER', 'INFO');
          if (!info.includes('cluster_state:ok') || !info.includes('cluster_known_nodes:3')) return false;
        }
        return true;
      },
      20_000,
      'cluster_state:ok on every node',
    );
  } catch (err) {
    for (const n of nodes) await n.stop();
    throw err;
  }
  return {
    nodes,
    url: nodes[0].url,
    /** The node (one of `nodes`) whose slots hold `key`. */
    async slotOwner(key) {
      const slot = await nodes[0].admin.call('CLUSTER', 'KEYSLOT', key);
      return nodes[slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2];
    },
    /** Every key on every node matching `pattern`. */
    async keys(pattern) {
      const all = [];
      for (const n of nodes) all.push(...(await n.admin.keys(pattern)));
      return all.sort();
    },
    async stop() {
      for (const n of nodes) await n.stop();
    },
  };
}

/**
 * Starts a primary and one replica (`--replicaof`), ready once the primary reports the replica
 * online. Returns `{ primary, replica, stop() }` (each as from startRedis()).
 */
async function startPrimaryReplica() {
  // No 5 s diskless-sync delay before the first full sync.
  const primary = await startRedis(['--repl-diskless-sync-delay', '0']);
  let replica;
  try {
    replica = await startRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
    await eventually(
      async () => /slave0:.*state=online/.test(await primary.admin.info('replication')),
      20_000,
      'the replica to come online',
    );
  } catch (err) {
    if (replica) await replica.stop();
    await primary.stop();
    throw err;
  }
  return {
    primary,
    replica,
    async stop() {
      await replica.stop();
      await primary.stop();
    },
  };
}

function passwordOf(args) {
  const i = args.indexOf('--requirepass');
  return i >= 0 ? args[i + 1] : undefined;
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

module.exports = { startRedis, startCluster, startPrimaryReplica, eventually, sleep, freePort };
