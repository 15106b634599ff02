//! How the engine packs script calls into requests: batched into one pipeline by default,
//! one request per call with `split_pipelines` (Redis Cluster).

use lockgate_core::backend::redis::{EngineConfig, RequestKind};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Engine, LockOptions, Wait};

/// Two leases renewed in the same instant: the number of requests and commands per request.
fn renewal_requests(split: bool) -> Vec<usize> {
    let config = EngineConfig { split_pipelines: split, ..EngineConfig::default() };
    let mut engine = Engine::new(config, Box::new(SeededRandom::new(7))).unwrap();
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions::renewed_lease(Duration::from_secs(3));
    for name in ["a", "b"] {
        engine.acquire(t0, name, &opts, Wait::Try).unwrap();
    }
    let mut ids = Vec::new();
    while let Some(req) = engine.poll_request() {
        ids.push(req.id);
    }
    assert_eq!(ids.len(), 2, "one ACQUIRE request per lock (one input each)");
    for id in ids {
        let held = Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(3000)]);
        engine.handle_reply(t0, id, Ok(vec![held]));
    }
    while engine.poll_event().is_some() {}
    engine.handle_timeout(t0 + Duration::from_secs(1));
    let mut sizes = Vec::new();
    while let Some(req) = engine.poll_request() {
        match req.kind {
            RequestKind::Pipeline(commands) => sizes.push(commands.len()),
            other => panic!("unexpected request {other:?}"),
        }
    }
    sizes
}

#[test]
fn renewals_due_together_share_one_pipeline_by_default() {
    assert_eq!(renewal_requests(false), vec![2]);
}

#[test]
fn split_pipelines_sends_each_call_on_its_own() {
    assert_eq!(renewal_requests(true), vec![1, 1]);
}

/// A subscription refused for its credentials (wrong password, an ACL user without the right
/// to subscribe) ends every waiting acquire with AUTHENTICATION at once, instead of a TIMEOUT
/// that hides the cause (issue 13, item 10); a transient refusal keeps them waiting.
#[test]
fn a_refused_subscription_ends_waits_with_its_authentication_error() {
    use lockgate_core::{Error, ErrorKind, Event, Outcome};
    for (kind, ends) in [(ErrorKind::Authentication, true), (ErrorKind::Connection, false)] {
        let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(7))).unwrap();
        let t0 = Instant::from_origin(Duration::from_secs(1));
        let opts = LockOptions::renewed_lease(Duration::from_secs(3));
        let op = engine.acquire(t0, "a", &opts, Wait::For(Duration::from_secs(10))).unwrap();
        let sub = engine.poll_request().expect("the subscription comes first");
        assert!(matches!(sub.kind, RequestKind::Subscribe(_)), "{sub:?}");
        engine.handle_reply(t0, sub.id, Err(Error::new(kind, "NOPERM this user has no permissions to access the channel")));
        let mut ended = None;
        while let Some(ev) = engine.poll_event() {
            if let Event::Completed { op: done, outcome } = ev {
                assert_eq!(done, op);
                ended = Some(outcome);
            }
        }
        match (ends, ended) {
            (true, Some(Outcome::Failed(e))) => assert_eq!(e.kind(), ErrorKind::Authentication),
            (false, None) => {}
            (_, other) => panic!("{kind:?}: unexpected {other:?}"),
        }
    }
}

/// An engine holding one auto-renewed lease of `lease_ms` per name, each granted at its instant.
fn holding(grants: &[(&str, Instant)], lease_ms: u64) -> (Engine, Vec<lockgate_core::LeaseId>) {
    use lockgate_core::{Event, Outcome};
    let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(7))).unwrap();
    let opts = LockOptions::renewed_lease(Duration::from_millis(lease_ms));
    let mut leases = Vec::new();
    for &(name, at) in grants {
        engine.acquire(at, name, &opts, Wait::Try).unwrap();
        let req = engine.poll_request().expect("one ACQUIRE");
        let held = Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(lease_ms as i64)]);
        engine.handle_reply(at, req.id, Ok(vec![held]));
        match engine.poll_event() {
            Some(Event::Completed { outcome: Outcome::Acquired { lease, .. }, .. }) => leases.push(lease),
            other => panic!("unexpected {other:?}"),
        }
    }
    (engine, leases)
}

/// The commands of every request the engine emitted, per request.
fn pipelines(engine: &mut Engine) -> Vec<Vec<lockgate_core::backend::redis::Command>> {
    let mut out = Vec::new();
    while let Some(req) = engine.poll_request() {
        match req.kind {
            RequestKind::Pipeline(commands) => out.push(commands),
            other => panic!("unexpected request {other:?}"),
        }
    }
    out
}

