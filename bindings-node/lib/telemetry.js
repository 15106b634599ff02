'use strict';
// The core's telemetry events (core/src/engine/telemetry.rs: one vocabulary for every binding)
// published on Node's `diagnostics_channel`, one channel per event, named as Node core names its
// Web Locks channels (`locks.request.grant`): `lockgate.acquire.granted`, `lockgate.lease.lost`,
// ... Nothing is computed while no channel has a subscriber: a driver turns its engine's
// telemetry on only once one has (`wanted()`), so a quiet process pays one check per input.
//
// `instrument()` also records the core's metrics (the same instruments, attributes and values
// as every binding) and a `lockgate.acquire` span per acquire that ended through
// OpenTelemetry's API (`@opentelemetry/api`, an optional peer dependency loaded only then).

const dc = require('node:diagnostics_channel');

/**
 * Every kind of event the core raises (README "Telemetry"), in the order its compact rows refer
 * to them: its stable name, the core's one-line text, whether it is a warning, its measurement
 * keys, and its channel.
 */
const KINDS = require('./wasm')
  .telemetryEvents()
  .map(([event, message, warning, keys]) => ({ event, message, warning, keys, channel: dc.channel(`lockgate.${event}`) }));
const EVENTS = Object.freeze(KINDS.map((k) => k.event));
const all = KINDS.map((k) => k.channel);

/** OpenTelemetry's recorders while instrumented: each instrument's record function, the tracer. */
let otel = null;

/** Whether any lockgate channel has a subscriber now, or OpenTelemetry is instrumented. */
function wanted() {
  if (otel !== null) return true;
  for (const c of all) if (c.hasSubscribers) return true;
  return false;
}

/** Whether the engine's events must carry their metric updates and ended acquire. */
function instrumented() {
  return otel !== null;
}

/**
 * Publishes one event from its compact row (the core's `telemetry_row`: `[kind, backend,
 * primitive, lock, measurements, metrics?, acquire?]`) on its channel, as `{ event, message,
 * warning, backend, primitive?, lock?, ...measurements }`.
 */
function publish(row) {
  if (otel !== null && row.length > 5) record(otel, row[5], row[6]);
  const kind = KINDS[row[0]];
  if (kind === undefined || !kind.channel.hasSubscribers) return;
  const ev = { event: kind.event, message: kind.message, warning: kind.warning, backend: row[1] };
  if (row[2] !== null) ev.primitive = row[2];
  if (row[3] !== null) ev.lock = row[3];
  const values = row[4];
  for (let i = 0; i < values.length; i++) ev[kind.keys[i]] = values[i];
  kind.channel.publish(ev);
}

/** Hands one event's metric updates and the acquire it ended (or null) to OpenTelemetry. */
function record({ instruments, tracer, SpanStatusCode }, metrics, a) {
  for (const [name, value, attributes] of metrics) instruments.get(name)(value, attributes);
  if (a === null) return;
  const end = Date.now();
  const span = tracer.startSpan('lockgate.acquire', { startTime: end - a.waitMs, attributes: a.attributes });
  if (a.error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: a.error });
  span.end(end);
}

/**
 * Records every client's metrics and acquire spans through OpenTelemetry, with the given
 * providers (default: the global ones `@opentelemetry/api` hands out).
 */
function instrument({ meterProvider, tracerProvider } = {}) {
  let api;
  try {
    api = require('@opentelemetry/api');
  } catch (err) {
    const e = require('./errors').makeError('UNSUPPORTED', 'lockgate telemetry through OpenTelemetry needs its API: npm install @opentelemetry/api');
    e.cause = err;
    throw e;
  }
  const { version } = require('../package.json');
  const meter = (meterProvider ?? api.metrics.getMeterProvider()).getMeter('lockgate', version);
  const tracer = (tracerProvider ?? api.trace.getTracerProvider()).getTracer('lockgate', version);
  const instruments = new Map();
  for (const [name, kind, unit, description] of require('./wasm').metricInstruments()) {
    const options = { unit, description };
    if (kind === 'histogram') {
      const h = meter.createHistogram(name, options);
      instruments.set(name, (v, attrs) => h.record(v, attrs));
    } else {
      const c = kind === 'counter' ? meter.createCounter(name, options) : meter.createUpDownCounter(name, options);
      instruments.set(name, (v, attrs) => c.add(v, attrs));
    }
  }
  otel = { instruments, tracer, SpanStatusCode: api.SpanStatusCode };
}

/** Stops recording through OpenTelemetry. */
function uninstrument() {
  otel = null;
}

/** The channel names, for users: `lockgate.<event>`. */
const CHANNELS = Object.freeze(EVENTS.map((event) => `lockgate.${event}`));

module.exports = { CHANNELS, wanted, instrumented, publish, instrument, uninstrument };
