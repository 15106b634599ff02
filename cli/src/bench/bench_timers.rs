//! Timer cost at 10,000 held leases (issue 14): what one `poll_timeout` and one
//! `handle_timeout` call cost in each engine, driven with virtual time and synthetic replies
//! (no server), so the figure is the engine's own bookkeeping and nothing else.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant as WallInstant;

use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redlock::{RedlockConfig, RedlockEngine};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Engine, EngineConfig, Event, LockOptions, RequestKind, Wait};

/// Held leases in every measurement.
pub const LEASES: usize = 10_000;
/// Calls per timed batch, and batches per figure (the median batch is reported).
const CALLS: u32 = 2_000;
const BATCHES: usize = 7;
/// Renewals (each answered) driven through `handle_timeout` for the renewal column.
const RENEWALS: usize = 2_000;
/// The leases' length: their renewals fall due from 20 s after each grant.
const LEASE: Duration = Duration::from_secs(60);
/// Every lease is held and nothing is due yet (grants run from 1 s to 11 s).
const QUIET_MS: u64 = 12_000;

/// Median per-call cost in nanoseconds of `BATCHES` batches of `CALLS` calls of `f`.
fn per_call_ns(mut f: impl FnMut(u32)) -> f64 {
    let mut batches: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = WallInstant::now();
            for i in 0..CALLS {
                f(i);
            }
            t.elapsed().as_secs_f64() * 1e9 / CALLS as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[BATCHES / 2]
}

fn at(ms: u64) -> Instant {
    Instant::from_origin(Duration::from_millis(ms))
}

/// The instant of the `i`th grant: 1 ms apart from 1 s on, so renewals come due spread out.
fn grant_at(i: usize) -> Instant {
    Instant::from_origin(Duration::from_secs(1) + Duration::from_millis(i as u64))
}

/// `ns` in the unit that keeps a few significant digits.
fn time(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else {
        format!("{:.1} µs", ns / 1_000.0)
    }
}

/// An engine holding `LEASES` auto-renewed leases of `LEASE`.
fn single_with_leases() -> Engine {
    let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(7))).expect("engine");
    let opts = LockOptions::renewed_lease(LEASE);
    for i in 0..LEASES {
        let now = grant_at(i);
        engine.acquire(now, &format!("lease-{i}"), &opts, Wait::Try).expect("acquire");
        let req = engine.poll_request().expect("one ACQUIRE per acquire");
        let held = Reply::Array(vec![Reply::Int(1), Reply::Data(b"1".to_vec()), Reply::Int(LEASE.as_millis() as i64)]);
        engine.handle_reply(now, req.id, Ok(vec![held]));
        while let Some(ev) = engine.poll_event() {
            assert!(matches!(ev, Event::Completed { .. }), "{ev:?}");
        }
    }
    engine
}

/// The same for Redlock over 3 masters (every master grants).
fn redlock_with_leases() -> RedlockEngine {
    let config = RedlockConfig { max_lease: LEASE, ..RedlockConfig::default() };
    let mut engine = RedlockEngine::new(config, Box::new(SeededRandom::new(7))).expect("engine");
    let opts = LockOptions::renewed_lease(LEASE);
    for i in 0..LEASES {
        let now = grant_at(i);
        engine.acquire(now, &format!("lease-{i}"), &opts, Wait::Try).expect("acquire");
        while let Some(req) = engine.poll_request() {
            engine.handle_reply(now, req.id, Ok(Reply::Int(1)));
        }
        while let Some(ev) = engine.poll_event() {
            assert!(matches!(ev, Event::Completed { .. }), "{ev:?}");
        }
    }
    engine
}

/// One engine's three figures: poll_timeout, handle_timeout with nothing due, and the cost per
/// lease renewed when renewals are driven as they come due (handle_timeout at poll_timeout's
/// instant, then the replies). The single-instance engine batches every renewal due within a
/// twelfth of the lease into one pipeline, Redlock renews each alone.
struct Figures {
    poll: f64,
    idle: f64,
    due: f64,
}

fn single_figures() -> Figures {
    let mut engine = single_with_leases();
    let quiet = at(QUIET_MS);
    let poll = per_call_ns(|_| {
        black_box(engine.poll_timeout());
    });
    let idle = per_call_ns(|i| {
        engine.handle_timeout(quiet + Duration::from_nanos(i as u64));
        assert!(engine.poll_request().is_none(), "nothing is due yet");
    });
    let t = WallInstant::now();
    let mut renewed = 0;
    while renewed < RENEWALS {
        let now = engine.poll_timeout().expect("leases keep timers");
        engine.handle_timeout(now);
        while let Some(req) = engine.poll_request() {
            let RequestKind::Pipeline(commands) = req.kind else { panic!("a renewal is a pipeline") };
            engine.handle_reply(now, req.id, Ok(vec![Reply::Int(1); commands.len()]));
        }
        while let Some(ev) = engine.poll_event() {
            assert!(matches!(ev, Event::Renewed { .. }), "{ev:?}");
            renewed += 1;
        }
    }
    let due = t.elapsed().as_secs_f64() * 1e9 / renewed as f64;
    Figures { poll, idle, due }
}

fn redlock_figures() -> Figures {
    let mut engine = redlock_with_leases();
    let quiet = at(QUIET_MS);
    let poll = per_call_ns(|_| {
        black_box(engine.poll_timeout());
    });
    let idle = per_call_ns(|i| {
        engine.handle_timeout(quiet + Duration::from_nanos(i as u64));
        assert!(engine.poll_request().is_none(), "nothing is due yet");
    });
    let t = WallInstant::now();
    let mut renewed = 0;
    while renewed < RENEWALS {
        let now = engine.poll_timeout().expect("leases keep timers");
        engine.handle_timeout(now);
        while let Some(req) = engine.poll_request() {
            engine.handle_reply(now, req.id, Ok(Reply::Int(1)));
        }
        while let Some(ev) = engine.poll_event() {
            assert!(matches!(ev, Event::Renewed { .. }), "{ev:?}");
            renewed += 1;
        }
    }
    let due = t.elapsed().as_secs_f64() * 1e9 / renewed as f64;
    Figures { poll, idle, due }
}

/// The markdown section: one row per engine.
pub fn run(command: &str) -> String {
    let mut md = format!(
        "\n### Timers at {LEASES} held leases (issue 14)\n\nCommand: `{command}`\n\n\
         Each engine holds {LEASES} auto-renewed {lease} s leases granted 1 ms apart, driven with virtual time and synthetic replies (no server). \
         Per call: `poll_timeout`, and `handle_timeout` when nothing is due (median of {BATCHES} batches of {CALLS} calls). \
         Last column: renewals driven as they fall due (`handle_timeout` at `poll_timeout`'s instant, then the replies) until {RENEWALS} leases were renewed, \
         wall time per lease renewed; the single-instance engine sends the renewals due within a twelfth of the lease as one pipeline, Redlock one round each.\n\n\
         | engine | poll_timeout | handle_timeout, nothing due | per lease renewed |\n|---|---|---|---|\n",
        lease = LEASE.as_secs()
    );
    for (name, f) in [("single-instance (`Engine`)", single_figures()), ("Redlock, 3 masters (`RedlockEngine`)", redlock_figures())] {
        let _ = writeln!(md, "| {name} | {} | {} | {} |", time(f.poll), time(f.idle), time(f.due));
    }
    md
}
