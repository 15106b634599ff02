'use strict';
// etcd through the public API (`etcd://` URLs) and through its transport (lib/transport/etcd.js
// on etcd3), against one real etcd started by the project's launcher (`test-servers etcd`),
// inspected with Debian's etcdctl. What every binding must do alike is the conformance suite's
// (its etcd variants); this file keeps what is Node's: the transport's own work (keepalives
// answered one by one, watches created and canceled in order with their events pushed, failures
// as replies), the Promise API end to end on every primitive, and typed errors.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile, spawn } = require('node:child_process');
const path = require('node:path');
const { promisify } = require('node:util');
const lockgate = require('..');
const transport = require('../lib/transport/etcd');
const { launch, freePort, eventually, sleep } = require('./helpers/redis-server');

/**
 * Short session leases keep the tests short (the launcher's etcd grants 1 s and up), but not
 * shorter than a loaded 2-core machine stalls this process: with 2 s, a key right after its grant
 * was gone once (CI on cc01d4b, the test files running four at a time) before etcdctl read it, a
 * lost lease and no fault of the recipe. As the ZooKeeper file's sessions and the conformance
 * suite's etcd sessions (3 s), for the same reason.
 */
const SESSION_MS = 4000;

let etcd;
const clients = [];

before(async () => {
  etcd = await launch('etcd');
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (etcd) await etcd.close();
});

async function connect(options = {}, url = etcd.url) {
  const c = await lockgate.connect(url, { sessionTimeoutMs: SESSION_MS, ...options });
  clients.push(c);
  return c;
}

const ETCDCTL_ENV = { ...process.env, ETCDCTL_API: '3' };

/** Debian's etcdctl against the launcher's etcd; resolves with its stdout. */
async function etcdctl(...args) {
  const { stdout } = await promisify(execFile)('etcdctl', ['--endpoints', etcd.endpoints, ...args], { env: ETCDCTL_ENV });
  return stdout;
}

/** What `etcdctl elect -l NAME` prints until it matches `pattern` (at most 5 s; then it is stopped). */
async function listen(name, pattern) {
  const args = ['--endpoints', etcd.endpoints, 'elect', '-l', name];
  const child = spawn('etcdctl', args, { stdio: ['ignore', 'pipe', 'inherit'], env: ETCDCTL_ENV });
  let out = '';
  try {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 5000);
      child.stdout.on('data', (d) => {
        out += d;
        if (pattern.test(out)) resolve(clearTimeout(timer));
      });
    });
  } finally {
    child.kill('SIGTERM');
  }
  return out;
}

/** The keys under `prefix`, as etcdctl lists them. */
async function keys(prefix) {
  return (await etcdctl('get', '--prefix', '--keys-only', prefix)).split('\n').filter(Boolean);
}

/**
 * The etcd transport on its own (on `server`, the launcher's description of an etcd), with a
 * driver that only records: `{ t, perform(req) → Promise<reply>, notices }`.
 */
async function rawTransport(server = etcd, commandTimeoutMs = 3000) {
  const answers = new Map();
  const notices = [];
  const driver = { answer: (id, reply) => answers.get(id)(reply), notice: (n) => notices.push(n) };
  const hosts = server.endpoints.split(',');
  const plan = { hosts, auth: null, tls: false, tlsCaPem: null, connectTimeoutMs: 3000, commandTimeoutMs, redacted: server.url };
  const t = await transport.open(driver, plan);
  let next = 1;
  const perform = (req) =>
    new Promise((resolve) => {
      const id = next++;
      answers.set(id, resolve);
      t.perform({ id, ...req });
    });
  return { t, perform, notices };
}

const b = (s) => new Uint8Array(Buffer.from(s));

/** A range request's fields: one key, or a prefix with `more` (order, limit, countOnly). */
const range = (key, more = {}) => ({ key: b(key), prefix: false, order: 'key', limit: 0, maxCreateRevision: 0, countOnly: false, ...more });

