'use strict';
// The core's telemetry events (core/src/engine/telemetry.rs: one vocabulary for every binding)
// published on Node's `diagnostics_channel`, one channel per event, named as Node core names its
// Web Locks channels (`locks.request.grant`): `lockgate.acquire.granted`, `lockgate.lease.lost`,
// ... Nothing is computed while no channel has a subscriber: a driver turns its engine's
// telemetry on only once one has (`wanted()`), so a quiet process pays one check per input.

const dc = require('node:diagnostics_channel');

/** Every event the core raises, by its stable name (README "Telemetry"). */
const EVENTS = Object.freeze([
  'acquire.started',
  'acquire.granted',
  'acquire.not_acquired',
  'acquire.timed_out',
  'acquire.cancelled',
  'acquire.failed',
  'lease.released',
  'lease.extended',
  'lease.renewal_failed',
  'lease.at_risk',
  'lease.safe',
  'lease.held_too_long',
  'lease.lost',
  'connection.lost',
  'connection.restored',
  'session.expired',
]);

const channels = new Map(EVENTS.map((event) => [event, dc.channel(`lockgate.${event}`)]));
const all = [...channels.values()];

/** Whether any lockgate channel has a subscriber now. */
function wanted() {
  for (const c of all) if (c.hasSubscribers) return true;
  return false;
}

/** Publishes one event (`{ kind: 'telemetry', event, ... }` from the engine) on its channel. */
function publish(ev) {
  const c = channels.get(ev.event);
  if (c === undefined || !c.hasSubscribers) return;
  delete ev.kind;
  c.publish(ev);
}

/** The channel names, for users: `lockgate.<event>`. */
const CHANNELS = Object.freeze(EVENTS.map((event) => `lockgate.${event}`));

module.exports = { CHANNELS, wanted, publish };
