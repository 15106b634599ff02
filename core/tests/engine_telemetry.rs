//! The engine's telemetry events, in virtual time over the simulated Redis: a contended lock
//! with a holder, a waiter that gets it when the holder releases, a waiter that times out, and
//! a loss forced by deleting the lock behind its holder's back. Each client's telemetry is
//! asserted exactly (kinds, attributes, measurements); an engine without telemetry raises none.

mod sim;

use lockgate_core::engine::{Happened, LossReason, Telemetry, TelemetryConfig};
use lockgate_core::time::Duration;
use lockgate_core::{Event, LeaseId, LockOptions, OpId, Outcome, Wait};

use sim::redis::RedisSim as Sim;
use sim::NetConfig;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every telemetry event each client raised so far, in order.
fn telemetry(sim: &Sim, c: usize) -> Vec<Telemetry> {
    sim.clients[c]
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Telemetry(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn names(events: &[Telemetry]) -> Vec<&'static str> {
    events.iter().map(|t| t.what.name()).collect()
}

#[test]
fn a_contended_lock_raises_exactly_its_events() {
    let mut sim = Sim::new(1, NetConfig::fixed(ms(1)));
    let [a, b, c, quiet] = [sim.add_client(), sim.add_client(), sim.add_client(), sim.add_client()];
    for (client, lock_names) in [(a, true), (b, true), (c, false)] {
        sim.clients[client].engine.enable_telemetry(TelemetryConfig { backend: "redis", lock_names, held_too_long: None });
    }
    let lease = LockOptions::renewed_lease(ms(3000));

    // a holds the lock; b waits for it; c waits 200 ms and gives up.
    let op_a = sim.acquire(a, "orders", &lease, Wait::Try);
    sim.run_for(ms(50));
    let op_b = sim.acquire(b, "orders", &lease, Wait::For(Duration::from_secs(10)));
    let op_c = sim.acquire(c, "orders", &lease, Wait::For(ms(200)));
    let op_q = sim.acquire(quiet, "orders", &lease, Wait::Try);
    sim.run_for(ms(400));
    let lease_a = match sim.acquired(a, op_a) {
        Some((_, lease, _)) => lease,
        None => panic!("a did not get the lock"),
    };
    // a releases 450 ms after its grant: b gets the lock.
    sim.release(a, lease_a);
    sim.run_for(ms(100));
    let lease_b = LeaseId(op_b.0);
    assert!(sim.acquired(b, op_b).is_some(), "b was not granted");

    // The lock is deleted behind b's back: its next renewal is refused and the lease lost.
    let key = sim.keys("orders").lock;
    sim.delete_key(&key);
    sim.run_for(ms(1500));

    // a: started, granted at once (no queue), released after ~450 ms.
    let ta = telemetry(&sim, a);
    assert_eq!(names(&ta), ["acquire.started", "acquire.granted", "lease.released"], "{ta:#?}");
    for t in &ta {
        assert_eq!((t.backend, t.primitive, t.name.as_deref()), ("redis", Some("mutex"), Some("orders")));
    }
    assert_eq!(ta[0].what, Happened::AcquireStarted { op: op_a });
    match ta[1].what {
        Happened::Granted { op, lease, waited, queued } => {
            assert_eq!((op, lease, queued), (op_a, lease_a, false));
            assert!(waited <= ms(5), "one round trip: {waited:?}");
        }
        ref other => panic!("{other:?}"),
    }
    match ta[2].what {
        Happened::Released { lease, held } => {
            assert_eq!(lease, lease_a);
            assert!(held >= ms(440) && held <= ms(460), "{held:?}");
        }
        ref other => panic!("{other:?}"),
    }

    // b: queued behind a, granted when a released (~400 ms of waiting), lost when its next
    // renewal found the lock gone.
    let tb = telemetry(&sim, b);
    assert_eq!(names(&tb), ["acquire.started", "acquire.granted", "lease.lost"], "{tb:#?}");
    match tb[1].what {
        Happened::Granted { op, lease, waited, queued } => {
            assert_eq!((op, lease, queued), (op_b, lease_b, true));
            assert!(waited >= ms(395) && waited <= ms(410), "{waited:?}");
        }
        ref other => panic!("{other:?}"),
    }
    match tb[2].what {
        Happened::Lost { lease, reason, held } => {
            assert_eq!((lease, reason), (lease_b, LossReason::Refused));
            // At its first renewal after the deletion (~100 ms after the grant): a handed-off
            // grant is topped up early, a third into its short grant, else a third into 3 s.
            assert!(held > ms(100) && held <= ms(1010), "lost at the first renewal: {held:?}");
        }
        ref other => panic!("{other:?}"),
    }
    assert_eq!(tb[2].name.as_deref(), Some("orders"));

    // c: timed out after its 200 ms (plus the round trip that removed its queue entry), without
    // the lock's name (not opted in).
    let tc = telemetry(&sim, c);
    assert_eq!(names(&tc), ["acquire.started", "acquire.timed_out"], "{tc:#?}");
    match tc[1].what {
        Happened::TimedOut { op, waited } => {
            assert_eq!(op, op_c);
            assert!(waited >= ms(200) && waited <= ms(205), "{waited:?}");
        }
        ref other => panic!("{other:?}"),
    }
    assert!(tc.iter().all(|t| t.name.is_none() && t.backend == "redis" && t.primitive == Some("mutex")));

    // An engine whose driver did not turn telemetry on raises none (and its call completed).
    assert!(telemetry(&sim, quiet).is_empty());
    assert!(sim.clients[quiet].events.iter().any(|(_, e)| matches!(e, Event::Completed { op, outcome: Outcome::NotAcquired } if *op == op_q)));
}

#[test]
fn a_cancelled_wait_and_a_one_shot_miss_are_told_as_such() {
    let mut sim = Sim::new(2, NetConfig::fixed(ms(1)));
    let [a, b] = [sim.add_client(), sim.add_client()];
    sim.clients[b].engine.enable_telemetry(TelemetryConfig { backend: "redis", lock_names: false, held_too_long: None });
    let lease = LockOptions::fixed_lease(ms(5000));
    sim.acquire(a, "jobs", &lease, Wait::Try);
    sim.run_for(ms(20));
    let miss = sim.acquire(b, "jobs", &lease, Wait::Try);
    let wait = sim.acquire(b, "jobs", &lease, Wait::Forever);
    sim.run_for(ms(100));
    sim.cancel(b, wait);
    sim.run_for(ms(50));
    let tb = telemetry(&sim, b);
    let what: Vec<Happened> = tb.iter().map(|t| t.what.clone()).collect();
    assert_eq!(what.len(), 4, "{what:#?}");
    assert_eq!(what[0], Happened::AcquireStarted { op: miss });
    assert_eq!(what[1], Happened::AcquireStarted { op: wait });
    assert_eq!(what[2], Happened::NotAcquired { op: miss });
    match what[3] {
        Happened::Cancelled { op, waited } => {
            assert_eq!(op, wait);
            assert!(waited >= ms(100) && waited <= ms(105), "{waited:?}");
        }
        ref other => panic!("{other:?}"),
    }
    let _: OpId = miss;
}

mod engine_zk;

/// The names of the telemetry events in `events`.
fn told<O>(events: &[Event<O>]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Telemetry(t) => Some(t.what.name()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_zookeeper_session_tells_its_connection_its_spells_at_risk_and_its_expiry() {
    use lockgate_core::backend::zookeeper::{SessionEvent, ZkNotice};
    let mut w = engine_zk::World::new(1, Duration::from_secs(6));
    w.clients[0].enable_telemetry(TelemetryConfig { backend: "zookeeper", lock_names: false, held_too_long: None });
    let a = w.acquire(0, "a", &lockgate_core::Primitive::Mutex, &LockOptions::renewed_lease(Duration::from_secs(6)), Wait::Forever);
    let lease = w.acquired(0, a).0;

    // Disconnected, then reconnected within the session: lost and back, at risk then safe.
    w.cut_off[0] = true;
    w.clients[0].handle_notice(w.now, ZkNotice::Session(SessionEvent::Disconnected));
    w.settle();
    w.advance(ms(500));
    w.reconnect(0);
    // Disconnected again, and the session expires: its lease is lost with it.
    w.clients[0].handle_notice(w.now, ZkNotice::Session(SessionEvent::Disconnected));
    w.clients[0].handle_notice(w.now, ZkNotice::Session(SessionEvent::Expired));
    w.settle();

    assert_eq!(
        told(&w.events[0]),
        [
            "acquire.started",
            "acquire.granted",
            "connection.lost",
            "lease.at_risk",
            "connection.restored",
            "lease.safe",
            "connection.lost",
            "lease.at_risk",
            "session.expired",
            "lease.lost",
        ]
    );
    let telemetry: Vec<&Telemetry> = w.events[0].iter().filter_map(|e| if let Event::Telemetry(t) = e { Some(t) } else { None }).collect();
    // The connection's and session's events concern no one lock; the lease's carry its primitive.
    for t in &telemetry {
        let of_client = matches!(t.what, Happened::ConnectionLost | Happened::ConnectionRestored | Happened::SessionExpired);
        assert_eq!(t.primitive, if of_client { None } else { Some("mutex") }, "{t:?}");
        assert_eq!((t.backend, t.name.as_deref()), ("zookeeper", None));
    }
    assert_eq!(telemetry[3].what, Happened::AtRisk { lease });
    assert_eq!(telemetry[5].what, Happened::Safe { lease });
    assert!(matches!(telemetry[9].what, Happened::Lost { lease: l, reason: LossReason::SessionEnded, .. } if l == lease));
    // Its lease.lost comes before the loss itself, as every loss's does: a binding publishes it
    // before the loss signal's listeners run.
    let at = |want: fn(&Event<_>) -> bool| w.events[0].iter().position(want).unwrap();
    let told_lost = at(|e| matches!(e, Event::Telemetry(t) if matches!(t.what, Happened::Lost { .. })));
    assert!(told_lost < at(|e| matches!(e, Event::Lost { .. })), "{:?}", w.events[0]);
}

#[test]
fn a_lease_held_too_long_is_told_once_while_held() {
    let mut sim = Sim::new(3, NetConfig::fixed(ms(1)));
    let [a, b] = [sim.add_client(), sim.add_client()];
    let config = TelemetryConfig { backend: "redis", lock_names: true, held_too_long: Some(ms(2000)) };
    sim.clients[a].engine.enable_telemetry(config.clone());
    sim.clients[b].engine.enable_telemetry(config);
    let lease = LockOptions::renewed_lease(ms(900));
    let op_a = sim.acquire(a, "stuck", &lease, Wait::Try);
    let op_b = sim.acquire(b, "brief", &lease, Wait::Try);
    sim.run_for(ms(500));
    // b let go before its threshold: never told.
    let (_, lease_b, _) = sim.acquired(b, op_b).expect("b holds brief");
    sim.release(b, lease_b);
    // a keeps renewing well past 2 s: told once, at 2 s, still held.
    sim.run_for(ms(5000));
    let (_, lease_a, _) = sim.acquired(a, op_a).expect("a holds stuck");
    let ta = telemetry(&sim, a);
    assert_eq!(names(&ta), ["acquire.started", "acquire.granted", "lease.held_too_long"], "{ta:#?}");
    match ta[2].what {
        Happened::HeldTooLong { lease, held } => {
            assert_eq!(lease, lease_a);
            assert!(held >= ms(2000) && held <= ms(2010), "{held:?}");
        }
        ref other => panic!("{other:?}"),
    }
    assert!(ta[2].what.is_warning());
    assert_eq!(ta[2].name.as_deref(), Some("stuck"));
    assert_eq!(names(&telemetry(&sim, b)), ["acquire.started", "acquire.granted", "lease.released"]);
    // Released after being told: the release is told as usual, nothing more.
    sim.release(a, lease_a);
    sim.run_for(ms(100));
    assert_eq!(names(&telemetry(&sim, a))[3..], ["lease.released"]);
}