test('a mutex: exclusion, the waiter served on release, increasing fencing tokens, no key left', async () => {
  const [a, c] = [await connect(), await connect()];
  assert.equal(a.capabilities.backend, 'etcd');
  assert.equal(a.capabilities.fencing, true);
  const first = await a.lock('orders').acquire({ timeoutMs: 5000 });
  assert.equal(typeof first.fencingToken, 'bigint');
  assert.equal(first.isHeld, true);
  // concurrency.Mutex's layout: <prefix>/<lease hex>, the session lease's.
  const [key] = await keys('/lockgate/mutex/orders/');
  assert.match(key, /^\/lockgate\/mutex\/orders\/[0-9a-f]+$/);
  assert.equal(await c.lock('orders').tryAcquire(), null);
  const waiting = c.lock('orders').acquire({ timeoutMs: 5000 });
  await sleep(200);
  assert.equal(await first.release(), true);
  const second = await waiting;
  assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
  // Held past several keepalive periods and past the lease's whole TTL.
  await sleep(SESSION_MS + 500);
  assert.equal(second.isHeld, true);
  assert.equal(second.signal.aborted, false);
  assert.equal(await second.release(), true);
  assert.equal(await second.release(), false);
  assert.deepEqual(await keys('/lockgate/mutex/orders/'), []);
});

