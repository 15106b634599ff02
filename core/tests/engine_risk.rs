//! Leases at risk on the Redis backends, in virtual time: a watchdog renewal that fails in
//! transport while the lease is still valid puts it at risk (told once per spell, however many
//! retries fail), the next confirmed renewal ends the spell (told as `Renewed`), and a spell
//! that outlasts the validity ends in `Lost`. ZooKeeper's sessions are in
//! `engine_zookeeper.rs`.

use lockgate_core::engine::{Backend, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redlock::{NodeRequest, RedlockConfig, RedlockEngine, RedlockOutcome};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Engine, EngineConfig, Error, ErrorKind, Event, LeaseId, LockOptions, Request, RequestKind, Wait};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn down() -> Error {
    Error::new(ErrorKind::Connection, "connection reset")
}

/// Answers every request `engine` has queued with `reply` until none is left; returns the
/// events it emitted, and how many requests were answered.
fn serve<B: Backend>(engine: &mut LockEngine<B>, now: Instant, reply: impl Fn(B::Request) -> (lockgate_core::RequestId, B::Reply)) -> (Vec<Event<B::Outcome>>, usize) {
    let mut n = 0;
    while let Some(req) = engine.poll_request() {
        let (id, r) = reply(req);
        engine.handle_reply(now, id, r);
        n += 1;
    }
    let mut events = Vec::new();
    while let Some(e) = engine.poll_event() {
        events.push(e);
    }
    (events, n)
}

/// The events that speak of risk: `"at risk"`, `"renewed"`, `"lost"`.
fn kinds<O>(events: &[Event<O>]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AtRisk { .. } => Some("at risk"),
            Event::Renewed { .. } => Some("renewed"),
            Event::Lost { .. } => Some("lost"),
            Event::Completed { .. } | Event::Telemetry(_) => None,
        })
        .collect()
}

/// Runs `engine`'s timers at `now` and answers what they send with `reply`.
fn tick<B: Backend>(engine: &mut LockEngine<B>, now: Instant, reply: impl Fn(B::Request) -> (lockgate_core::RequestId, B::Reply)) -> (Vec<Event<B::Outcome>>, usize) {
    engine.handle_timeout(now);
    serve(engine, now, reply)
}

fn redis_reply(ok: bool) -> impl Fn(Request) -> (lockgate_core::RequestId, Result<Vec<Reply>, Error>) {
    move |Request { id, kind }| match kind {
        RequestKind::Pipeline(commands) if ok => (id, Ok(commands.iter().map(|_| Reply::Int(1)).collect())),
        _ => (id, Err(down())),
    }
}

#[test]
fn a_redis_renewal_failing_in_transport_puts_the_lease_at_risk_once_until_one_succeeds() {
    let mut e = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(3))).unwrap();
    let t0 = Instant::from_origin(Duration::from_secs(1));
    e.acquire(t0, "a", &LockOptions::renewed_lease(Duration::from_secs(3)), Wait::Try).unwrap();
    let (events, _) = serve(&mut e, t0, |Request { id, .. }| {
        (id, Ok(vec![Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(3000)])]))
    });
    let lease = match &events[..] {
        [Event::Completed { outcome: lockgate_core::Outcome::Acquired { lease, .. }, .. }] => *lease,
        other => panic!("{other:?}"),
    };
    assert!(!e.is_at_risk(lease));

    // The renewal a third into the lease fails in transport: at risk, with the validity the
    // last confirmation gave.
    let (events, sent) = tick(&mut e, t0 + Duration::from_secs(1), redis_reply(false));
    assert_eq!(sent, 1);
    let valid = e.lease_valid_until(lease).unwrap();
    assert_eq!(events, [Event::AtRisk { lease, valid_until: valid }]);
    assert!(valid > t0 + Duration::from_secs(2), "the grant's validity: {valid:?}");
    assert!(e.is_at_risk(lease) && e.is_held(t0 + Duration::from_secs(1), lease));

    // Retries (every 300 ms: a tenth of the lease) fail too: told once per spell.
    let mut now = t0 + Duration::from_secs(1);
    for _ in 0..3 {
        now = now + ms(300);
        let (events, sent) = tick(&mut e, now, redis_reply(false));
        assert_eq!((kinds(&events), sent), (vec![], 1), "at {now:?}");
    }
    // The next one succeeds: safe again, told as a renewal.
    now = now + ms(300);
    let (events, _) = tick(&mut e, now, redis_reply(true));
    assert_eq!(kinds(&events), ["renewed"]);
    assert!(!e.is_at_risk(lease));

    // A new spell is told again, and one outlasting the validity ends in a loss.
    now = now + Duration::from_secs(1);
    let (events, _) = tick(&mut e, now, redis_reply(false));
    assert_eq!(kinds(&events), ["at risk"]);
    let mut all = Vec::new();
    for _ in 0..20 {
        now = now + ms(300);
        all.extend(tick(&mut e, now, redis_reply(false)).0);
    }
    assert_eq!(kinds(&all), ["lost"]);
    assert!(!e.is_at_risk(lease) && e.lease_valid_until(lease).is_none());
}

#[test]
fn a_redlock_renewal_without_a_majority_puts_the_lease_at_risk_until_one_has_it() {
    let config = RedlockConfig { masters: 3, ..RedlockConfig::default() };
    let mut e = RedlockEngine::new(config, Box::new(SeededRandom::new(5))).unwrap();
    let t0 = Instant::from_origin(Duration::from_secs(100));
    let all = |NodeRequest { id, .. }: NodeRequest| (id, Ok(Reply::Int(1)));
    e.acquire(t0, "a", &LockOptions::renewed_lease(Duration::from_secs(3)), Wait::Try).unwrap();
    let (events, _) = serve(&mut e, t0, all);
    let lease: LeaseId = match &events[..] {
        [Event::Completed { outcome: RedlockOutcome::Acquired { lease, .. }, .. }] => *lease,
        other => panic!("{other:?}"),
    };
    // Only one master of three answers the renewal: no majority, not refused either.
    let one = |NodeRequest { id, master, .. }: NodeRequest| (id, if master == 0 { Ok(Reply::Int(1)) } else { Err(down()) });
    let mut now = t0 + Duration::from_secs(1);
    let (events, sent) = tick(&mut e, now, one);
    assert_eq!((kinds(&events), sent), (vec!["at risk"], 3));
    assert!(e.is_at_risk(lease));
    now = now + ms(300);
    assert_eq!(kinds(&tick(&mut e, now, one).0), Vec::<&str>::new(), "once per spell");
    now = now + ms(300);
    assert_eq!(kinds(&tick(&mut e, now, all).0), ["renewed"]);
    assert!(!e.is_at_risk(lease) && e.is_held(now, lease));
}
