//! How the engine packs script calls into requests: batched into one pipeline by default,
//! one request per call with `split_pipelines` (Redis Cluster).

use lockgate_core::engine::{EngineConfig, RequestKind};
use lockgate_core::random::SeededRandom;
use lockgate_core::redis::reply::Reply;
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