test('two clients contending: one holder at a time, tokens increasing in holding order', async () => {
  const [a, c] = [await connect(), await connect()];
  let inside = 0;
  const tokens = [];
  const worker = async (client) => {
    for (let i = 0; i < 6; i++) {
      const lease = await client.lock('contended').acquire({ timeoutMs: 10_000 });
      inside += 1;
      assert.equal(inside, 1, 'one holder at a time');
      tokens.push(lease.fencingToken);
      await sleep(5);
      inside -= 1;
      assert.equal(await lease.release(), true);
    }
  };
  await Promise.all([worker(a), worker(c)]);
  assert.equal(tokens.length, 12);
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i}: ${tokens[i]} > ${tokens[i - 1]}`);
  assert.deepEqual(await keys('/lockgate/mutex/contended/'), []);
});

test('a semaphore: two permits, the third holder waits for a release', async () => {
  const [a, c, d] = [await connect(), await connect(), await connect()];
  const one = await a.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
  const two = await c.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
  assert.equal(await d.semaphore('pool', 2).tryAcquire(), null);
  const three = d.semaphore('pool', 2).acquire({ timeoutMs: 5000 });
  await sleep(200);
  assert.equal(await one.release(), true);
  const third = await three;
  assert.equal(third.isHeld, true);
  assert.equal(two.isHeld, true);
  assert.equal(await two.release(), true);
  assert.equal(await third.release(), true);
  assert.deepEqual(await keys('/lockgate/semaphore/pool/'), []);
});

test('a read-write lock: readers share, a writer waits for them, readers wait behind a writer', async () => {
  const [a, c, d] = [await connect(), await connect(), await connect()];
  const r1 = await a.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
  const r2 = await c.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
  assert.equal(await d.readWriteLock('config').writeLock.tryAcquire(), null);
  const writing = d.readWriteLock('config').writeLock.acquire({ timeoutMs: 5000 });
  await sleep(200);
  // A reader arriving after a waiting writer queues behind it (writers first).
  assert.equal(await a.readWriteLock('config').readLock.tryAcquire(), null);
  await r1.release();
  await sleep(100);
  const now = await Promise.race([writing.then(() => 'granted'), sleep(100).then(() => 'waiting')]);
  assert.equal(now, 'waiting', 'a reader still holds');
  await r2.release();
  const w = await writing;
  assert.ok(w.fencingToken > r2.fencingToken);
  assert.equal(await c.readWriteLock('config').readLock.tryAcquire(), null);
  assert.equal(await w.release(), true);
  const r3 = await c.readWriteLock('config').readLock.acquire({ timeoutMs: 5000 });
  assert.equal(await r3.release(), true);
  assert.deepEqual(await keys('/lockgate/rw/config/'), []);
});

test('an election: the leader observed with value and term (etcdctl too); the next term is larger', async () => {
  const [a, c] = [await connect(), await connect()];
  assert.equal(await c.election('scheduler').observe(), null);
  const leading = await a.election('scheduler').campaign('10.0.0.7:8080', { timeoutMs: 5000 });
  const seen = await c.election('scheduler').observe();
  assert.equal(seen.value, '10.0.0.7:8080');
  assert.equal(seen.term, leading.term);
  // concurrency.Election's layout: `etcdctl elect -l` (which goes on observing) names the same leader.
  assert.match(await listen('/lockgate/election/scheduler', /10\.0\.0\.7:8080/), /10\.0\.0\.7:8080/);
  const next = c.election('scheduler').campaign('10.0.0.8:8080', { timeoutMs: 5000 });
  await sleep(200);
  assert.equal(await leading.resign(), true);
  const successor = await next;
  assert.ok(successor.term > leading.term);
  assert.equal((await a.election('scheduler').observe()).value, '10.0.0.8:8080');
  await successor.release();
  assert.equal(await a.election('scheduler').observe(), null);
});

test('a lease revoked behind the client (etcdctl lease revoke) is signalled lost, and the name is free again', async () => {
  const [a, c] = [await connect(), await connect()];
  const lease = await a.lock('revoked').acquire({ timeoutMs: 5000 });
  const [key] = await keys('/lockgate/mutex/revoked/');
  const hex = key.split('/').pop();
  await etcdctl('lease', 'revoke', hex);
  await eventually(() => lease.signal.aborted, 5000, 'the loss signal');
  assert.equal(lease.signal.reason.code, 'NOT_HELD');
  assert.equal(lease.isHeld, false);
  assert.equal(await lease.release(), false);
  const next = await c.lock('revoked').acquire({ timeoutMs: 5000 });
  assert.ok(next.fencingToken > lease.fencingToken);
  assert.equal(await next.release(), true);
  // The client that lost its session goes on with a new one.
  const again = await a.lock('revoked').acquire({ timeoutMs: 5000 });
  assert.equal(await again.release(), true);
});

test('etcds:// with the CA the members chain to: a mutex over TLS, and no CA (the system roots) is CONNECTION', async () => {
  const secure = await launch('etcd', ['--tls']);
  try {
    assert.match(secure.url, /^etcds:\/\//);
    const tlsCaPem = require('node:fs').readFileSync(secure.ca_file, 'utf8');
    const c = await lockgate.connect(secure.url, { sessionTimeoutMs: SESSION_MS, tlsCaPem });
    try {
      const lease = await c.lock('over-tls').acquire({ timeoutMs: 5000 });
      assert.ok(lease.fencingToken > 0n);
      assert.equal(await lease.release(), true);
    } finally {
      await c.close();
    }
    await assert.rejects(lockgate.connect(secure.url, { connectTimeoutMs: 1000 }), (e) => {
      assert.equal(e.code, 'CONNECTION', e.message);
      return true;
    });
  } finally {
    await secure.close();
  }
});

// The shared etcd has no TLS: etcds:// against it is checked up to the handshake.
test('etcds://: a CA needs it and must be PEM (INVALID_ARGUMENT); a handshake with a plaintext member is CONNECTION', async () => {
  const pem = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUW\n-----END CERTIFICATE-----\n';
  await assert.rejects(lockgate.connect(etcd.url, { tlsCaPem: pem }), (e) => {
    assert.equal(e.code, 'INVALID_ARGUMENT');
    assert.match(e.message, /etcds:\/\//);
    return true;
  });
  const tls = etcd.url.replace('etcd:', 'etcds:');
  await assert.rejects(lockgate.connect(tls, { tlsCaPem: '/etc/ssl/private-ca.pem' }), (e) => {
    assert.equal(e.code, 'INVALID_ARGUMENT');
    assert.match(e.message, /PEM certificate/);
    assert.ok(!e.message.includes('private-ca'), e.message);
    return true;
  });
  // No TLS on the launcher's etcd: etcds:// there fails the handshake within the connect timeout.
  const started = Date.now();
  await assert.rejects(lockgate.connect(`etcds://u:hunter2@${tls.slice('etcds://'.length)}`, { connectTimeoutMs: 1000 }), (e) => {
    assert.equal(e.code, 'CONNECTION', e.message);
    assert.ok(!e.message.includes('hunter2'), e.message);
    return true;
  });
  assert.ok(Date.now() - started < 5000, 'within the connect timeout');
});

