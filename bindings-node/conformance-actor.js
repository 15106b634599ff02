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
// Wall clock in ns, comparable across processes (and with the server's TIME) to well under a
// millisecond: the monotonic clock (process.hrtime, one clock for the whole machine) minus its
// offset from the system clock. Node reads the system clock only to the millisecond
// (Date.now()), so the offset is taken at the instant Date.now() ticks; a read delayed by the
// process being descheduled between the tick and hrtime only makes the offset larger, so the
// smallest of several such samples is the true one. (performance.timeOrigin is one such
// sample taken at start-up, and on a loaded CI machine it was once off by 0.6 ms: enough for
// two actors' holdings to seem to overlap.)
function calibrate(samples) {
  let best = null;
  for (let i = 0; i < samples; i++) {
    const start = Date.now();
    let ms = start;
    while (ms === start) ms = Date.now();
    const offset = process.hrtime.bigint() - BigInt(ms) * 1_000_000n;
    if (best === null || offset < best) best = offset;
  }
  return best;
}
let clockOffset = calibrate(5);
// More than 2 ms from Date.now(): the system clock was stepped (the monotonic clock does not
// follow), unless this process was descheduled between the two reads; re-calibrate only when
// a second look agrees.
const drifted = (ns) => Math.abs(Number(ns / 1_000_000n) - Date.now()) > 2;
function wallNs() {
  let ns = process.hrtime.bigint() - clockOffset;
  if (drifted(ns) && drifted(process.hrtime.bigint() - clockOffset)) {
    clockOffset = calibrate(5);
    ns = process.hrtime.bigint() - clockOffset;
  }
  return ns.toString();
}
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
  if (present(op.min_hold_ms)) o.minHoldMs = op.min_hold_ms;
  if (present(op.max_hold_ms)) o.maxHoldMs = op.max_hold_ms;
  return o;
}

/** Handle options for a read-write lock or mutex: the lock options plus `reentrant`. */
function withFlags(op, o) {
  if (present(op.reentrant)) o.reentrant = op.reentrant;
  return o;
}

/**
 * The library handle a step describes (Primitive options in conformance/README.md): `kind`
 * (mutex, semaphore, read, write, leader; protocol 1 also sends `redlock`, meaning the client of
 * `connect_redlock`), `permits`, `value`, `reentrant`, `writers_first`.
 * Returns `{ acquire(timeoutMs), tryAcquire() }` over the public API.
 */
function makeHandle(client, redlock, name, op) {
  const o = lockOptions(op);
  const kind = present(op.kind) ? op.kind : 'mutex';
  switch (kind) {
    case 'redlock':
      if (!redlock) throw new lockgate.InvalidArgumentError('connect_redlock was not sent');
      return lockHandle(redlock.lock(name, o));
    case 'mutex':
      return lockHandle(client.lock(name, withFlags(op, o)));
    case 'semaphore':
      return lockHandle(client.semaphore(name, present(op.permits) ? op.permits : 1, o));
    case 'read':
    case 'write': {
      if (present(op.writers_first)) o.writersFirst = op.writers_first;
      const rw = client.readWriteLock(name, withFlags(op, o));
      return lockHandle(kind === 'read' ? rw.readLock : rw.writeLock);
    }
    case 'leader': {
      if (op.reentrant === true) o.reentrant = true; // the library rejects it
      return lockHandle(client.election(name, o).candidate(present(op.value) ? op.value : ''));
    }
    default:
      throw new lockgate.InvalidArgumentError(`unknown kind ${JSON.stringify(kind)}`);
  }
}

function lockHandle(lock) {
  return {
    acquire: (timeoutMs) => lock.acquire({ timeoutMs }),
    tryAcquire: () => lock.tryAcquire(),
  };
}

class Actor {
  constructor() {
    this.client = null;
    this.redlock = null;
    /** handle name -> { handle, leases: Lease[] (most recent last) } */
    this.handles = new Map();
  }

  /** The step's handle (`handle`, default the lock name), created on first use with its options. */
  handleFor(op) {
    const key = present(op.handle) ? op.handle : op.lock ?? '';
    let h = this.handles.get(key);
    if (!h) {
      h = { handle: makeHandle(this.client, this.redlock, op.lock ?? '', op), leases: [] };
      this.handles.set(key, h);
    }
    return h;
  }

