//! A lock's shortest and longest hold (PROTOCOL.md §18), driven through the Redis engine in
//! virtual time: a release before `min_hold` is an EXTEND of what is left of it (the entry stays
//! on the server), one after it a RELEASE; renewals never ask past `max_hold`, and the lease then
//! ends as lost with the reason `max_hold`, its entry released for the next waiter.

use lockgate_core::backend::redis::mutex::{EXTEND, RELEASE};
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::{Command, EngineConfig, RequestKind};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::engine::{Happened, LossReason, TelemetryConfig};
use lockgate_core::{Engine, Event, LeaseId, LockOptions, Outcome, Wait};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The script calls the engine sent (sha1 and the last argument), answering each with `reply`.
fn drain(engine: &mut Engine, now: Instant, reply: impl Fn(&Command) -> Reply) -> Vec<(String, String)> {
    let mut sent = Vec::new();
    while let Some(req) = engine.poll_request() {
        let RequestKind::Pipeline(cmds) = req.kind else { panic!("unexpected {:?}", req.kind) };
        let replies = cmds.iter().map(&reply).collect();
        for c in &cmds {
            let arg = |i: usize| String::from_utf8_lossy(&c.0[i]).into_owned();
            sent.push((arg(1), arg(c.0.len() - 1)));
        }
        engine.handle_reply(now, req.id, Ok(replies));
    }
    sent
}

/// Grants every ACQUIRE (fence 7, the full lease), confirms everything else.
fn server(c: &Command) -> Reply {
    let sha = String::from_utf8_lossy(&c.0[1]).into_owned();
    if sha == EXTEND.sha1() || sha == RELEASE.sha1() {
        Reply::Int(1)
    } else {
        Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(600)])
    }
}

/// An engine holding `name` with `opts`, granted at `t0`.
fn held(opts: &LockOptions, t0: Instant) -> (Engine, LeaseId) {
    let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(3))).unwrap();
    engine.enable_telemetry(TelemetryConfig { backend: "redis", lock_names: false, held_too_long: None });
    let op = engine.acquire(t0, "h", opts, Wait::Try).unwrap();
    drain(&mut engine, t0, server);
    let mut lease = None;
    while let Some(ev) = engine.poll_event() {
        if let Event::Completed { op: done, outcome: Outcome::Acquired { lease: l, .. } } = ev {
            assert_eq!(done, op);
            lease = Some(l);
        }
    }
    (engine, lease.expect("granted"))
}

fn released(engine: &mut Engine) -> Option<bool> {
    let mut was = None;
    while let Some(ev) = engine.poll_event() {
        if let Event::Completed { outcome: Outcome::Released { was_held }, .. } = ev {
            was = Some(was_held);
        }
    }
    was
}

#[test]
fn a_release_before_min_hold_keeps_the_entry_until_then() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions { min_hold: Some(ms(800)), ..LockOptions::renewed_lease(ms(600)) };
    let (mut engine, lease) = held(&opts, t0);
    engine.release(t0 + ms(300), lease);
    let sent = drain(&mut engine, t0 + ms(300), server);
    assert_eq!(sent, [(EXTEND.sha1().to_string(), "500".to_string())], "an EXTEND of what is left, not a RELEASE");
    assert_eq!(released(&mut engine), Some(true));
    assert!(!engine.is_held(t0 + ms(300), lease) && engine.is_idle(), "the client forgets the lease");

    // After the shortest hold: an ordinary RELEASE.
    let (mut engine, lease) = held(&opts, t0);
    engine.release(t0 + ms(800), lease);
    let sent = drain(&mut engine, t0 + ms(800), server);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, RELEASE.sha1());
    assert_eq!(released(&mut engine), Some(true));

    // The EXTEND refused (the entry is no longer ours): a release of a lease not held.
    let (mut engine, lease) = held(&opts, t0);
    engine.release(t0 + ms(100), lease);
    drain(&mut engine, t0 + ms(100), |_| Reply::Int(0));
    assert_eq!(released(&mut engine), Some(false));
}

#[test]
fn max_hold_caps_renewals_and_ends_the_lease() {
    let t0 = Instant::from_origin(Duration::from_secs(1));
    let opts = LockOptions { max_hold: Some(ms(900)), ..LockOptions::renewed_lease(ms(600)) };
    let (mut engine, lease) = held(&opts, t0);
    assert!(engine.lease_valid_until(lease).unwrap() <= t0 + ms(600));
    let mut reason = None;
    let mut releases = 0;
    // The renewals a third of the way in ask for the lease, then only for what is left.
    let mut now = t0;
    let mut asked = Vec::new();
    let mut lost = None;
    while lost.is_none() && now < t0 + Duration::from_secs(3) {
        now = engine.poll_timeout().expect("a timer while held");
        engine.handle_timeout(now);
        for (sha, arg) in drain(&mut engine, now, server) {
            releases += usize::from(sha == RELEASE.sha1());
            if sha == EXTEND.sha1() {
                asked.push((now.saturating_duration_since(t0), arg));
            }
        }
        while let Some(ev) = engine.poll_event() {
            match ev {
                Event::Lost { lease: l, error } => {
                    assert_eq!(l, lease);
                    assert!(error.message().contains("max_hold"), "{error}");
                    lost = Some(now);
                }
                Event::Renewed { valid_until, .. } => assert!(valid_until <= t0 + ms(900)),
                Event::Telemetry(t) => {
                    if let Happened::Lost { reason: r, .. } = t.what {
                        reason = Some(r);
                    }
                }
                _ => {}
            }
        }
    }
    assert_eq!(asked, [(ms(200), "600".to_string()), (ms(400), "500".to_string())], "no renewal past max_hold");
    let at = lost.expect("the lease ended");
    assert!(at <= t0 + ms(900) && at >= t0 + ms(850), "lost at {:?}", at.saturating_duration_since(t0));
    assert!(!engine.is_held(at, lease));
    assert_eq!(reason, Some(LossReason::MaxHold));
    // Its entry is released for the next waiter (the loss's cleanup), at once.
    assert_eq!(releases, 1);
    assert!(engine.is_idle());
}
