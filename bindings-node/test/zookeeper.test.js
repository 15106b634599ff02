'use strict';
// ZooKeeper through the public API (`zookeeper://` URLs) and through its transport
// (lib/transport/zookeeper.js on node-zookeeper-client), against one real ZooKeeper started by
// the project's launcher (`test-servers zookeeper`). What every binding must do alike is the
// conformance suite's (its zookeeper variants); this file keeps what is Node's: the transport's
// own work (a created node's stat, container parents, version checks, watches), the Promise API
// end to end, and typed errors.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const lockgate = require('..');
const transport = require('../lib/transport/zookeeper');
const { launch, freePort, eventually, sleep } = require('./helpers/redis-server');

/** Short sessions keep the tests short (the launcher's servers accept 1 s and up). */
const SESSION_MS = 4000;

let zk;
const clients = [];

before(async () => {
  zk = await launch('zookeeper');
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (zk) await zk.close();
});

async function connect(options = {}, url = zk.url) {
  const c = await lockgate.connect(url, { sessionTimeoutMs: SESSION_MS, ...options });
  clients.push(c);
  return c;
}

/**
 * The ZooKeeper transport on its own, with a driver that only records: `{ t, plan, perform(req)
 * → Promise<reply>, notices }`.
 */
async function rawTransport() {
  const [host, port] = new URL(zk.url).host.split(':');
  const answers = new Map();
  const notices = [];
  const driver = { answer: (id, reply) => answers.get(id)(reply), notice: (n) => notices.push(n) };
  const plan = { connectString: `${host}:${port}`, sessionTimeoutMs: SESSION_MS, connectTimeoutMs: 3000, commandTimeoutMs: 5000, digest: null, tls: false, redacted: zk.url };
  const t = await transport.open(driver, plan);
  let next = 1;
  const perform = (req) =>
    new Promise((resolve) => {
      const id = next++;
      answers.set(id, resolve);
      t.perform({ id, ...req });
    });
  return { t, plan, perform, notices };
}

test('a mutex: exclusion, a waiter woken by the release, increasing fencing tokens', async () => {
  const [a, b] = [await connect(), await connect()];
  assert.equal(a.capabilities.backend, 'ZooKeeper');
  assert.equal(a.capabilities.fencing, true);
  const first = await a.lock('zk-orders').acquire({ timeoutMs: 5000 });
  assert.equal(typeof first.fencingToken, 'bigint');
  assert.ok(first.fencingToken > 0n);
  assert.equal(first.isHeld, true);
  assert.equal(await b.lock('zk-orders').tryAcquire(), null);
  const waiting = b.lock('zk-orders').acquire({ timeoutMs: 5000 });
  assert.equal(await first.release(), true);
  const second = await waiting;
  assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
  assert.equal(second.signal.aborted, false);
  assert.equal(await second.release(), true);
  assert.equal(await second.release(), false);
});

test('an election: the leader is observed with its value and term; the next term is larger', async () => {
  const [a, b] = [await connect(), await connect()];
  assert.equal(await b.election('zk-scheduler').observe(), null);
  const leading = await a.election('zk-scheduler').campaign('10.0.0.7:8080', { timeoutMs: 5000 });
  const seen = await b.election('zk-scheduler').observe();
  assert.equal(seen.value, '10.0.0.7:8080');
  assert.equal(seen.term, leading.term);
  const next = b.election('zk-scheduler').campaign('10.0.0.8:8080', { timeoutMs: 5000 });
  await leading.release();
  const successor = await next;
  assert.ok(successor.term > leading.term);
  assert.equal((await a.election('zk-scheduler').observe()).value, '10.0.0.8:8080');
  await successor.release();
});

test('a chroot (made if it is missing) and a digest login', async () => {
  const { host } = new URL(zk.url);
  const c = await connect({}, `zookeeper://app:s3cret@${host}/zk-chroot/app`);
  const lease = await c.lock('chrooted').acquire({ timeoutMs: 5000 });
  const { t, perform } = await rawTransport();
  try {
    const seen = await perform({ op: 'children', path: '/zk-chroot/app/lockgate/mutex/chrooted', watch: false });
    assert.equal(seen.children.length, 1, 'the holder node, under the chroot');
    assert.equal((await perform({ op: 'exists', path: '/lockgate/mutex/chrooted', watch: false })).stat, null);
  } finally {
    await t.close();
  }
  assert.equal(await lease.release(), true);
});

