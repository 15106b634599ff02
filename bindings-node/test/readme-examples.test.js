'use strict';
// The README's per-backend examples run as written (issue 23, item 10): every ```js example
// block of bindings-node/README.md runs as an ES module in a fresh `node`, against real servers
// from the project's launcher, with the one substitution the README states: the URL string in
// the example is replaced, whole, by the launched server's URL of that backend. The module is
// written inside the package, so `import 'lockgate'` resolves to this package by its name.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile, spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { promisify } = require('node:util');

const run = promisify(execFile);
const HERE = path.join(__dirname, '..');
const ROOT = path.join(HERE, '..');
const LAUNCHER = path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release', 'test-servers');
const README = fs.readFileSync(path.join(HERE, 'README.md'), 'utf8');
const URL_LITERAL = /(['"])((?:redis|rediss|redis\+cluster|redlock|zookeeper|etcd|postgres|postgresql|mysql|mariadb):\/\/[^'"]*)\1/g;
const KIND = { redis: 'single', 'redis+cluster': 'cluster', redlock: 'redlock', zookeeper: 'zookeeper', etcd: 'etcd', postgres: 'postgres', mysql: 'mariadb' };

const examples = [...README.matchAll(/^```js example\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
const launched = new Map();
const scratch = fs.mkdtempSync(path.join(HERE, 'test', '.readme-'));

after(async () => {
  for (const l of launched.values()) {
    l.proc.stdin.end();
    await new Promise((resolve) => l.proc.once('exit', resolve));
  }
  fs.rmSync(scratch, { recursive: true, force: true });
});

/** The launcher's servers of `kind` (started once): `{ proc, url }`. */
async function servers(kind) {
  if (!launched.has(kind)) {
    const proc = spawn(LAUNCHER, [kind], { stdio: ['pipe', 'pipe', 'inherit'] });
    const [line] = await readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]().next().then((r) => [r.value]);
    const { url } = JSON.parse(line);
    launched.set(kind, { proc, url: kind === 'cluster' ? `redis+cluster://${url.split('://')[1]}` : url });
  }
  return launched.get(kind);
}

function schemeOf(code) {
  const m = [...code.matchAll(URL_LITERAL)];
  assert.ok(m.length > 0, `an example names no URL:\n${code}`);
  return m[0][2].split('://')[0];
}

test('the README has an example for every backend', () => {
  assert.deepEqual([...new Set(examples.map(schemeOf))].sort(), Object.keys(KIND).sort());
});

examples.forEach((code, i) => {
  test(`README example ${i} (${schemeOf(code)}) runs as written`, { timeout: 120_000 }, async () => {
    const { url } = await servers(KIND[schemeOf(code)]);
    const file = path.join(scratch, `example-${i}.mjs`);
    fs.writeFileSync(file, code.replace(URL_LITERAL, (_, q) => `${q}${url}${q}`));
    const { stdout } = await run(process.execPath, [file], { cwd: scratch, timeout: 60_000 });
    assert.ok(stdout.trim().length > 0, 'the example printed nothing');
  });
});