  /** The most recent lease of the step's handle, if any. */
  top(op) {
    const h = this.handles.get(present(op.handle) ? op.handle : op.lock ?? '');
    return h && h.leases.length ? h.leases[h.leases.length - 1] : undefined;
  }

  async handle(op) {
    try {
      switch (op.op) {
        case 'connect': {
          // Any URL scheme (protocol 2): the library picks the backend. `options` fields go to
          // the client options under their JS names; protocol 1 sends a top-level `prefix`.
          const given = op.options ?? {};
          const options = {};
          const prefix = present(given.prefix) ? given.prefix : op.prefix;
          if (present(prefix)) options.keyPrefix = prefix;
          if (present(given.replica_acks)) options.replicaAcks = { replicas: given.replica_acks };
          if (present(given.max_lease_ms)) options.maxLeaseMs = given.max_lease_ms;
          if (present(given.session_timeout_ms)) options.sessionTimeoutMs = given.session_timeout_ms;
          if (present(given.label)) options.label = given.label;
          const client = await lockgate.connect(op.url ?? '', options);
          if (this.client) await this.client.close();
          this.client = client;
          this.handles.clear();
          // Protocol 2: the core's capabilities in the conformance names (snake_case), for the
          // orchestrator to check against the variant's.
          if (!op.options) return { ok: true };
          const { backend, scheme, ...caps } = client.capabilities;
          const names = Object.keys(caps).filter((k) => caps[k]).map((k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
          return { ok: true, capabilities: names };
        }
        case 'connect_redlock': {
          // Protocol 1: a Redlock over `urls` (redis:// URLs of the masters), used by `kind: redlock`.
          const options = {};
          if (present(op.prefix)) options.keyPrefix = op.prefix;
          if (present(op.max_lease_ms)) options.maxLeaseMs = op.max_lease_ms;
          const hosts = (op.urls ?? []).map((u) => new URL(u).host);
          const redlock = await lockgate.connect(`redlock://${hosts.join(',')}`, options);
          if (this.redlock) await this.redlock.close();
          this.redlock = redlock;
          return { ok: true };
        }
        case 'lock': {
          // Always validated with this step's options; kept only as the handle's first use.
          const handle = makeHandle(this.client, this.redlock, op.lock ?? '', op);
          const key = present(op.handle) ? op.handle : op.lock ?? '';
          if (!this.handles.has(key)) this.handles.set(key, { handle, leases: [] });
          return { ok: true };
        }
        case 'acquire':
        case 'try_acquire': {
          const h = this.handleFor(op);
          const lease =
            op.op === 'acquire'
              ? await h.handle.acquire(present(op.timeout_ms) ? op.timeout_ms : 0)
              : await h.handle.tryAcquire();
          if (!lease) return { ok: true, acquired: false };
          h.leases.push(lease);
          // A Redlock grant has no fencing token (PROTOCOL.md §8).
          if (lease.fencingToken === null) return { ok: true, acquired: true };
          return { ok: true, acquired: true, token: lease.fencingToken.toString() };
        }
        case 'release': {
          // A failed release leaves the lease on the stack (conformance/README.md).
          const h = this.handles.get(present(op.handle) ? op.handle : op.lock ?? '');
          const lease = h && h.leases[h.leases.length - 1];
          if (!lease) return NOT_HELD;
          const wasHeld = await lease.release();
          h.leases.splice(h.leases.lastIndexOf(lease), 1);
          return { ok: true, was_held: wasHeld };
        }
        case 'extend': {
          const lease = this.top(op);
          if (!lease) return NOT_HELD;
          await lease.extend(present(op.ms) ? op.ms : 0);
          return { ok: true };
        }
        case 'is_held': {
          const lease = this.top(op);
          return { ok: true, held: Boolean(lease && lease.isHeld) };
        }
        case 'wait_lost': {
          const lease = this.top(op);
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
          const h = this.handleFor(op);
          const hold = present(op.hold_ms) ? op.hold_ms : 2;
          const records = [];
          for (let i = 0; i < (op.times ?? 1); i++) {
            const lease = await h.handle.acquire(30_000);
            const enter = wallNs();
            await sleep(hold);
            const exit = wallNs();
            await lease.release();
            records.push([lease.fencingToken === null ? null : lease.fencingToken.toString(), enter, exit]);
          }
          return { ok: true, records };
        }
        case 'observe': {
          const leader = await this.client.election(op.lock ?? '').observe();
          if (!leader) return { ok: true, leader: false };
          return { ok: true, leader: true, value: leader.value, token: leader.term.toString() };
        }
        case 'export': {
          const lease = this.top(op);
          if (!lease) return NOT_HELD;
          return { ok: true, identity: lease.identity() };
        }
        case 'adopt': {
          // The adopted lease joins the stack of the step's handle, as an acquire's would.
          const lease = await this.client.adopt(op.identity ?? '', lockOptions(op));
          this.handleFor(op).leases.push(lease);
          if (lease.fencingToken === null) return { ok: true, acquired: true };
          return { ok: true, acquired: true, token: lease.fencingToken.toString() };
        }
        case 'break': {
          const token = op.token !== undefined ? Number(op.token) : undefined;
          const b = await this.client.breakLock(op.lock ?? '', { token, kind: op.kind ?? 'mutex' });
          if (b === null) return { ok: true, broken: false };
          return { ok: true, broken: true, label: b.label, token: b.fencingToken === null ? null : b.fencingToken.toString() };
        }
        case 'list': {
          // Pages through every lock under the prefix `lock`; each as "<name after the prefix>
          // <kind> <holders> <waiters>", sorted, with the labels and the pages read.
          const prefix = op.lock ?? '';
          const entries = [];
          const labels = [];
          let pages = 0;
          let cursor;
          do {
            const page = await this.client.listLocks({ prefix, limit: op.limit, cursor });
            pages += 1;
            for (const e of page.entries) {
              const rest = e.name.startsWith(prefix) ? e.name.slice(prefix.length) : e.name;
              entries.push(`${rest} ${e.kind} ${e.holders} ${e.waiters}`);
              labels.push(e.label);
            }
            cursor = page.cursor ?? undefined;
          } while (cursor !== undefined && pages < 10000);
          entries.sort();
          labels.sort((x, y) => (x === null ? (y === null ? 0 : -1) : y === null ? 1 : x < y ? -1 : x > y ? 1 : 0));
          return { ok: true, entries, labels, pages };
        }
        case 'inspect': {
          // With `permits`, through a semaphore handle (which knows its count); else by name.
          const s = op.permits !== undefined
            ? await this.client.semaphore(op.lock ?? '', op.permits).inspect()
            : await this.client.inspect(op.lock ?? '', op.kind ?? 'mutex');
          const writer = s.holders.find((h) => h.mode === 'exclusive');
          const first = s.holders[0];
          return {
            ok: true,
            locked: s.locked,
            holders: s.holders.map((h) => h.label),
            waiters: s.waiters.map((w) => w.label),
            readers: s.holders.filter((h) => h.mode === 'shared').length,
            writer: writer !== undefined,
            token: first && first.fencingToken !== null ? first.fencingToken.toString() : null,
            holds: s.holders.map((h) => h.holds),
            permits: s.permits,
            leader: writer ? writer.value : null,
          };
        }
        default:
          return { ok: false, error: 'UNSUPPORTED_OP', detail: op.op };
      }
    } catch (e) {
      return err(e);
    }
  }

  async close() {
    for (const h of this.handles.values()) {
      while (h.leases.length) await h.leases.pop().release().catch(() => {});
    }
    if (this.client) await this.client.close();
    if (this.redlock) await this.redlock.close();
  }
}

async function main() {
  let actor = new Actor();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let op;
    try {
      op = JSON.parse(line);
    } catch (e) {
      op = { op: 'invalid', detail: String(e) };
    }
    if (op.op === 'exit') break;
    let reply;
    if (op.op === 'reset') {
      // The orchestrator reuses this process for its next run: as a fresh actor.
      await actor.close();
      actor = new Actor();
      reply = { ok: true };
    } else {
      reply = await actor.handle(op);
    }
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