test('a lease is at risk while its connection answers nothing, and safe again once the client reconnects within the session', async () => {
  // As core/tests/zookeeper_faults.rs: a 12 s session and an 800 ms response timeout, so a
  // deafened connection is given up on and replaced well within the session.
  const own = await launch('zookeeper', ['--proxied']);
  const c = await lockgate.connect(own.url, { sessionTimeoutMs: 12_000, commandTimeoutMs: 800 });
  try {
    const lease = await c.lock('zk-at-risk').acquire({ timeoutMs: 5000 });
    assert.equal(lease.atRisk, false);
    const spells = [];
    const told = new Promise((resolve) => lease.onAtRisk(() => resolve(spells.push(lease.atRisk))));
    assert.throws(() => lease.onAtRisk('soon'), lockgate.InvalidArgumentError);
    await own.command('deafen');
    const late = sleep(5000).then(() => 'not told');
    assert.equal(await Promise.race([told, late]), 1, 'onAtRisk called within 5 s');
    assert.deepEqual(spells, [true], 'called while at risk');
    await eventually(() => !lease.atRisk, 5000, 'safe again after reconnecting');
    await own.command('restore');
    assert.equal(lease.isHeld, true);
    assert.equal(lease.signal.aborted, false);
    assert.equal(spells.length, 1, 'once per spell');
    assert.equal(await lease.release(), true);
    assert.equal(lease.atRisk, false);
  } finally {
    await c.close();
    await own.close();
  }
});

test('an idle client never holds the process open, even with its ensemble down', async () => {
  const own = await launch('zookeeper');
  const script = `
    const lockgate = require(${JSON.stringify(path.join(__dirname, '..'))});
    lockgate.connect(${JSON.stringify(own.url)}, { sessionTimeoutMs: ${SESSION_MS} }).then(async (c) => {
      await (await c.lock('idle').acquire()).release();
      console.log('idle');
    });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await new Promise((resolve) => child.stdout.once('data', resolve));
    await own.command('stop 0');
    const late = new Promise((resolve) => setTimeout(resolve, 3000, 'still running'));
    assert.equal(await Promise.race([exited, late]), 0, 'the process ends by itself while the library retries');
  } finally {
    child.kill('SIGKILL');
    await own.close();
  }
});

test('bad URLs and options are typed errors before any connection; an unreachable ensemble is CONNECTION', async () => {
  const invalid = [
    ['zookeeper://user@127.0.0.1:2181', {}],
    ['zookeeper://127.0.0.1:2181/app/', {}],
    ['zookeeper://127.0.0.1:99999', {}],
    [zk.url, { sessionTimeoutMs: 'soon' }],
    [zk.url, { sessionTimeoutMs: 1 }],
    [zk.url, { maxLeaseMs: 1000 }],
    [zk.url, { redisOptions: {} }],
    [zk.url, { sessionTimeout: 4000 }],
  ];
  for (const [url, options] of invalid) {
    await assert.rejects(lockgate.connect(url, options), (e) => {
      assert.ok(e instanceof lockgate.InvalidArgumentError, `${url} ${JSON.stringify(options)}: ${e}`);
      assert.equal(e.code, 'INVALID_ARGUMENT');
      assert.equal(e.retryable, false);
      return true;
    });
  }
  await assert.rejects(lockgate.connect(zk.url.replace('zookeeper:', 'zookeeper+tls:')), { code: 'UNSUPPORTED' });
  const dead = `zookeeper://app:hunter2@127.0.0.1:${await freePort()}`;
  await assert.rejects(lockgate.connect(dead, { connectTimeoutMs: 300 }), (e) => {
    assert.equal(e.code, 'CONNECTION');
    assert.equal(e.retryable, true);
    assert.ok(!e.message.includes('hunter2'), e.message);
    return true;
  });
});

