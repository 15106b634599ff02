'use strict';
// Telemetry through OpenTelemetry (issue 27): `instrumentOpenTelemetry()` records the core's
// metrics (the same instruments, attributes and values as every binding) and one
// `lockgate.acquire` span per ended acquire, read with the OpenTelemetry SDK's in-memory
// metric exporter and span exporter — a contended lock with a waiter, a timed-out wait and a
// lease lost to a key deleted behind its holder, on a password-protected server whose password
// must appear in no attribute.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality } = require('@opentelemetry/sdk-metrics');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const lockgate = require('..');
const { startRedis, sleep } = require('./helpers/redis-server');

const PASSWORD = 'otel-Hq2-secret-9z';
let redis;

before(async () => {
  redis = await startRedis(['--requirepass', PASSWORD]);
});

after(async () => {
  await redis.stop();
});

/** `name|attr=value,...` with the attributes sorted, as `points` keys them. */
const key = (name, attrs) => `${name}|${attrs.split(',').sort().join(',')}`;

/** { `name|attr=value,...`: data point } of every metric collected now. */
async function points(reader) {
  const { resourceMetrics } = await reader.collect();
  const out = {};
  for (const sm of resourceMetrics.scopeMetrics) {
    for (const m of sm.metrics) {
      for (const p of m.dataPoints) {
        const attrs = Object.entries(p.attributes).map(([k, v]) => `${k}=${v}`).sort().join(',');
        out[`${m.descriptor.name}|${attrs}`] = p;
      }
    }
  }
  return out;
}

test('a contended lock is measured and traced through OpenTelemetry', async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  lockgate.instrumentOpenTelemetry({ meterProvider, tracerProvider });
  const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
  const [a, b, c] = await Promise.all([lockgate.connect(url), lockgate.connect(url, { telemetryLockNames: true }), lockgate.connect(url)]);
  const base = 'lockgate.backend=redis,lockgate.primitive=mutex';
  const named = 'lockgate.backend=redis,lockgate.lock.name=otel,lockgate.primitive=mutex';
  let got;
  try {
    const first = await a.lock('otel', { leaseMs: 3000 }).acquire();
    const waiting = b.lock('otel', { leaseMs: 3000 }).acquire({ timeoutMs: 10_000 });
    await assert.rejects(c.lock('otel').acquire({ timeoutMs: 300 }), lockgate.TimeoutError);
    assert.equal(await first.release(), true);
    const second = await waiting;
    const lost = new Promise((resolve) => second.signal.addEventListener('abort', resolve, { once: true }));
    await redis.admin.del('lockgate:{otel}');
    await lost;
    for (let i = 0; i < 500; i++) {
      got = await points(reader);
      if (got[key('lockgate.lock.losses', `${named},lockgate.loss.reason=refused`)]) break;
      await sleep(10);
    }
  } finally {
    lockgate.uninstrumentOpenTelemetry();
    await Promise.all([a.close(), b.close(), c.close()]);
  }
  const at = (name, attrs) => {
    const p = got[key(name, attrs)];
    assert.ok(p, `no ${name} with ${attrs}: ${Object.keys(got).join('\n')}`);
    return p.value;
  };
  assert.equal(at('lockgate.lock.acquisitions', `${base},lockgate.outcome=granted`), 1);
  assert.equal(at('lockgate.lock.acquisitions', `${named},lockgate.outcome=granted`), 1);
  assert.equal(at('lockgate.lock.acquisitions', `${base},lockgate.outcome=timed_out`), 1);
  const timed = at('lockgate.lock.wait.duration', `${base},lockgate.outcome=timed_out`);
  assert.equal(timed.count, 1);
  assert.ok(timed.sum >= 0.3 && timed.sum < 2, `waited ${timed.sum} s`);
  const waited = at('lockgate.lock.wait.duration', `${named},lockgate.outcome=granted`);
  assert.ok(waited.count === 1 && waited.sum >= 0.29, `waited ${waited.sum} s`);
  assert.equal(at('lockgate.lock.hold.duration', `${base},lockgate.outcome=released`).count, 1);
  assert.equal(at('lockgate.lock.hold.duration', `${named},lockgate.outcome=lost`).count, 1);
  assert.equal(at('lockgate.lock.losses', `${named},lockgate.loss.reason=refused`), 1);
  assert.equal(at('lockgate.lock.held', base), 0);
  assert.equal(at('lockgate.lock.held', named), 0);
  assert.equal(at('lockgate.lock.waiting', base), 0);
  assert.ok(!JSON.stringify(Object.keys(got)).includes(PASSWORD));

  const finished = spans.getFinishedSpans();
  assert.deepEqual(finished.map((s) => s.attributes['lockgate.outcome']).sort(), ['granted', 'granted', 'timed_out']);
  const timedSpan = finished.find((s) => s.attributes['lockgate.outcome'] === 'timed_out');
  assert.equal(timedSpan.name, 'lockgate.acquire');
  assert.equal(timedSpan.status.code, 2 /* SpanStatusCode.ERROR */);
  const ms = (t) => t[0] * 1e3 + t[1] / 1e6;
  const took = ms(timedSpan.endTime) - ms(timedSpan.startTime);
  assert.ok(took >= 290 && took < 2000, `span of ${took} ms`);
  for (const s of finished) assert.ok(!JSON.stringify(s.attributes).includes(PASSWORD));
});