test('a lease is at risk while its connection answers nothing, and safe again once the transport replaced it', async () => {
  // As the ZooKeeper test: a 6 s lease TTL (4 s of validity per keepalive) and an 800 ms
  // response timeout, so a deafened connection is replaced well within the validity.
  const own = await launch('etcd', ['--proxied']);
  const c = await lockgate.connect(own.url, { sessionTimeoutMs: 6000, commandTimeoutMs: 800 });
  try {
    const lease = await c.lock('at-risk').acquire({ timeoutMs: 5000 });
    assert.equal(lease.atRisk, false);
    const told = new Promise((resolve) => lease.onAtRisk(() => resolve(lease.atRisk)));
    await own.command('deafen');
    const late = sleep(5000).then(() => 'not told');
    assert.equal(await Promise.race([told, late]), true, 'onAtRisk called within 5 s, while at risk');
    await eventually(() => !lease.atRisk, 5000, 'safe again on the new connection');
    await own.command('restore');
    assert.equal(lease.isHeld, true);
    assert.equal(lease.signal.aborted, false);
    assert.equal(await lease.release(), true);
  } finally {
    await c.close();
    await own.close();
  }
});

test("etcd's user authentication: the URL's login is used; a wrong password or none is AUTHENTICATION, never shown", async () => {
  const own = await launch('etcd');
  const ctl = (...args) => promisify(execFile)('etcdctl', ['--endpoints', own.endpoints, ...args], { env: ETCDCTL_ENV });
  try {
    // root (required to enable it) and an app user allowed every key.
    await ctl('user', 'add', 'root:root-pw-1');
    await ctl('user', 'add', 'app:app-pw-secret');
    await ctl('role', 'add', 'locks');
    await ctl('role', 'grant-permission', 'locks', 'readwrite', '--prefix=true', '/');
    await ctl('user', 'grant-role', 'app', 'locks');
    await ctl('auth', 'enable');
    const hosts = own.url.slice('etcd://'.length);
    const c = await connect({}, `etcd://app:app-pw-secret@${hosts}`);
    const held = await c.lock('auth').acquire({ timeoutMs: 5000 });
    const waiting = (await connect({}, `etcd://app:app-pw-secret@${hosts}`)).lock('auth').acquire({ timeoutMs: 5000 });
    await sleep(100);
    const released = Date.now();
    assert.equal(await held.release(), true);
    const next = await waiting;
    // Its watch told it (a re-check without one comes only after 3 s).
    assert.ok(Date.now() - released < 2000, `woken after ${Date.now() - released} ms`);
    assert.equal(await next.release(), true);
    await assert.rejects(lockgate.connect(`etcd://app:wrong-pw-secret@${hosts}`, { connectTimeoutMs: 3000 }), (e) => {
      assert.equal(e.code, 'AUTHENTICATION', e.message);
      assert.ok(!e.message.includes('wrong-pw-secret'), e.message);
      return true;
    });
    const anonymous = await connect({}, own.url);
    await assert.rejects(anonymous.lock('auth').acquire({ timeoutMs: 3000 }), { code: 'AUTHENTICATION' });
  } finally {
    await own.close();
  }
});

test('bad URLs and options are typed errors before any connection; an unreachable cluster is CONNECTION', async () => {
  for (const [url, options] of [
    ['etcd://127.0.0.1:2379/app', {}],
    ['etcd://user@127.0.0.1:2379', {}],
    [etcd.url, { sessionTimeoutMs: 500 }],
    [etcd.url, { keyPrefix: 'x:' }],
    [etcd.url, { maxLeaseMs: 1000 }],
  ]) {
    await assert.rejects(lockgate.connect(url, options), (e) => {
      assert.ok(e instanceof lockgate.InvalidArgumentError, `${url} ${JSON.stringify(options)}: ${e}`);
      return true;
    });
  }
  const dead = `etcd://app:hunter2@127.0.0.1:${await freePort()}`;
  await assert.rejects(lockgate.connect(dead, { connectTimeoutMs: 300 }), (e) => {
    assert.equal(e.code, 'CONNECTION');
    assert.equal(e.retryable, true);
    assert.ok(!e.message.includes('hunter2'), e.message);
    return true;
  });
});

