'use strict';
// The three contenders behind one interface: `open(url)` -> { lock(name) -> { acquire, release }, close }.
// Each library is used with its defaults except where noted (redlock would otherwise give up
// after 10 retries under contention).

const Redis = require('ioredis');

const LEASE_MS = 10_000;

const libs = {
  lockgate: {
    label: 'lockgate (this package)',
    settings: 'lease 10 s renewed; waiters queued and woken by the release',
    async open(url) {
      const lockgate = require('..');
      const client = await lockgate.connect(url);
      return {
        lock(name) {
          const lock = client.lock(name, { leaseMs: LEASE_MS });
          let lease = null;
          return {
            async acquire() {
              lease = await lock.acquire();
            },
            async release() {
              await lease.release();
            },
          };
        },
        close: () => client.close(),
      };
    },
  },
  'lockgate-telemetry': {
    label: 'lockgate, telemetry on',
    settings: 'as lockgate, with a subscriber on every lockgate diagnostics_channel that formats each message (issue 27: telemetry fully on)',
    async open(url) {
      const dc = require('node:diagnostics_channel');
      const lockgate = require('..');
      let chars = 0;
      const seen = (message, name) => {
        chars += `${name} ${JSON.stringify(message)}`.length; // what a logger would do with it
      };
      for (const name of lockgate.telemetryChannels) dc.subscribe(name, seen);
      const inner = await libs.lockgate.open(url);
      return {
        lock: inner.lock,
        async close() {
          await inner.close();
          for (const name of lockgate.telemetryChannels) dc.unsubscribe(name, seen);
          if (chars === 0) throw new Error('the telemetry subscriber saw no event');
        },
      };
    },
  },
  'lockgate-telemetry-floor': {
    label: 'lockgate, its telemetry messages formatted by the application',
    settings:
      'the floor of the telemetry row: telemetry off, and per pair the application itself formats the messages lockgate ' +
      'publishes per pair with it on (acquire.started, acquire.granted, lease.released: the objects a subscriber received ' +
      'in a warm-up pair of another client) through the same function; what formatting them costs, whoever publishes them',
    async open(url) {
      const dc = require('node:diagnostics_channel');
      const lockgate = require('..');
      const captured = new Map();
      const grab = (message, name) => captured.set(name, message);
      for (const name of lockgate.telemetryChannels) dc.subscribe(name, grab);
      const warm = await libs.lockgate.open(url);
      const once = warm.lock('bench:telemetry-floor:warm-up');
      await once.acquire();
      await once.release();
      await warm.close();
      for (const name of lockgate.telemetryChannels) dc.unsubscribe(name, grab);
      const each = ['lockgate.acquire.started', 'lockgate.acquire.granted', 'lockgate.lease.released'].map((name) => {
        if (!captured.has(name)) throw new Error(`the warm-up pair published no ${name}`);
        return [captured.get(name), name];
      });
      let chars = 0;
      const seen = (message, name) => {
        chars += `${name} ${JSON.stringify(message)}`.length; // the telemetry row's subscriber
      };
      const inner = await libs.lockgate.open(url);
      return {
        lock(name) {
          const lock = inner.lock(name);
          return {
            async acquire() {
              seen(...each[0]);
              await lock.acquire();
              seen(...each[1]);
            },
            async release() {
              await lock.release();
              seen(...each[2]);
            },
          };
        },
        async close() {
          await inner.close();
          if (chars === 0) throw new Error('the floor formatted no message');
        },
      };
    },
  },
  'lockgate-ioredis': {
    label: 'lockgate over ioredis (no lean RESP socket)',
    settings: 'as lockgate, with a redisOptions key the lean socket does not take, so commands go through ioredis',
    async open(url) {
      const lockgate = require('..');
      const client = await lockgate.connect(url, { redisOptions: { maxRetriesPerRequest: 2 } });
      return {
        lock(name) {
          const lock = client.lock(name, { leaseMs: LEASE_MS });
          let lease = null;
          return {
            async acquire() {
              lease = await lock.acquire();
            },
            async release() {
              await lease.release();
            },
          };
        },
        close: () => client.close(),
      };
    },
  },
  'lockgate-redlock': {
    label: 'lockgate Redlock (one master: the same server)',
    settings:
      'as lockgate, over a redlock:// URL of that one server: its rounds, retries (200 ms + up to 200 ms) and no waiter ' +
      'queue; nodeTimeoutMs 500 (the default 50 ms fails rounds whenever the shared machine stalls the process)',
    async open(url) {
      const lockgate = require('..');
      const client = await lockgate.connect(url.replace(/^redis:/, 'redlock:'), { nodeTimeoutMs: 500 });
      return {
        lock(name) {
          const lock = client.lock(name, { leaseMs: LEASE_MS });
          let lease = null;
          return {
            async acquire() {
              lease = await lock.acquire();
            },
            async release() {
              await lease.release();
            },
          };
        },
        close: () => client.close(),
      };
    },
  },
  redlock: {
    label: `redlock ${require('redlock/package.json').version}`,
    settings: 'defaults (retryDelay 200 ms, retryJitter 100 ms) with retryCount -1 (never give up)',
    async open(url) {
      const Redlock = require('redlock');
      const redis = new Redis(url);
      const redlock = new Redlock([redis], { retryCount: -1 });
      redlock.on('clientError', () => {});
      return {
        lock(name) {
          let held = null;
          return {
            async acquire() {
              held = await redlock.lock(name, LEASE_MS);
            },
            async release() {
              await held.unlock();
            },
          };
        },
        close: async () => redis.quit(),
      };
    },
  },
  semaphore: {
    label: `redis-semaphore ${require('redis-semaphore/package.json').version} Mutex`,
    settings: 'defaults (retryInterval 10 ms, refresh every 0.8 x lockTimeout) with lockTimeout 10 s, acquireTimeout 60 s',
    async open(url) {
      const { Mutex } = require('redis-semaphore');
      const redis = new Redis(url);
      return {
        lock(name) {
          const mutex = new Mutex(redis, name, { lockTimeout: LEASE_MS, acquireTimeout: 60_000 });
          return {
            acquire: () => mutex.acquire(),
            release: () => mutex.release(),
          };
        },
        close: async () => redis.quit(),
      };
    },
  },
};

module.exports = { libs };
