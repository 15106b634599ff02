//! Handing a lease to another client in the engine (PROTOCOL.md §17), over the Redis backend
//! with scripted replies: the exporter's identity names its lock, fencing token and owner token;
//! the adopter confirms it with one EXTEND of that owner token (no ACQUIRE: no second grant) and
//! holds it with the identity's fencing token; a refused EXTEND is NOT_HELD and leaves nothing;
//! a malformed identity is INVALID_ARGUMENT with nothing sent.

use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::{EngineConfig, RequestKind};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Engine, ErrorKind, Event, LockOptions, Outcome, Wait};

fn engine(seed: u64) -> Engine {
    Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(seed))).unwrap()
}

/// The one request queued: its commands' arguments as strings.
fn one_request(engine: &mut Engine) -> (lockgate_core::RequestId, Vec<Vec<String>>) {
    let req = engine.poll_request().expect("a request");
    assert!(engine.poll_request().is_none(), "one request");
    let RequestKind::Pipeline(commands) = req.kind else { panic!("{:?}", req.kind) };
    let args = commands.iter().map(|c| c.0.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()).collect();
    (req.id, args)
}

fn completed(engine: &mut Engine) -> Outcome {
    let mut out = None;
    while let Some(ev) = engine.poll_event() {
        if let Event::Completed { outcome, .. } = ev {
            out = Some(outcome);
        }
    }
    out.expect("a completion")
}

#[test]
fn an_adopter_confirms_the_owner_token_and_holds_it_with_the_same_fence() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions::fixed_lease(Duration::from_secs(3));
    let mut holder = engine(1);
    holder.acquire(t0, "jobs/a", &opts, Wait::Try).unwrap();
    let (id, acquire) = one_request(&mut holder);
    holder.handle_reply(t0, id, Ok(vec![Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(3000)])]));
    let Outcome::Acquired { lease, .. } = completed(&mut holder) else { panic!() };
    let identity = holder.export(t0, lease).unwrap();
    assert!(identity.starts_with("lockgate-lease/1/mutex/7/") && identity.ends_with("/jobs/a"), "{identity}");

    let mut adopter = engine(2);
    let op = adopter.adopt(t0, &identity, &opts).unwrap();
    let (id, extend) = one_request(&mut adopter);
    let token = identity.split('/').nth(4).unwrap().to_string();
    assert!(acquire[0].contains(&token) && extend[0].contains(&token), "the holder's owner token: {acquire:?} {extend:?}");
    assert!(extend[0].contains(&"3000".to_string()), "extended to the adopter's lease: {extend:?}");
    adopter.handle_reply(t0, id, Ok(vec![Reply::Int(1)]));
    match completed(&mut adopter) {
        Outcome::Acquired { lease, fencing_token, .. } => {
            assert_eq!(fencing_token, 7);
            assert!(adopter.is_held(t0, lease));
            assert!(adopter.export(t0, lease).unwrap() == identity, "the same identity");
            let _ = adopter.release(t0, lease);
            let (_, release) = one_request(&mut adopter);
            assert!(release[0].contains(&token), "{release:?}");
        }
        other => panic!("{op:?}: {other:?}"),
    }
}

#[test]
fn a_stale_identity_is_not_held_and_a_malformed_one_sends_nothing() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions::fixed_lease(Duration::from_secs(3));
    let mut adopter = engine(3);
    adopter.adopt(t0, "lockgate-lease/1/semaphore.2/9/0123abcd/pool", &opts).unwrap();
    let (id, _) = one_request(&mut adopter);
    adopter.handle_reply(t0, id, Ok(vec![Reply::Int(0)]));
    match completed(&mut adopter) {
        Outcome::Failed(e) => assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(adopter.is_idle(), "nothing kept");
    for bad in ["", "lockgate-lease/1/mutex/9/a b/x", "lockgate-lease/1/leader/9/ab/x"] {
        assert_eq!(adopter.adopt(t0, bad, &opts).unwrap_err().kind(), ErrorKind::InvalidArgument, "{bad}");
    }
    assert!(adopter.poll_request().is_none());
}

#[test]
fn an_adopted_lease_is_told_like_any_lease_from_its_adoption() {
    use lockgate_core::engine::{Happened, TelemetryConfig};
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions::fixed_lease(Duration::from_secs(3));
    let mut adopter = engine(4);
    adopter.enable_telemetry(TelemetryConfig { backend: "redis", lock_names: true, held_too_long: None });
    adopter.adopt(t0, "lockgate-lease/1/mutex/7/0123abcd/jobs/b", &opts).unwrap();
    let (id, _) = one_request(&mut adopter);
    adopter.handle_reply(t0, id, Ok(vec![Reply::Int(1)]));
    let mut told = Vec::new();
    let mut lease = None;
    while let Some(ev) = adopter.poll_event() {
        match ev {
            Event::Telemetry(t) => told.push(t),
            Event::Completed { outcome: Outcome::Acquired { lease: l, .. }, .. } => lease = Some(l),
            other => panic!("{other:?}"),
        }
    }
    let lease = lease.expect("adopted");
    // No acquire events (nothing was acquired here), and the lease counts as held.
    assert_eq!(told.iter().map(|t| t.what.name()).collect::<Vec<_>>(), ["lease.adopted"]);
    assert!(matches!(told[0].what, Happened::Adopted { lease: l } if l == lease));
    assert_eq!((told[0].primitive, told[0].name.as_deref()), (Some("mutex"), Some("jobs/b")));
    let held: f64 = told[0].metric_updates().iter().filter(|u| u.instrument.name == "lockgate.lock.held").map(|u| u.value).sum();
    assert_eq!(held, 1.0);

    let t1 = t0 + Duration::from_secs(2);
    adopter.release(t1, lease);
    let (id, _) = one_request(&mut adopter);
    adopter.handle_reply(t1, id, Ok(vec![Reply::Int(1)]));
    let released: Vec<_> = std::iter::from_fn(|| adopter.poll_event())
        .filter_map(|ev| if let Event::Telemetry(t) = ev { Some(t) } else { None })
        .collect();
    assert_eq!(released.iter().map(|t| t.what.name()).collect::<Vec<_>>(), ["lease.released"]);
    assert!(matches!(released[0].what, Happened::Released { held, .. } if held == Duration::from_secs(2)), "held from the adoption: {:?}", released[0].what);
}