test('the transport: keepalives answered one by one, a gone lease as leaseNotFound, transactions and ranges', async () => {
  const { t, perform } = await rawTransport();
  try {
    const granted = await perform({ op: 'leaseGrant', ttlSecs: 5 });
    assert.equal(granted.reply, 'leaseGranted');
    assert.ok(granted.ttlSecs >= 5);
    const { lease } = granted;
    // Two keepalives of one lease on the one stream: each its own answer.
    const answers = await Promise.all([perform({ op: 'leaseKeepAlive', lease }), perform({ op: 'leaseKeepAlive', lease })]);
    for (const a of answers) assert.deepEqual(a, { reply: 'keptAlive', lease, ttlSecs: granted.ttlSecs });
    const key = b('/etcd-test/a');
    const created = await perform({
      op: 'txn',
      compares: [{ key, op: 'equal', target: 'createRevision', value: 0 }],
      success: [
        { op: 'put', key, value: b('v'), lease },
        { op: 'range', ...range('/etcd-test/', { prefix: true, order: 'createAscending', limit: 1 }) },
      ],
      failure: [{ op: 'range', ...range('/etcd-test/a') }],
    });
    assert.equal(created.reply, 'txn');
    assert.equal(created.succeeded, true);
    assert.deepEqual(created.replies[0], { reply: 'put' });
    const [holder] = created.replies[1].kvs;
    assert.equal(holder.createRevision, created.revision);
    assert.equal(holder.lease, lease);
    assert.equal(Buffer.from(holder.value).toString(), 'v');
    const again = await perform({
      op: 'txn',
      compares: [{ key, op: 'equal', target: 'createRevision', value: 0 }],
      success: [],
      failure: [{ op: 'range', ...range('/etcd-test/a') }],
    });
    assert.equal(again.succeeded, false);
    assert.equal(again.replies[0].kvs[0].createRevision, holder.createRevision);
    const counted = await perform({ op: 'range', ...range('/etcd-test/', { prefix: true, countOnly: true }) });
    assert.equal(counted.count, 1);
    assert.deepEqual(counted.kvs, []);
    assert.deepEqual(await perform({ op: 'leaseRevoke', lease }), { reply: 'leaseRevoked' });
    assert.deepEqual(await perform({ op: 'leaseKeepAlive', lease }), { failure: 'leaseNotFound' });
    assert.deepEqual(await perform({ op: 'leaseRevoke', lease }), { failure: 'leaseNotFound' });
    const gone = await perform({ op: 'range', ...range('/etcd-test/a') });
    assert.equal(gone.count, 0, 'the revoke deleted the key');
    // A put on a gone lease refuses the whole transaction.
    const refused = await perform({ op: 'txn', compares: [], success: [{ op: 'put', key, value: b(''), lease }], failure: [] });
    assert.equal(refused.failure, 'leaseNotFound');
  } finally {
    await t.close();
  }
});

