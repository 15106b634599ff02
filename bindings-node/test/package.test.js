'use strict';
// The package as a user gets it (issue 13, items 14 and 15): `npm pack`, then the README's
// `npm install <tarball>` into a new directory outside the repository (it cannot see the repo's
// node_modules), then the package imported both ways — ES module `import { ... }` of every
// export, CommonJS `require` — each taking a lock on a real redis-server, and the TypeScript
// declarations checked for both entry points.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const lockgate = require('..');
const { startRedis } = require('./helpers/redis-server');

const run = promisify(execFile);
const HERE = path.join(__dirname, '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

let redis;
let dir;
let app;
let packed;

before(async () => {
  redis = await startRedis();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockgate-node-package-'));
  app = path.join(dir, 'app');
  fs.mkdirSync(app);
});

after(async () => {
  await redis.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `node <file>` in the app directory; resolves with its stdout (rejects on failure). */
async function node(file) {
  const { stdout } = await run(process.execPath, [file, redis.url], { cwd: app, timeout: 30_000 });
  return stdout;
}

test('npm pack holds the built engine, the JavaScript and the types', { timeout: 120_000 }, async () => {
  const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', dir], { cwd: HERE, timeout: 120_000 });
  const [info] = JSON.parse(stdout);
  const files = info.files.map((f) => f.path);
  for (const f of [
    'package.json',
    'README.md',
    'lib/index.js',
    'lib/index.mjs',
    'lib/index.d.ts',
    'lib/index.d.mts',
    'lib/wasm.js',
    'pkg/lockgate_node.js',
    'pkg/lockgate_node_bg.wasm',
  ]) {
    assert.ok(files.includes(f), `${f} is in the package (files: ${files.join(', ')})`);
  }
  assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('src/')), 'no tests or Rust sources');
  packed = path.join(dir, info.filename);
  assert.ok(fs.existsSync(packed));
});

test('the tarball installs into a new directory and works with require and with import', { timeout: 180_000 }, async () => {
  assert.ok(packed, 'npm pack ran');
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
  // The package alone, in a directory that has nothing but this package.json: the database
  // drivers are optional peer dependencies, so none comes with it (issue 28).
  await run(NPM, ['install', '--no-audit', '--no-fund', '--prefer-offline', packed], { cwd: app, timeout: 170_000 });
  // The drivers and OpenTelemetry's API (lockgate.instrumentOpenTelemetry): every peer optional.
  const drivers = Object.keys(JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8')).peerDependencies);
  assert.deepEqual(drivers.sort(), ['@opentelemetry/api', 'etcd3', 'ioredis', 'memcached', 'mysql2', 'node-zookeeper-client', 'pg']);
  for (const d of drivers) assert.ok(!fs.existsSync(path.join(app, 'node_modules', d)), `${d} is not installed with lockgate`);
  // Every backend whose driver is missing says which npm line adds it, before any network call.
  fs.writeFileSync(
    path.join(app, 'missing.cjs'),
    `const { connect, UnsupportedError, LockError } = require('lockgate');
const urls = {
  ioredis: 'redis://127.0.0.1:1', 'node-zookeeper-client': 'zookeeper://127.0.0.1:1', etcd3: 'etcd://127.0.0.1:1',
  pg: 'postgres://u@127.0.0.1:1/db', mysql2: 'mysql://u@127.0.0.1:1/db', memcached: 'memcached://127.0.0.1:1',
};
(async () => {
  for (const [driver, url] of Object.entries(urls)) {
    const err = await connect(url).then(() => null, (e) => e);
    if (!(err instanceof UnsupportedError && err instanceof LockError && err.code === 'UNSUPPORTED' && err.retryable === false)) {
      throw new Error(url + ': expected an UnsupportedError, got ' + (err && err.stack));
    }
    if (!err.message.includes('npm install ' + driver)) throw new Error(url + ': the message names no npm line: ' + err.message);
    console.log(err.message);
  }
})().catch((e) => { console.error(e); process.exit(1); });
`,
  );
  const missing = await node('missing.cjs');
  assert.match(missing, /^the Redis backends \(Redis, Redis Cluster, Redlock\) needs the ioredis package, which is not installed: npm install ioredis$/m);
  assert.equal(missing.trim().split('\n').length, 6, missing);
  // The README's install line: the package and the one driver the application's backend uses.
  await run(NPM, ['install', '--no-audit', '--no-fund', '--prefer-offline', packed, 'ioredis'], { cwd: app, timeout: 170_000 });
  assert.ok(fs.existsSync(path.join(app, 'node_modules', 'ioredis')), 'the named driver is installed');
  for (const d of drivers.filter((d) => d !== 'ioredis')) assert.ok(!fs.existsSync(path.join(app, 'node_modules', d)), `${d} is not`);
  assert.ok(
    !fs.realpathSync(path.join(app, 'node_modules', 'lockgate')).startsWith(HERE),
    'installed as a copy, not a link into the repository',
  );

  const names = Object.keys(lockgate).sort();
  fs.writeFileSync(
    path.join(app, 'esm.mjs'),
    `import { ${names.join(', ')} } from 'lockgate';
import * as ns from 'lockgate';
import lockgate from 'lockgate';
import { createRequire } from 'node:module';
const cjs = createRequire(import.meta.url)('lockgate');
const named = { ${names.join(', ')} };
for (const [k, v] of Object.entries(cjs)) {
  if (named[k] !== v || ns[k] !== v) throw new Error('import { ' + k + ' } is not the CommonJS export');
}
if (lockgate !== cjs) throw new Error('the default import is not the CommonJS module');
const missing = Object.keys(ns).filter((k) => k !== 'default' && !(k in cjs));
if (missing.length) throw new Error('ESM-only exports: ' + missing);
const client = await connect(process.argv[2]);
const lease = await client.lock('package-esm').acquire();
try {
  await client.lock('package-esm').acquire({ timeoutMs: 50 });
  throw new Error('expected a timeout');
} catch (e) {
  if (!(e instanceof TimeoutError && e instanceof LockError && e.code === 'TIMEOUT')) throw e;
}
await lease.release();
await client.close();
console.log('esm ok', Object.keys(cjs).length);
`,
  );
  fs.writeFileSync(
    path.join(app, 'cjs.cjs'),
    `const { connect, TimeoutError, LockError } = require('lockgate');
(async () => {
  const client = await connect(process.argv[2]);
  const lease = await client.lock('package-cjs').acquire();
  const err = await client.lock('package-cjs').acquire({ timeoutMs: 50 }).catch((e) => e);
  if (!(err instanceof TimeoutError && err instanceof LockError)) throw err || new Error('expected a timeout');
  await lease.release();
  await client.close();
  console.log('cjs ok');
})().catch((e) => { console.error(e); process.exit(1); });
`,
  );
  assert.equal(await node('esm.mjs'), `esm ok ${names.length}\n`);
  assert.equal(await node('cjs.cjs'), 'cjs ok\n');
  assert.equal(await redis.admin.exists('lockgate:{package-esm}', 'lockgate:{package-cjs}'), 0, 'released');
});

test("the top README's Node section: its install lines are these steps, its snippets run as .mjs and .cjs (issue 23, item 11)", { timeout: 60_000 }, async () => {
  assert.ok(fs.existsSync(path.join(app, 'node_modules', 'lockgate')), 'installed by the previous test');
  const top = fs.readFileSync(path.join(HERE, '..', 'README.md'), 'utf8');
  const section = top.slice(top.indexOf('## Node\n'), top.indexOf('## Java\n'));
  const [install] = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.match(install, /npm pack --pack-destination/, 'the README packs the package, as this test does');
  assert.match(install, /npm install \/tmp\/lockgate-0\.1\.0\.tgz ioredis/, 'and installs the tarball with its one driver, as this test does');
  assert.doesNotMatch(install, /npm install \.\/bindings-node/, 'never the folder (npm would link it)');
  const blocks = [...section.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.equal(blocks.length, 2, 'an ES module and a CommonJS snippet');
  const withUrl = (code) => code.replace(/'redis:\/\/[^']*'/g, `'${redis.url}'`);
  fs.writeFileSync(path.join(app, 'top.mjs'), withUrl(blocks[0]));
  fs.writeFileSync(path.join(app, 'top.cjs'), withUrl(blocks[1]));
  assert.match(await node('top.mjs'), /holding orders:42, fencing token \d+/);
  assert.match(await node('top.cjs'), /holding orders:42, fencing token \d+/);
});

test('the installed types check for import (.mts) and require (.cts) under TypeScript node16 resolution', { timeout: 120_000 }, async () => {
  assert.ok(fs.existsSync(path.join(app, 'node_modules', 'lockgate')), 'installed by the previous test');
  const names = Object.keys(lockgate).sort();
  const body = `
export async function main(url: string): Promise<void> {
  const client: Client = await connect(url);
  const lock: Lock = client.lock('typed');
  const lease: Lease = await lock.acquire({ timeoutMs: 10 });
  const token: bigint | null = lease.fencingToken;
  const held: Lease | null = lock.lease;
  const errors: Array<typeof LockError> = [TimeoutError, AlreadyHeldError, InvalidArgumentError, ClosedError];
  const code: 'ALREADY_HELD' = AlreadyHeldError.code;
  void token; void held; void errors; void code;
  await lease.release();
  await client.close();
}
`;
  fs.writeFileSync(path.join(app, 'check.mts'), `import { ${names.join(', ')} } from 'lockgate';\nimport lockgate from 'lockgate';\nvoid lockgate.connect;${body}`);
  fs.writeFileSync(path.join(app, 'check.cts'), `import { ${names.join(', ')} } from 'lockgate';\nimport lockgate = require('lockgate');\nvoid lockgate.connect;${body}`);
  fs.writeFileSync(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'node16',
        moduleResolution: 'node16',
        strict: true,
        noEmit: true,
        noUnusedLocals: false,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [path.join(HERE, 'node_modules', '@types')],
      },
      files: ['check.mts', 'check.cts'],
    }),
  );
  const tsc = path.join(HERE, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app, timeout: 110_000 });
  } catch (err) {
    assert.fail(`tsc rejected the installed types:\n${err.stdout}${err.stderr}`);
  }
});
