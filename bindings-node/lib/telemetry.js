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

/** Every event the core raises, by its stable name (README "Telemetry"): the core's list. */
const EVENTS = Object.freeze(require('./wasm').telemetryEvents());

const channels = new Map(EVENTS.map((event) => [event, dc.channel(`lockgate.${event}`)]));
const all = [...channels.values()];

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

/** Publishes one event (`{ event, message, ... }` from the engine) on its channel. */
function publish(ev) {
  if (otel !== null && ev.metrics !== undefined) record(otel, ev);
  const c = channels.get(ev.event);
  if (c === undefined || !c.hasSubscribers) return;
  delete ev.metrics;
  delete ev.acquire;
  c.publish(ev);
}

/** Hands one event's metric updates and ended acquire to OpenTelemetry. */
function record({ instruments, tracer, SpanStatusCode }, ev) {
  for (const [name, value, attributes] of ev.metrics) instruments.get(name)(value, attributes);
  const a = ev.acquire;
  if (a === undefined) return;
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