test('the transport: watches from a revision, created in order, events pushed, canceled ones silent, ends pushed', async () => {
  const { t, perform, notices } = await rawTransport();
  try {
    const key = b('/etcd-watch/k');
    const put = await perform({ op: 'txn', compares: [], success: [{ op: 'put', key, value: b('1'), lease: 0 }], failure: [] });
    // From the revision of the put: its event is reported although it came before the watch.
    const [w1, w2] = await Promise.all([
      perform({ op: 'watch', watch: 1, key, prefix: false, startRevision: put.revision }),
      perform({ op: 'watch', watch: 2, key: b('/etcd-watch/'), prefix: true, startRevision: put.revision + 1 }),
    ]);
    assert.deepEqual([w1, w2], [{ reply: 'watching' }, { reply: 'watching' }]);
    await eventually(() => notices.some((n) => n.watch === 1), 3000, 'the put before the watch');
    const first = notices.find((n) => n.watch === 1);
    assert.equal(first.notice, 'watch');
    assert.equal(first.events[0].type, 'put');
    assert.equal(first.events[0].kv.modRevision, put.revision);
    assert.deepEqual(await perform({ op: 'cancelWatch', watch: 1 }), { reply: 'watchCanceled' });
    const del = await perform({ op: 'txn', compares: [], success: [{ op: 'delete', key, prefix: false }], failure: [] });
    assert.deepEqual(del.replies, [{ reply: 'delete', deleted: 1 }]);
    await eventually(() => notices.some((n) => n.watch === 2), 3000, 'the delete on the prefix watch');
    const deleted = notices.find((n) => n.watch === 2);
    assert.equal(deleted.events[0].type, 'delete');
    assert.equal(deleted.events[0].kv.modRevision, del.revision);
    assert.equal(notices.filter((n) => n.watch === 1).length, 1, 'nothing of a canceled watch');
    // A watch canceled before the server confirmed it never reports.
    const early = perform({ op: 'watch', watch: 3, key, prefix: false, startRevision: put.revision });
    assert.deepEqual(await perform({ op: 'cancelWatch', watch: 3 }), { reply: 'watchCanceled' });
    assert.deepEqual(await early, { reply: 'watching' });
    await sleep(200);
    assert.equal(notices.filter((n) => n.watch === 3).length, 0);
    // A stream that ends (the client replaced here) ends the live watches: pushed as watchEnded.
    t.replace(t.generation);
    const ended = notices.filter((n) => n.notice === 'watchEnded');
    assert.deepEqual(ended, [{ notice: 'watchEnded', watch: 2, why: 'the connection went silent and was replaced' }]);
    assert.equal((await perform({ op: 'range', ...range('/etcd-watch/k') })).count, 0, 'the new client serves');
  } finally {
    await t.close();
  }
});

test('the transport: a request unanswered in time replaces the client; a stopped member fails requests retryably', async () => {
  const own = await launch('etcd');
  const { t, perform } = await rawTransport(own, 800);
  try {
    const { lease } = await perform({ op: 'leaseGrant', ttlSecs: 5 });
    await own.command('pause 0');
    const generation = t.generation;
    const started = Date.now();
    const kept = await perform({ op: 'leaseKeepAlive', lease });
    assert.equal(kept.failure, 'connectionLost');
    assert.match(kept.message, /no answer to a keepalive/);
    assert.ok(Date.now() - started < 3000);
    assert.equal(t.generation, generation + 1, 'the client was replaced');
    await own.command('resume 0');
    assert.equal((await perform({ op: 'leaseKeepAlive', lease })).reply, 'keptAlive', 'on the new client');
    await own.command('stop 0');
    const down = await perform({ op: 'range', ...range('/x') });
    assert.equal(down.failure, 'connectionLost', JSON.stringify(down));
  } finally {
    await t.close();
    await own.close();
  }
});

test('an idle client never holds the process open', async () => {
  const script = `
    const lockgate = require(${JSON.stringify(path.join(__dirname, '..'))});
    lockgate.connect(${JSON.stringify(etcd.url)}, { sessionTimeoutMs: ${SESSION_MS} }).then(async (c) => {
      await (await c.lock('idle').acquire()).release();
      const w = await c.lock('idle-watch').acquire();
      const other = await lockgate.connect(${JSON.stringify(etcd.url)}, { sessionTimeoutMs: ${SESSION_MS} });
      const waiting = other.lock('idle-watch').acquire();
      setTimeout(() => w.release(), 300);
      await (await waiting).release();
      console.log('idle');
    });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const late = new Promise((resolve) => setTimeout(resolve, 8000, 'still running'));
    assert.equal(await Promise.race([exited, late]), 0, 'the process ends by itself');
  } finally {
    child.kill('SIGKILL');
  }
});
