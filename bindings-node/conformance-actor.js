#!/usr/bin/env node
'use strict';
// The Node conformance actor: one JSON operation per line on stdin, performed through the
// public `lockgate` API only, one JSON result per line on stdout. The protocol is described in
// conformance/README.md. Run from the repository root after `bindings-node/ci.sh build`:
//   node bindings-node/conformance-actor.js

const readline = require('node:readline');
const lockgate = require('./lib');

const NOT_HELD = { ok: false, error: 'NOT_HELD', retryable: false };
const err = (e) => {
  if (e instanceof lockgate.LockError) return { ok: false, error: e.code, retryable: e.retryable };
  throw e;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Wall clock in ns at microsecond precision (timeOrigin is a wall-clock reading at start-up).
const wallNs = () => (BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n).toString();
const present = (v) => v !== undefined && v !== null;

/** Lock options from the operation, passed through untouched (the library rejects bad values). */
function lockOptions(op) {
  const o = {};
  if (present(op.lease_ms)) {
    o.leaseMs = op.lease_ms;
    o.autoRenew = false;
  }
  if (present(op.renew)) o.autoRenew = op.renew;
  if (present(op.entry_ttl_ms)) o.entryTtlMs = op.entry_ttl_ms;
  return o;
}

class Actor {
  constructor() {
    this.client = null;
    this.leases = new Map();
  }

  lock(op) {
    return this.client.lock(op.lock ?? '', lockOptions(op));
  }

  async handle(op) {
    const name = op.lock ?? '';
    try {
      switch (op.op) {
        case 'connect': {
          const options = present(op.prefix) ? { keyPrefix: op.prefix } : undefined;
          const client = await lockgate.connect(op.url ?? '', options);
          if (this.client) await this.client.close();
          this.client = client;
          return { ok: true };
        }
        case 'lock':
          this.lock(op);
          return { ok: true };
        case 'acquire':
        case 'try_acquire': {
          const lock = this.lock(op);
          const lease =
            op.op === 'acquire'
              ? await lock.acquire({ timeoutMs: present(op.timeout_ms) ? op.timeout_ms : 0 })
              : await lock.tryAcquire();
          if (!lease) return { ok: true, acquired: false };
          this.leases.set(name, lease);
          return { ok: true, acquired: true, token: lease.fencingToken.toString() };
        }
        case 'release': {
          const lease = this.leases.get(name);
          if (!lease) return NOT_HELD;
          this.leases.delete(name);
          return { ok: true, was_held: await lease.release() };
        }
        case 'extend': {
          const lease = this.leases.get(name);
          if (!lease) return NOT_HELD;
          await lease.extend(present(op.ms) ? op.ms : 0);
          return { ok: true };
        }
        case 'is_held': {
          const lease = this.leases.get(name);
          return { ok: true, held: Boolean(lease && lease.isHeld) };
        }
        case 'wait_lost': {
          const lease = this.leases.get(name);
          if (!lease) return NOT_HELD;
          const signal = lease.signal;
          const lost = await new Promise((resolve) => {
            if (signal.aborted) return resolve(true);
            const timer = setTimeout(() => {
              signal.removeEventListener('abort', onAbort);
              resolve(false);
            }, present(op.timeout_ms) ? op.timeout_ms : 5000);
            const onAbort = () => {
              clearTimeout(timer);
              resolve(true);
            };
            signal.addEventListener('abort', onAbort, { once: true });
          });
          return lost ? { ok: true, lost: true, error: signal.reason.code } : { ok: true, lost: false };
        }
        case 'hammer': {
          const lock = this.lock(op);
          const hold = present(op.hold_ms) ? op.hold_ms : 2;
          const records = [];
          for (let i = 0; i < (op.times ?? 1); i++) {
            const lease = await lock.acquire({ timeoutMs: 30_000 });
            const enter = wallNs();
            await sleep(hold);
            const exit = wallNs();
            await lease.release();
            records.push([lease.fencingToken.toString(), enter, exit]);
          }
          return { ok: true, records };
        }
        default:
          return { ok: false, error: 'UNSUPPORTED_OP', detail: op.op };
      }
    } catch (e) {
      return err(e);
    }
  }

  async close() {
    for (const lease of this.leases.values()) await lease.release().catch(() => {});
    if (this.client) await this.client.close();
  }
}

async function main() {
  const actor = new Actor();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let op;
    try {
      op = JSON.parse(line);
    } catch (e) {
      op = { op: 'invalid', detail: String(e) };
    }
    if (op.op === 'exit') break;
    const reply = await actor.handle(op);
    reply.id = op.id ?? null;
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  }
  lines.close();
  await actor.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