/// A renewal due within a twelfth of the lease of one that falls due goes out with it, in the
/// same pipeline; one due later waits for its own turn, and the next timeout is its instant.
#[test]
fn renewals_due_within_a_twelfth_of_the_lease_join_the_one_due() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let ms = |n: u64| t0 + Duration::from_millis(n);
    // 3 s leases renew 1 s after their grant; the window is 250 ms.
    let (mut engine, _) = holding(&[("a", ms(0)), ("b", ms(200)), ("c", ms(400))], 3000);
    assert_eq!(engine.poll_timeout(), Some(ms(1000)), "a's renewal");
    engine.handle_timeout(ms(1000));
    let sent = pipelines(&mut engine);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].len(), 2, "a and b (due 200 ms later) share one pipeline; c is 400 ms away");
    assert_eq!(engine.poll_timeout(), Some(ms(1400)), "c's renewal is next");
    engine.handle_timeout(ms(1400));
    assert_eq!(pipelines(&mut engine).iter().map(Vec::len).collect::<Vec<_>>(), vec![1]);
}

/// `handle_timeout` called before anything is due, or twice for the same instant, sends nothing
/// and leaves the next timeout where it was.
#[test]
fn an_early_or_repeated_timeout_is_a_no_op() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let (mut engine, _) = holding(&[("a", ms(0))], 3000);
    for early in [0, 1, 500, 749] {
        engine.handle_timeout(ms(early));
        assert!(pipelines(&mut engine).is_empty(), "nothing is due at {early} ms");
        assert_eq!(engine.poll_timeout(), Some(ms(1000)));
    }
    engine.handle_timeout(ms(1000));
    assert_eq!(pipelines(&mut engine).len(), 1, "the renewal");
    engine.handle_timeout(ms(1000));
    assert!(pipelines(&mut engine).is_empty(), "the renewal is on the wire already");
    assert!(engine.poll_event().is_none());
}

/// The next timeout follows every change of a lease: an extend in flight caps its validity, its
/// confirmation moves the renewal, a release stops renewing (only the expiry is left), and the
/// release's reply leaves nothing to wake up for.
#[test]
fn the_next_timeout_follows_extends_and_releases() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let (mut engine, leases) = holding(&[("a", ms(0))], 3000);
    let lease = leases[0];
    assert_eq!(engine.poll_timeout(), Some(ms(1000)));
    engine.extend(ms(100), lease, Duration::from_millis(600)).unwrap();
    let req = engine.poll_request().expect("EXTEND");
    assert_eq!(engine.poll_timeout(), Some(ms(700)), "until answered, the extend may cut the lease to 700 ms");
    engine.handle_reply(ms(150), req.id, Ok(vec![Reply::Int(1)]));
    assert_eq!(engine.poll_timeout(), Some(ms(300)), "renewal a third into the 600 ms lease, from the send");
    let _ = engine.release(ms(160), lease);
    let req = engine.poll_request().expect("RELEASE");
    assert_eq!(engine.poll_timeout(), Some(ms(700)), "a releasing lease is not renewed, only expires");
    engine.handle_reply(ms(170), req.id, Ok(vec![Reply::Int(1)]));
    assert_eq!(engine.poll_timeout(), None);
    assert!(engine.is_idle());
}

/// A fixed lease granted shorter than asked (a handoff: the waiter's entry lease was left) is
/// topped up a third of the way in; an extend confirmed before that sets the lease's end
/// itself, and the top-up must not go out after it: it would stretch the extended lease, and
/// on SQL it re-extended a row the fixture had cut short (conformance `extend_never_resurrects`
/// on MariaDB, where the insert-and-read batch reports a millisecond or two less than asked).
#[test]
fn an_extend_supersedes_a_fixed_lease_top_up() {
    use lockgate_core::{Event, Outcome};
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(7))).unwrap();
    engine.acquire(t0, "a", &LockOptions::fixed_lease(Duration::from_millis(3000)), Wait::Try).unwrap();
    let req = engine.poll_request().expect("one ACQUIRE");
    let granted = Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(1500)]);
    engine.handle_reply(t0, req.id, Ok(vec![granted]));
    let lease = match engine.poll_event() {
        Some(Event::Completed { outcome: Outcome::Acquired { lease, .. }, .. }) => lease,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(engine.poll_timeout(), Some(ms(500)), "the top-up, a third into the 1,500 ms granted");
    engine.extend(ms(100), lease, Duration::from_millis(2000)).unwrap();
    let req = engine.poll_request().expect("EXTEND");
    engine.handle_reply(ms(110), req.id, Ok(vec![Reply::Int(1)]));
    engine.handle_timeout(ms(500));
    assert!(pipelines(&mut engine).is_empty(), "no top-up after the extend");
    let next = engine.poll_timeout().expect("the lease's expiry");
    assert!(next > ms(2000), "only the extended lease's end is left to wake up for, not {next:?}");
}