test('the transport: real stats for creates, container parents, version checks, watches', async () => {
  const { t, perform, notices } = await rawTransport();
  try {
    const session = await perform({ op: 'openSession' });
    assert.equal(session.reply, 'session');
    assert.equal(session.timeoutMs, SESSION_MS);
    const created = await perform({ op: 'create', path: '/zk-test/a/b/n-', data: new Uint8Array([7]), mode: 'ephemeralSequential' });
    assert.equal(created.reply, 'created');
    assert.match(created.path, /^\/zk-test\/a\/b\/n-\d{10}$/);
    assert.equal(created.stat.ephemeralOwner, session.sessionId);
    // The stat made from the reply's zxid is the node's own.
    const seen = await perform({ op: 'exists', path: created.path, watch: true });
    assert.deepEqual(seen.stat, created.stat);
    const data = await perform({ op: 'getData', path: created.path, watch: false });
    assert.deepEqual([...data.data], [7]);
    // The parents were made (as containers: the same create as the one below, whose result
    // only a createContainer op has).
    const parent = await perform({ op: 'exists', path: '/zk-test/a/b', watch: false });
    assert.equal(parent.stat.numChildren, 1);
    const container = await perform({ op: 'create', path: '/zk-test/c', mode: 'container' });
    assert.equal(container.reply, 'created');
    assert.ok(container.stat.czxid > created.stat.czxid);
    assert.deepEqual((await perform({ op: 'children', path: '/zk-test/a/b', watch: false })).children, [created.path.slice(13)]);
    // Version 0 is checked as 0, not as "any".
    assert.deepEqual(await perform({ op: 'check', path: created.path, version: 0 }), { reply: 'checked' });
    assert.equal((await perform({ op: 'check', path: created.path, version: 1 })).failure, 'badVersion');
    assert.equal((await perform({ op: 'delete', path: created.path, version: 1 })).failure, 'badVersion');
    assert.equal((await perform({ op: 'create', path: '/zk-test/a/b', mode: 'persistent' })).failure, 'nodeExists');
    assert.deepEqual(await perform({ op: 'delete', path: created.path, version: 0 }), { reply: 'deleted' });
    await eventually(() => notices.some((n) => n.notice === 'watch' && n.event === 'deleted' && n.path === created.path));
    assert.equal((await perform({ op: 'delete', path: created.path, version: null })).failure, 'noNode');
    assert.equal((await perform({ op: 'getData', path: created.path, watch: false })).failure, 'noNode');
  } finally {
    await t.close();
  }
});

test('the transport: an expired session is told, and the next open starts a new one', async () => {
  const zookeeper = require('node-zookeeper-client');
  const { t, plan, perform, notices } = await rawTransport();
  try {
    const first = await perform({ op: 'openSession' });
    const node = await perform({ op: 'create', path: '/zk-expiry-', mode: 'ephemeralSequential' });
    // End the session behind the transport's back: its connection drops and, while the
    // library's reconnect is held back, another connection resumes the session and closes it;
    // reconnecting then finds the session gone.
    const c = t.own.client;
    const cm = c.connectionManager;
    const reconnect = cm.connect;
    let held = false;
    cm.connect = () => (held = true);
    c.socket.destroy();
    await eventually(() => held, 5000, 'the dropped connection');
    const killer = zookeeper.createClient(plan.connectString, { sessionId: c.getSessionId(), sessionPassword: c.getSessionPassword(), sessionTimeout: SESSION_MS });
    await new Promise((resolve) => {
      killer.once('connected', () => {
        killer.connectionManager.socket.once('close', resolve);
        killer.close();
      });
      killer.connect();
    });
    cm.connect = reconnect;
    cm.connect();
    await eventually(() => notices.some((n) => n.notice === 'session' && n.event === 'expired'), 5000, 'the expired notice');
    const told = notices.filter((n) => n.notice === 'session').map((n) => n.event);
    assert.deepEqual(told, ['disconnected', 'expired']);
    assert.equal((await perform({ op: 'exists', path: node.path, watch: false })).failure, 'sessionExpired');
    const second = await perform({ op: 'openSession' });
    assert.equal(second.reply, 'session');
    assert.notEqual(second.sessionId, first.sessionId);
    assert.equal((await perform({ op: 'exists', path: node.path, watch: false })).stat, null);
  } finally {
    await t.close();
  }
});

test('the transport: an extra session (sessionMs) is a session of its own, asked for that timeout; its nodes go when it closes', async () => {
  const { t, perform } = await rawTransport();
  try {
    const own = await perform({ op: 'openSession' });
    const extra = await perform({ op: 'openSession', sessionMs: 1000 });
    assert.equal(extra.reply, 'session');
    assert.notEqual(extra.sessionId, own.sessionId);
    // The ensemble grants at least its minimum (the launcher's: 800 ms), at most what was asked.
    assert.ok(extra.timeoutMs <= 1000, `negotiated ${extra.timeoutMs} ms`);
    // Asked again while it lives: the same session.
    assert.equal((await perform({ op: 'openSession', sessionMs: 1000 })).sessionId, extra.sessionId);
    const node = await perform({ op: 'create', path: '/zk-extra-', mode: 'ephemeralSequential', sessionMs: 1000 });
    assert.equal(node.stat.ephemeralOwner, extra.sessionId);
    assert.equal((await perform({ op: 'closeSession', sessionMs: 1000 })).reply, 'closed');
    // Closed: its node is gone at once (read through the client's own session), and a request
    // of the closed session is told it expired.
    const gone = await perform({ op: 'exists', path: node.path, watch: false });
    assert.equal(gone.stat, null);
    assert.equal((await perform({ op: 'exists', path: node.path, watch: false, sessionMs: 1000 })).failure, 'sessionExpired');
  } finally {
    await t.close();
  }
});
