//! Deterministic simulation tests of the lock engine: virtual time, a simulated Redis that runs
//! the three scripts, a lossy network, crashing clients and restarting servers. No sleeps, no
//! server, no async runtime; every run is fixed by its seed.
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation`.

mod sim;

use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{ErrorKind, Event, LockOptions, OpId, Outcome, Primitive, RequestKind, Wait};

use sim::harness::ClientId;
use sim::net::Rng;
use sim::redis::script_of;
use sim::store::Value;
use sim::workload::{Runner, Workload};
use sim::redis::RedisSim as Sim;
use sim::redis_check as check;
use sim::{Isolation, NetConfig};

/// Seeds per property; `LOCKGATE_SIM_SEEDS=5000` explores further.
fn seeds() -> u64 {
    std::env::var("LOCKGATE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A network whose latency bounds vary with the seed (always well below the leases used).
fn net_for(seed: u64) -> NetConfig {
    let mut rng = Rng::new(seed ^ 0xBEEF);
    let max = Duration::from_micros(rng.between(100, 5_000));
    let nmax = Duration::from_micros(rng.between(100, 5_000));
    NetConfig {
        latency: (Duration::from_micros(50), max),
        notify_latency: (Duration::from_micros(50), nmax),
        ..NetConfig::default()
    }
}

/// Runs until `op` completes (or panics after `within`).
fn outcome_of(sim: &mut Sim, c: ClientId, op: OpId, within: Duration) -> (Instant, Outcome) {
    let limit = sim.now + within;
    assert!(
        sim.run_until(limit, |s| s.outcome(c, op).is_some()),
        "op {op:?} of client {c} did not complete within {within:?}"
    );
    sim.outcome(c, op).expect("just checked")
}

fn acquired_now(
    sim: &mut Sim,
    c: ClientId,
    name: &str,
    opts: &LockOptions,
) -> (Instant, lockgate_core::LeaseId, u64) {
    let op = sim.acquire(c, name, opts, Wait::Try);
    match outcome_of(sim, c, op, Duration::from_secs(1)) {
        (
            at,
            Outcome::Acquired {
                lease,
                fencing_token,
                ..
            },
        ) => (at, lease, fencing_token),
        other => panic!("expected to acquire {name}: {other:?}"),
    }
}

/// Instant at which the server's lock key stopped holding the grant with `fence` (its expiry
/// unless deleted first).
fn server_end_of_grant(sim: &Sim, name: &str, fence: u64) -> Instant {
    let key = sim.keys(name).lock;
    let g = sim
        .server
        .grants
        .iter()
        .find(|g| g.key == key && g.fence == fence)
        .expect("grant exists");
    sim.server
        .store
        .holdings(&key, &g.token)
        .iter()
        .map(|h| h.1)
        .max()
        .expect("held once")
}

/// Instant at which the server granted the lock with `fence`.
fn grant_time(sim: &Sim, name: &str, fence: u64) -> Instant {
    let key = sim.keys(name).lock;
    sim.server
        .grants
        .iter()
        .find(|g| g.key == key && g.fence == fence)
        .expect("grant exists")
        .at
}

/// Members of the wait queue of `name` (and asserts the waiters hash matches it).
fn queue_members(sim: &mut Sim, name: &str) -> Vec<String> {
    let k = sim.keys(name);
    let now = sim.now;
    sim.server.store.set_now(now);
    let queue = match sim.server.store.value(&k.queue) {
        None => vec![],
        Some(Value::Zset(z)) => z.into_iter().map(|(_, m)| m).collect(),
        other => panic!("queue is {other:?}"),
    };
    let mut waiters = match sim.server.store.value(&k.waiters) {
        None => vec![],
        Some(Value::Hash(h)) => h.into_keys().collect(),
        other => panic!("waiters is {other:?}"),
    };
    let mut sorted = queue.clone();
    sorted.sort();
    waiters.sort();
    assert_eq!(sorted, waiters, "queue and waiters hash disagree");
    queue
}

fn release_all(sim: &mut Sim, c: ClientId) {
    sim.shutdown(c);
    sim.settle(Duration::from_secs(30));
}

// ---------------------------------------------------------------------------------------------
// Random contention

// Mutual exclusion, beliefs within server leases and increasing fences under random contention.
#[test]
fn contention_is_safe() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let mut runner = Runner::new(&mut sim, Workload::default(), seed);
        runner.run(&mut sim);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
        assert!(
            runner.stats.acquired > 0,
            "seed {seed}: nothing was acquired"
        );
    }
}

// The same safety properties when replies, requests and pushed grants get lost.
#[test]
fn contention_on_a_lossy_network_is_safe() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed).lossy(0.05, 0.05, 0.2));
        let mut runner = Runner::new(&mut sim, Workload::default(), seed);
        runner.run(&mut sim);
        check::safety(&sim);
        // A cleanup gives up after a few lost attempts (its key then expires by itself, at most
        // one extend (2 × 200 ms) or entry TTL (400 ms) later): nothing may outlive that.
        sim.run_for(ms(800));
        check::no_lock_state_left(&mut sim);
    }
}

// Crashing holders and waiters never break safety; their leftovers expire on the server.
#[test]
fn contention_with_crashes_is_safe() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let cfg = Workload {
            clients: 6,
            p_crash: 0.15,
            ..Workload::default()
        };
        let mut runner = Runner::new(&mut sim, cfg, seed);
        runner.run(&mut sim);
        check::safety(&sim);
        // Leases and queue entries of crashed clients expire by themselves.
        sim.run_for(Duration::from_secs(2));
        check::no_lock_state_left(&mut sim);
    }
}

// Dropped notification connections (re-subscribe and re-check) never break safety or leave state behind.
#[test]
fn contention_with_notification_disconnects_is_safe() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let mut rng = Rng::new(seed);
        let mut runner = Runner::new(&mut sim, Workload::default(), seed);
        let clients = sim.clients.len();
        let mut drops: Vec<(Instant, usize)> = (0..6)
            .map(|_| {
                (
                    sim.now + ms(rng.between(0, 2000)),
                    rng.between(0, clients as u64 - 1) as usize,
                )
            })
            .collect();
        drops.iter().for_each(|d| sim.wake_at(d.0));
        runner.run_with(&mut sim, |s| {
            drops.retain(|&(t, c)| {
                if s.now >= t && !s.clients[c].crashed {
                    s.drop_notification_connection(c);
                }
                s.now < t
            });
        });
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// A grant notification delayed past a later "busy" reply must not be trusted: a waiter's
// re-check reply is lost, its handoff grant expires unseen, it re-queues (busy, new lower bound),
// then the old `granted` message arrives. The busy reply's fence marks it stale.
#[test]
fn delayed_grant_notifications_never_break_mutual_exclusion() {
    for seed in 0..seeds() {
        let mut net = net_for(seed).lossy(0.1, 0.0, 0.0);
        net.notify_latency = (ms(1), ms(80));
        let mut sim = Sim::new(seed, net);
        let mut runner = Runner::new(&mut sim, Workload::default(), seed);
        runner.run(&mut sim);
        check::safety(&sim);
    }
}

// ---------------------------------------------------------------------------------------------
// Expiry, lost notifications, renewal failure, crashes

// A lease that is neither renewed nor released frees the lock for a waiter right after it expires.
#[test]
fn expiry_frees_the_lock_for_a_waiter() {
    for seed in 0..seeds() {
        let net = net_for(seed);
        let slack = net.max_latency() * 3 + ms(2);
        let mut sim = Sim::new(seed, net);
        let mut rng = Rng::new(seed);
        let [a, b] = [sim.add_client(), sim.add_client()];
        let lease = ms(rng.between(50, 500));
        let (_, _, fence) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(lease));
        let opts = LockOptions::fixed_lease(ms(100)).with_entry_ttl(ms(rng.between(100, 3000)));
        let op = sim.acquire(b, "r", &opts, Wait::Forever);
        let (at, out) = outcome_of(&mut sim, b, op, lease * 3);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        let expired = server_end_of_grant(&sim, "r", fence);
        assert!(
            at <= expired + slack,
            "seed {seed}: acquired at {at:?}, holder's lease ended at {expired:?}"
        );
        release_all(&mut sim, b);
        sim.settle(Duration::from_secs(1));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// A lost grant notification delays the waiter by at most one re-check interval, and never past the holder's lease.
#[test]
fn lost_notification_only_delays_the_waiter_until_its_recheck() {
    let mut handoffs_lost = 0;
    for seed in 0..seeds() {
        let net = net_for(seed);
        let slack = net.max_latency() * 4 + ms(2);
        let mut sim = Sim::new(seed, net.lossy(0.0, 0.0, 1.0));
        let mut rng = Rng::new(seed);
        let [a, b] = [sim.add_client(), sim.add_client()];
        let lease = ms(rng.between(100, 1000));
        let (acquired_at, lease_a, fence) =
            acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(lease));
        let entry_ttl = ms(rng.between(100, 3000));
        let opts = LockOptions::fixed_lease(lease).with_entry_ttl(entry_ttl);
        let recheck = (entry_ttl / 3).min(lease / 3);
        let op = sim.acquire(b, "r", &opts, Wait::Forever);
        let release_at = acquired_at + lease * rng.between(5, 150) as u32 / 100;
        // Without the release, the server would free the lock by then.
        let lease_end = grant_time(&sim, "r", fence) + lease + ms(1);
        let dropped_before = sim.dropped_notifications;
        let bound = if sim.run_until(release_at, |s| s.outcome(b, op).is_some()) {
            lease_end + slack // The lease ran out before the release.
        } else {
            let released_at = sim.now;
            sim.release(a, lease_a);
            (released_at + recheck).min(lease_end) + slack
        };
        let (at, out) = outcome_of(&mut sim, b, op, lease * 2);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        assert!(
            at <= bound,
            "seed {seed}: acquired at {at:?}, later than {bound:?} (recheck {recheck:?})"
        );
        handoffs_lost += usize::from(sim.dropped_notifications > dropped_before);
        release_all(&mut sim, b);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
    assert!(
        handoffs_lost > seeds() as usize / 2,
        "too few handoffs were lost: {handoffs_lost}"
    );
}

// When renewals get no replies, the holder learns Event::Lost no later than its valid_until.
#[test]
fn renewal_failure_reports_lost_before_valid_until() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let mut rng = Rng::new(seed);
        let [a, b] = [sim.add_client(), sim.add_client()];
        let lease = ms(rng.between(30, 500));
        let (acquired_at, lease_a, _) =
            acquired_now(&mut sim, a, "r", &LockOptions::renewed_lease(lease));
        let waiter = sim.acquire(b, "r", &LockOptions::fixed_lease(ms(50)), Wait::Forever);
        sim.run_until(
            acquired_at + lease * rng.between(0, 300) as u32 / 100,
            |_| false,
        );
        let mode = if seed % 2 == 0 {
            Isolation::DropReplies
        } else {
            Isolation::DropRequests
        };
        sim.isolated.insert(a, mode);
        let limit = sim.now + lease * 3;
        let lost = |s: &Sim| {
            s.clients[a]
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a))
        };
        assert!(sim.run_until(limit, lost), "seed {seed}: no Lost event");
        let (lost_at, _) = sim.clients[a]
            .events
            .iter()
            .find(|(_, e)| matches!(e, Event::Lost { .. }))
            .expect("lost")
            .clone();
        let believed = sim.beliefs.iter().find(|x| x.client == a).expect("belief");
        let valid_until = believed.claims.last().expect("claim").1;
        assert!(
            lost_at <= valid_until,
            "seed {seed}: Lost at {lost_at:?} after valid_until {valid_until:?}"
        );
        // The waiter gets the lock once the server lets go of it.
        let (_, out) = outcome_of(&mut sim, b, waiter, lease * 3);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        release_all(&mut sim, b);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// After the holder crashes, the next waiter acquires within one lease of the crash.
#[test]
fn holder_crash_lets_the_next_waiter_in_within_one_lease() {
    for seed in 0..seeds() {
        let net = net_for(seed);
        let slack = net.max_latency() * 4 + ms(2);
        let mut sim = Sim::new(seed, net);
        let mut rng = Rng::new(seed);
        let [a, b] = [sim.add_client(), sim.add_client()];
        let lease = ms(rng.between(50, 1000));
        let (acquired_at, _, _) =
            acquired_now(&mut sim, a, "r", &LockOptions::renewed_lease(lease));
        let opts = LockOptions::renewed_lease(ms(200)).with_entry_ttl(ms(rng.between(100, 3000)));
        let op = sim.acquire(b, "r", &opts, Wait::Forever);
        sim.run_until(
            acquired_at + lease * rng.between(0, 300) as u32 / 100,
            |_| false,
        );
        assert!(
            sim.outcome(b, op).is_none(),
            "seed {seed}: acquired while held by a live holder"
        );
        let crashed_at = sim.now;
        sim.crash(a);
        let (at, out) = outcome_of(&mut sim, b, op, lease * 2);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        assert!(
            at <= crashed_at + lease + slack,
            "seed {seed}: acquired {:?} after the crash",
            at.saturating_duration_since(crashed_at)
        );
        release_all(&mut sim, b);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// ---------------------------------------------------------------------------------------------
// Fencing and server restarts

// Fencing tokens strictly increase over all grants, across restarts without persistence.
#[test]
fn fences_increase_across_restarts_without_persistence() {
    for seed in 0..seeds() / 2 {
        let mut sim = Sim::new(seed, net_for(seed));
        let mut rng = Rng::new(seed);
        let mut runner = Runner::new(
            &mut sim,
            Workload {
                duration: ms(1500),
                ..Workload::default()
            },
            seed,
        );
        let restarts: Vec<(Instant, bool)> = (0..3)
            .map(|_| (sim.now + ms(rng.between(100, 1400)), rng.chance(0.5)))
            .collect();
        restarts.iter().for_each(|(t, _)| sim.wake_at(*t));
        let mut pending = restarts.clone();
        runner.run_with(&mut sim, |s| {
            pending.retain(|&(t, drop)| {
                if s.now >= t {
                    s.restart_server(drop, Duration::ZERO);
                }
                s.now < t
            });
        });
        check::fences_increase(&sim);
        let last_restart = restarts.iter().map(|r| r.0).max().expect("three restarts");
        let after: Vec<_> = sim
            .server
            .executed
            .iter()
            .filter(|e| e.at >= last_restart)
            .collect();
        assert!(
            after.iter().any(|e| e.full),
            "seed {seed}: no EVAL after the restart"
        );
        assert!(
            after.iter().all(|e| !matches!(e.reply, Reply::Error(_))),
            "seed {seed}: a script failed"
        );
        sim.run_for(Duration::from_secs(2));
        check::no_lock_state_left(&mut sim);
    }
}

// After a restart the engine answers NOSCRIPT with EVAL: the holder learns it lost the lock, a waiter gets it with a larger fence.
#[test]
fn restart_is_answered_with_eval_and_fences_keep_increasing() {
    for seed in 0..seeds() / 4 {
        let drop_connections = seed % 2 == 0;
        let mut sim = Sim::new(seed, net_for(seed));
        let [a, b] = [sim.add_client(), sim.add_client()];
        let (_, lease_a, fence_a) =
            acquired_now(&mut sim, a, "r", &LockOptions::renewed_lease(ms(300)));
        let op = sim.acquire(b, "r", &LockOptions::renewed_lease(ms(300)), Wait::Forever);
        sim.run_for(ms(250));
        let noscript_before = sim.server.noscript;
        sim.restart_server(drop_connections, Duration::ZERO);
        let restarted_at = sim.now;
        let (_, out) = outcome_of(&mut sim, b, op, Duration::from_secs(1));
        let Outcome::Acquired { fencing_token, .. } = out else {
            panic!("seed {seed}: {out:?}")
        };
        assert!(
            fencing_token > fence_a,
            "seed {seed}: fence {fencing_token} after restart <= {fence_a}"
        );
        assert!(
            sim.server.noscript > noscript_before,
            "seed {seed}: no NOSCRIPT after restart"
        );
        let lost = sim.run_until(sim.now + Duration::from_secs(1), |s| {
            s.clients[a]
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a))
        });
        assert!(
            lost,
            "seed {seed}: the old holder never learned it lost the lock"
        );
        let evals = sim
            .server
            .executed
            .iter()
            .filter(|e| e.at >= restarted_at && e.full)
            .count();
        assert!(
            evals >= 2,
            "seed {seed}: expected EVAL of acquire and extend, got {evals}"
        );
        release_all(&mut sim, b);
        release_all(&mut sim, a);
        check::fences_increase(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// ---------------------------------------------------------------------------------------------
// Try, timeout, cancel, FIFO handoff

// try-acquire on a held lock gives NotAcquired and leaves no queue entry.
#[test]
fn try_acquire_on_a_held_lock_is_not_acquired_and_leaves_no_queue_entry() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let [a, b, c] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let (_, lease_a, _) = acquired_now(&mut sim, a, "r", &LockOptions::renewed_lease(ms(200)));
        let with_waiter = seed % 2 == 0;
        let waiter =
            with_waiter.then(|| sim.acquire(c, "r", &LockOptions::default(), Wait::Forever));
        sim.run_for(ms(20));
        let op = sim.acquire(b, "r", &LockOptions::default(), Wait::Try);
        let (_, out) = outcome_of(&mut sim, b, op, ms(100));
        assert_eq!(out, Outcome::NotAcquired, "seed {seed}");
        assert!(
            sim.clients[b].engine.is_idle(),
            "seed {seed}: try left work behind"
        );
        assert_eq!(
            queue_members(&mut sim, "r").len(),
            usize::from(with_waiter),
            "seed {seed}"
        );
        sim.release(a, lease_a);
        if let Some(w) = waiter {
            let (_, out) = outcome_of(&mut sim, c, w, ms(100));
            assert!(
                matches!(out, Outcome::Acquired { .. }),
                "seed {seed}: {out:?}"
            );
            release_all(&mut sim, c);
        }
        sim.settle(ms(500));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Abandon {
    Timeout,
    Cancel,
}

/// A waiter gives up (deadline or cancel) around the instant the holder releases, so the
/// grant sometimes races the abandonment. Returns (abandoned cleanly, raced a grant).
fn abandon_scenario(seed: u64, how: Abandon) -> (bool, bool) {
    let net = net_for(seed);
    let mut sim = Sim::new(seed, net.clone());
    let mut rng = Rng::new(seed);
    let [a, b] = [sim.add_client(), sim.add_client()];
    let (_, lease_a, _) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(1000)));
    let patience = ms(rng.between(20, 200));
    let wait = if how == Abandon::Timeout {
        Wait::For(patience)
    } else {
        Wait::Forever
    };
    let started = sim.now;
    let op = sim.acquire(b, "r", &LockOptions::renewed_lease(ms(300)), wait);
    let give_up_at = started + patience;
    // Release anywhere from a little before to a little after the waiter gives up.
    let spread = net.max_latency() * 3;
    let release_at =
        give_up_at - spread + Duration::from_micros(rng.between(0, 2 * spread.as_micros() as u64));
    sim.wake_at(release_at);
    sim.wake_at(give_up_at);
    let mut released = false;
    let mut cancelled = false;
    while sim.outcome(b, op).is_none() || !released {
        if !released && sim.now >= release_at {
            sim.release(a, lease_a);
            released = true;
        }
        if how == Abandon::Cancel && !cancelled && sim.now >= give_up_at {
            sim.cancel(b, op);
            cancelled = true;
        }
        assert!(
            sim.step(started + Duration::from_secs(5)),
            "seed {seed}: stuck"
        );
    }
    let (_, out) = sim.outcome(b, op).expect("completed");
    let expected = if how == Abandon::Timeout {
        ErrorKind::Timeout
    } else {
        ErrorKind::Cancelled
    };
    let abandoned = match &out {
        Outcome::Failed(e) => {
            assert_eq!(e.kind(), expected, "seed {seed}: {e}");
            true
        }
        Outcome::Acquired { lease, .. } => {
            let lease = *lease;
            sim.release(b, lease);
            false
        }
        other => panic!("seed {seed}: {other:?}"),
    };
    let key = sim.keys("r").lock;
    let b_tokens: Vec<String> = sim
        .server
        .grants
        .iter()
        .filter(|g| g.key == key && g.promoted)
        .map(|g| g.token.clone())
        .collect();
    sim.settle(Duration::from_secs(5));
    assert!(
        queue_members(&mut sim, "r").is_empty(),
        "seed {seed}: queue not empty"
    );
    check::safety(&sim);
    check::no_lock_state_left(&mut sim);
    (abandoned, abandoned && !b_tokens.is_empty())
}

// A waiter that times out gets TIMEOUT and leaves nothing on the server, even when a grant raced the timeout.
#[test]
fn waiter_timeout_fails_with_timeout_and_leaves_nothing() {
    let results: Vec<(bool, bool)> = (0..seeds())
        .map(|s| abandon_scenario(s, Abandon::Timeout))
        .collect();
    assert!(
        results.iter().any(|r| r.0) && results.iter().any(|r| !r.0),
        "both outcomes should occur"
    );
    assert!(
        results.iter().any(|r| r.1),
        "no seed raced a grant against the timeout"
    );
}

// A cancelled waiter gets CANCELLED and leaves nothing on the server, even when a grant raced the cancel.
#[test]
fn cancelled_waiter_fails_with_cancelled_and_leaves_nothing() {
    let results: Vec<(bool, bool)> = (0..seeds())
        .map(|s| abandon_scenario(s, Abandon::Cancel))
        .collect();
    assert!(
        results.iter().any(|r| r.0) && results.iter().any(|r| !r.0),
        "both outcomes should occur"
    );
    assert!(
        results.iter().any(|r| r.1),
        "no seed raced a grant against the cancel"
    );
}

// Release hands the lock directly to the head waiter (FIFO); only that waiter's channel gets a message.
#[test]
fn release_hands_the_lock_to_waiters_in_fifo_order() {
    for seed in 0..seeds() / 4 {
        let mut sim = Sim::new(seed, net_for(seed));
        let holder = sim.add_client();
        let waiters = sim.add_clients(4);
        let (_, mut lease, _) =
            acquired_now(&mut sim, holder, "r", &LockOptions::renewed_lease(ms(300)));
        let mut ops = Vec::new();
        for &w in &waiters {
            ops.push(sim.acquire(w, "r", &LockOptions::renewed_lease(ms(300)), Wait::Forever));
            sim.run_for(ms(20));
        }
        let tokens = queue_members(&mut sim, "r");
        assert_eq!(
            tokens.len(),
            waiters.len(),
            "seed {seed}: every waiter is queued"
        );
        let mut current = holder;
        for (i, (&w, &op)) in waiters.iter().zip(&ops).enumerate() {
            let published_before = sim.server.published.len();
            sim.release(current, lease);
            let (_, out) = outcome_of(&mut sim, w, op, ms(100));
            let Outcome::Acquired { lease: l, .. } = out else {
                panic!("seed {seed}: waiter {i}: {out:?}")
            };
            // Nobody queued behind it got the lock first.
            for (&other, &other_op) in waiters.iter().zip(&ops).skip(i + 1) {
                assert!(
                    sim.outcome(other, other_op).is_none(),
                    "seed {seed}: waiter {other} jumped the queue"
                );
            }
            let published = &sim.server.published[published_before..];
            assert_eq!(published.len(), 1, "seed {seed}: {published:?}");
            assert_eq!(
                published[0].channel,
                sim.clients[w].engine.channel(),
                "seed {seed}"
            );
            assert!(
                published[0]
                    .payload
                    .starts_with(&format!("granted {} ", tokens[i])),
                "seed {seed}"
            );
            current = w;
            lease = l;
        }
        sim.release(current, lease);
        sim.settle(ms(500));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// ---------------------------------------------------------------------------------------------
// Extend and renewals

// Extending a lease that was lost on the server fails with NOT_HELD and never re-creates the key.
#[test]
fn extend_of_a_lost_lease_fails_with_not_held_and_never_recreates_the_key() {
    for seed in 0..seeds() / 4 {
        let mut sim = Sim::new(seed, net_for(seed));
        let [a, b] = [sim.add_client(), sim.add_client()];
        let key = sim.keys("r").lock;
        let (_, lease_a, _) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(1000)));
        sim.delete_key(&key);
        let taken_over = seed % 2 == 0;
        let b_lease = taken_over
            .then(|| acquired_now(&mut sim, b, "r", &LockOptions::fixed_lease(ms(500))).1);
        let op = sim.extend(a, lease_a, Duration::from_secs(10));
        let (_, out) = outcome_of(&mut sim, a, op, ms(100));
        assert!(
            matches!(&out, Outcome::Failed(e) if e.kind() == ErrorKind::NotHeld),
            "seed {seed}: {out:?}"
        );
        assert!(sim.clients[a]
            .events
            .iter()
            .any(|(_, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a)));
        let now = sim.now;
        sim.server.store.set_now(now);
        if taken_over {
            assert!(
                sim.server.store.pttl(&key) <= 500,
                "seed {seed}: B's lease was extended"
            );
            sim.release(b, b_lease.expect("taken over"));
        } else {
            assert_eq!(
                sim.server.store.pttl(&key),
                -2,
                "seed {seed}: extend re-created the lock key"
            );
        }
        // Once the engine knows, extend fails at once without asking the server.
        let sent = sim.clients[a].requests.len();
        let op = sim.extend(a, lease_a, Duration::from_secs(10));
        assert!(
            matches!(sim.outcome(a, op), Some((_, Outcome::Failed(e))) if e.kind() == ErrorKind::NotHeld)
        );
        assert_eq!(sim.clients[a].requests.len(), sent);
        sim.settle(ms(500));
        check::no_lock_state_left(&mut sim);
    }
}

// Watchdog renewals of many leases of one engine travel in one pipeline request.
#[test]
fn watchdog_renewals_of_many_leases_are_batched_into_one_pipeline() {
    for seed in 0..seeds() / 4 {
        let mut sim = Sim::new(seed, net_for(seed));
        let a = sim.add_client();
        let names = ["n1", "n2", "n3", "n4", "n5"];
        let ops: Vec<OpId> = names
            .iter()
            .map(|n| sim.acquire(a, n, &LockOptions::renewed_lease(ms(300)), Wait::Try))
            .collect();
        sim.run_for(Duration::from_secs(1));
        assert!(
            ops.iter().all(|&op| sim.acquired(a, op).is_some()),
            "seed {seed}: not all acquired"
        );
        let mut renewal_pipelines = 0;
        for (_, r) in &sim.clients[a].requests {
            let RequestKind::Pipeline(cmds) = &r.kind else {
                continue;
            };
            let extends = cmds
                .iter()
                .filter(|c| script_of(c) == Some("extend"))
                .count();
            if extends > 0 {
                assert_eq!(
                    extends,
                    names.len(),
                    "seed {seed}: renewals were split: {cmds:?}"
                );
                renewal_pipelines += 1;
            }
        }
        assert!(
            renewal_pipelines >= 3,
            "seed {seed}: expected several renewal rounds, got {renewal_pipelines}"
        );
        release_all(&mut sim, a);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// An extend racing a watchdog renewal never leaves valid_until beyond the server-side expiry.
#[test]
fn extend_racing_a_renewal_keeps_valid_until_within_the_server_lease() {
    for seed in 0..seeds() {
        let mut sim = Sim::new(seed, net_for(seed));
        let mut rng = Rng::new(seed);
        let [a, b] = [sim.add_client(), sim.add_client()];
        let lease = ms(rng.between(30, 300));
        let (acquired_at, lease_a, _) =
            acquired_now(&mut sim, a, "r", &LockOptions::renewed_lease(lease));
        // Around the first renewal (lease / 3 after the acquire was sent).
        let around =
            acquired_at + lease / 3 - ms(6) + Duration::from_micros(rng.between(0, 12_000));
        sim.run_until(around, |_| false);
        let longer = rng.chance(0.5);
        let d = if longer {
            lease * 10
        } else {
            (lease / 4).max(ms(10))
        };
        sim.extend(a, lease_a, d);
        sim.run_for(lease * 2);
        let op = sim.acquire(b, "r", &LockOptions::fixed_lease(ms(50)), Wait::Forever);
        sim.run_for(lease * 12);
        if let Some((_, l, _)) = sim.acquired(b, op) {
            sim.release(b, l);
        }
        sim.shutdown(a);
        sim.settle(Duration::from_secs(2));
        check::safety(&sim);
    }
}

// An extend that shortens the lease counts from when it was sent, even if its reply is slow.
#[test]
fn shortening_extend_is_effective_before_its_reply_arrives() {
    for seed in 0..seeds() / 4 {
        let mut sim = Sim::new(seed, NetConfig::fixed(ms(30)));
        let [a, b] = [sim.add_client(), sim.add_client()];
        let (_, lease_a, _) = acquired_now(
            &mut sim,
            a,
            "r",
            &LockOptions::fixed_lease(Duration::from_secs(2)),
        );
        let op = sim.acquire(b, "r", &LockOptions::fixed_lease(ms(100)), Wait::Forever);
        sim.run_for(ms(seed));
        sim.extend(a, lease_a, ms(10));
        let (_, out) = outcome_of(&mut sim, b, op, Duration::from_secs(1));
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        release_all(&mut sim, b);
        release_all(&mut sim, a);
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// ---------------------------------------------------------------------------------------------
// Garbage from the server

fn garbage() -> Vec<Reply> {
    vec![
        Reply::Int(7),
        Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into()),
        Reply::Nil,
        Reply::Status("OK".into()),
        Reply::Data(b"1".to_vec()),
        Reply::Array(vec![Reply::Int(1)]),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Data(b"0".to_vec()),
            Reply::Int(10),
        ]),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Data(b"5".to_vec()),
            Reply::Int(-1),
        ]),
        Reply::Other("map".into()),
    ]
}

/// Answers every call of `script` from client `c` with `reply`, without running it.
fn corrupt(sim: &mut Sim, c: ClientId, script: &'static str, reply: Reply) {
    sim.server.fault = Some(Box::new(move |client, cmd| {
        (client == c && script_of(cmd) == Some(script)).then(|| reply.clone())
    }));
}

fn is_protocol_failure(out: &Outcome) -> bool {
    matches!(out, Outcome::Failed(e) if e.kind() == ErrorKind::Protocol)
}

// Garbage replies to acquire, release and extend give PROTOCOL failures (renewals: Lost), never a panic.
#[test]
fn garbage_replies_give_protocol_failures() {
    for (i, g) in garbage().into_iter().enumerate() {
        let seed = i as u64;
        // Acquire, try and wait.
        for wait in [Wait::Try, Wait::Forever] {
            let mut sim = Sim::new(seed, net_for(seed));
            let a = sim.add_client();
            corrupt(&mut sim, a, "acquire", g.clone());
            let op = sim.acquire(a, "r", &LockOptions::default(), wait);
            let (_, out) = outcome_of(&mut sim, a, op, ms(100));
            assert!(is_protocol_failure(&out), "{g:?} {wait:?}: {out:?}");
            sim.settle(ms(500));
            check::no_lock_state_left(&mut sim);
        }
        // Release: the engine forgets the lease; the server lets it expire.
        let mut sim = Sim::new(seed, net_for(seed));
        let a = sim.add_client();
        let (_, lease, _) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(100)));
        corrupt(&mut sim, a, "release", g.clone());
        let op = sim.release(a, lease);
        let (_, out) = outcome_of(&mut sim, a, op, ms(100));
        assert!(is_protocol_failure(&out), "release {g:?}: {out:?}");
        assert!(!sim.clients[a].engine.is_held(sim.now, lease));
        // Extend: fails, the lease stays held.
        let (_, lease, _) = acquired_now(&mut sim, a, "s", &LockOptions::fixed_lease(ms(100)));
        corrupt(&mut sim, a, "extend", g.clone());
        let op = sim.extend(a, lease, ms(200));
        let (_, out) = outcome_of(&mut sim, a, op, ms(100));
        assert!(is_protocol_failure(&out), "extend {g:?}: {out:?}");
        // Renewal: the lease is reported lost, with the protocol problem in the message.
        sim.server.fault = None;
        let (_, lease, _) = acquired_now(&mut sim, a, "t", &LockOptions::renewed_lease(ms(90)));
        corrupt(&mut sim, a, "extend", g.clone());
        let lost = sim.run_until(sim.now + ms(200), |s| {
            s.clients[a]
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Lost { lease: l, .. } if *l == lease))
        });
        assert!(lost, "renewal {g:?}: no Lost");
        sim.server.fault = None;
        release_all(&mut sim, a);
        sim.run_for(ms(300));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

/// Answers every lockgate script of every client with `error` while `on` is set, as a server
/// busy running a long script (or loading, or failing over) answers everything else.
fn transient_spell(sim: &mut Sim, error: &str) -> std::rc::Rc<std::cell::Cell<bool>> {
    let on = std::rc::Rc::new(std::cell::Cell::new(false));
    let flag = std::rc::Rc::clone(&on);
    let error = error.to_string();
    sim.server.fault = Some(Box::new(move |_, cmd| {
        (flag.get() && script_of(cmd).is_some()).then(|| Reply::Error(error.clone()))
    }));
    on
}

// PROTOCOL.md §4: BUSY, LOADING, TRYAGAIN, MASTERDOWN, CLUSTERDOWN and NOREPLICAS replies are
// retryable CONNECTION errors: a waiter keeps waiting, a renewal retries until the local validity
// runs out, a release made during the spell lands right after it, a try reports CONNECTION.
#[test]
fn transient_server_errors_are_retried_not_fatal() {
    for (i, error) in [
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
        "LOADING Redis is loading the dataset in memory",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        "CLUSTERDOWN The cluster is down",
        "NOREPLICAS Not enough good replicas to write.",
    ]
    .into_iter()
    .enumerate()
    {
        let seed = i as u64;
        let mut sim = Sim::new(seed, net_for(seed));
        let (a, b, c) = (sim.add_client(), sim.add_client(), sim.add_client());
        let spell = transient_spell(&mut sim, error);
        let (_, held, fence) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(20_000)));
        let (_, renewed, _) = acquired_now(&mut sim, c, "w", &LockOptions::renewed_lease(ms(3_000)));
        let wait = sim.acquire(b, "r", &LockOptions::default(), Wait::For(ms(8_000)));
        sim.run_for(ms(300));
        assert_eq!(queue_members(&mut sim, "r").len(), 1, "{error}: b is queued");
        // A 1.5 s spell, long enough for b's heartbeats, c's renewals and a's release to meet it.
        spell.set(true);
        let spell_start = sim.now;
        // Its retries meet the spell too: told after UNDO_WAIT, the release going on after.
        let release = sim.release(a, held);
        let (_, out) = outcome_of(&mut sim, a, release, lockgate_core::engine::UNDO_WAIT + ms(100));
        assert!(
            matches!(&out, Outcome::Failed(e) if e.kind() == ErrorKind::Connection && e.retryable()),
            "{error}: release during the spell: {out:?}"
        );
        let one_shot = sim.acquire(c, "x", &LockOptions::default(), Wait::Try);
        let (_, out) = outcome_of(&mut sim, c, one_shot, ms(100));
        assert!(
            matches!(&out, Outcome::Failed(e) if e.kind() == ErrorKind::Connection),
            "{error}: try during the spell: {out:?}"
        );
        sim.run_until(spell_start + ms(1_500), |_| false);
        assert!(sim.outcome(b, wait).is_none(), "{error}: the waiter gave up during the spell");
        spell.set(false);
        let spell_end = sim.now;
        // The background release lands within its backoff (at most 1 s) and b is granted.
        let (at, out) = outcome_of(&mut sim, b, wait, ms(2_000));
        match out {
            Outcome::Acquired { fencing_token, .. } => assert!(fencing_token > fence),
            other => panic!("{error}: the waiter did not get the lock after the spell: {other:?}"),
        }
        assert!(at <= spell_end + ms(1_100), "{error}: granted {:?} after the spell", at.saturating_duration_since(spell_end));
        // c's renewals failed during the spell and were retried; the lease was never lost.
        assert!(
            !sim.clients[c].events.iter().any(|(_, e)| matches!(e, Event::Lost { lease, .. } if *lease == renewed)),
            "{error}: a renewal answered {error:?} lost the lease"
        );
        let renewed_after = sim.run_until(sim.now + ms(2_000), |s| {
            s.clients[c].events.iter().any(|(t, e)| *t > spell_end && matches!(e, Event::Renewed { lease, .. } if *lease == renewed))
        });
        assert!(renewed_after, "{error}: no renewal after the spell");
        assert!(sim.clients[c].engine.is_held(sim.now, renewed));
        for x in [a, b, c] {
            sim.shutdown(x);
        }
        sim.settle(ms(30_000));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// A pipeline answered with the wrong number of replies fails every call in it with PROTOCOL.
#[test]
fn wrong_number_of_replies_gives_protocol_failures() {
    let mut sim = Sim::new(7, net_for(7));
    let a = sim.add_client();
    // The acquire runs (and takes the lock) but the pipeline comes back with an extra reply.
    sim.server.pipeline_fault = Some(Box::new(|_, _, mut r| {
        r.push(Reply::Int(1));
        r
    }));
    let op = sim.acquire(a, "r", &LockOptions::default(), Wait::Try);
    let (_, out) = outcome_of(&mut sim, a, op, ms(100));
    assert!(is_protocol_failure(&out), "{out:?}");
    sim.server.pipeline_fault = None;
    sim.settle(ms(500));
    check::no_lock_state_left(&mut sim);
}

// An acquire that fails after its script ran on the server (reply lost or garbled) leaves nothing there.
#[test]
fn acquire_failing_after_its_script_ran_leaves_nothing_on_the_server() {
    for seed in 0..seeds() / 4 {
        for case in 0..3 {
            let mut sim = Sim::new(seed, net_for(seed));
            let [a, b] = [sim.add_client(), sim.add_client()];
            let busy = seed % 2 == 0;
            let held = busy
                .then(|| acquired_now(&mut sim, b, "r", &LockOptions::renewed_lease(ms(100))).1);
            let wait = if case == 0 { Wait::Forever } else { Wait::Try };
            if case == 2 {
                sim.isolated.insert(a, Isolation::DropReplies);
            } else {
                // Garble the reply of the acquire after it ran.
                sim.server.pipeline_fault = Some(Box::new(move |c, cmds, r| {
                    if c == a && cmds.iter().any(|x| script_of(x) == Some("acquire")) {
                        vec![Reply::Int(7); r.len()]
                    } else {
                        r
                    }
                }));
            }
            let op = sim.acquire(a, "r", &LockOptions::renewed_lease(ms(5000)), wait);
            let (_, out) = outcome_of(&mut sim, a, op, ms(100));
            let kind = if case == 2 {
                ErrorKind::Connection
            } else {
                ErrorKind::Protocol
            };
            assert!(
                matches!(&out, Outcome::Failed(e) if e.kind() == kind),
                "seed {seed} case {case}: {out:?}"
            );
            sim.server.pipeline_fault = None;
            sim.isolated.clear();
            if let Some(l) = held {
                sim.release(b, l);
            }
            sim.settle(ms(500));
            // Well before the 5 s lease or the 10 s queue entry could expire by themselves.
            check::no_lock_state_left(&mut sim);
        }
    }
}

// Real WRONGTYPE errors from keys of the wrong type give PROTOCOL failures and no panic.
#[test]
fn keys_of_the_wrong_type_give_protocol_failures() {
    let mut sim = Sim::new(3, net_for(3));
    let [a, b] = [sim.add_client(), sim.add_client()];
    let k = sim.keys("r");
    let (_, lease, _) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(300)));
    sim.server
        .store
        .set_raw(&k.queue, Value::Str("not a zset".into()), Some(1000));
    let op = sim.acquire(b, "r", &LockOptions::default(), Wait::Forever);
    let (_, out) = outcome_of(&mut sim, b, op, ms(100));
    assert!(is_protocol_failure(&out), "{out:?}");
    sim.release(a, lease);
    sim.server
        .store
        .set_raw(&k.lock, Value::Hash(Default::default()), Some(1000));
    let op = sim.acquire(b, "r", &LockOptions::default(), Wait::Try);
    let (_, out) = outcome_of(&mut sim, b, op, ms(100));
    assert!(is_protocol_failure(&out), "{out:?}");
    sim.settle(ms(500));
}

// ---------------------------------------------------------------------------------------------
// A key's last millisecond: Redis still has it and answers PTTL 0

// An ACQUIRE that finds its own grant in its last millisecond (PTTL 0) is not a protocol error.
#[test]
fn own_grant_in_its_last_millisecond_is_not_a_protocol_error() {
    for wait in [Wait::Try, Wait::Forever] {
        let mut sim = Sim::new(5, NetConfig::fixed(ms(1)));
        let a = sim.add_client();
        let last_ms = Reply::Array(vec![
            Reply::Int(1),
            Reply::Data(b"42".to_vec()),
            Reply::Int(0),
        ]);
        corrupt(&mut sim, a, "acquire", last_ms);
        let op = sim.acquire(a, "r", &LockOptions::default(), wait);
        let (at, out) = outcome_of(&mut sim, a, op, ms(100));
        match out {
            // Held, but with nothing left of the lease.
            Outcome::Acquired { valid_until, .. } => {
                assert!(valid_until <= at, "{wait:?}: valid until {valid_until:?}")
            }
            other => panic!("{wait:?}: {other:?}"),
        }
        // It is then reported lost at once (the fence 42 was made up, so no server checks here).
        sim.run_for(ms(5));
        assert!(
            sim.clients[a]
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Lost { .. })),
            "{wait:?}"
        );
        sim.server.fault = None;
        sim.settle(ms(500));
    }
}

// A waiter that sees the holder in its last millisecond (PTTL 0) re-checks right after, not a whole interval later.
#[test]
fn holder_in_its_last_millisecond_is_rechecked_right_after() {
    let mut sim = Sim::new(5, NetConfig::fixed(ms(1)));
    let [a, b] = [sim.add_client(), sim.add_client()];
    let (_, lease, _) = acquired_now(&mut sim, a, "r", &LockOptions::fixed_lease(ms(500)));
    let mut first = true;
    sim.server.fault = Some(Box::new(move |c, cmd| {
        let hit = c == b && script_of(cmd) == Some("acquire") && std::mem::take(&mut first);
        hit.then(|| {
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Data(b"0".to_vec()),
                Reply::Int(0),
            ])
        })
    }));
    // Entry TTL 3 s: the regular re-check interval would be 1 s.
    let op = sim.acquire(
        b,
        "r",
        &LockOptions::fixed_lease(Duration::from_secs(3)).with_entry_ttl(Duration::from_secs(3)),
        Wait::Forever,
    );
    sim.run_for(ms(20));
    let acquires: Vec<Instant> = sim.clients[b]
        .requests
        .iter()
        .filter(|(_, r)| matches!(&r.kind, RequestKind::Pipeline(c) if c.iter().any(|x| script_of(x) == Some("acquire"))))
        .map(|(t, _)| *t)
        .collect();
    assert!(
        acquires.len() >= 2,
        "no re-check within 20 ms: {acquires:?}"
    );
    sim.release(a, lease);
    let (_, out) = outcome_of(&mut sim, b, op, ms(100));
    assert!(matches!(out, Outcome::Acquired { .. }), "{out:?}");
    release_all(&mut sim, b);
    check::no_lock_state_left(&mut sim);
}

// ---------------------------------------------------------------------------------------------
// Shared-holder primitives (PROTOCOL.md §7): semaphore, read-write lock, leader election,
// reentrant holds

/// The faults a shared-primitive workload runs under.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Faults {
    /// Lost replies, requests and pushed grants.
    Loss,
    /// Holders and waiters crash.
    Crashes,
    /// Clients lose their command connection (requests or replies) for a while.
    Partitions,
    /// The server restarts without persistence (client beliefs may then overlap; the server
    /// never lets its own holders do so).
    Restarts,
}

/// Runs `cfg` under `faults` and checks what holds for every primitive: holds compatible on
/// the client and the server side, beliefs within server leases, increasing fences, one
/// wake-up per grant, and nothing but fence keys once everyone is done.
fn shared_workload(seed: u64, cfg: Workload, faults: Faults) -> (Sim, Runner) {
    let mut net = net_for(seed);
    if faults == Faults::Loss {
        net = net.lossy(0.05, 0.05, 0.2);
    }
    let cfg = Workload {
        p_crash: if faults == Faults::Crashes { 0.15 } else { 0.0 },
        ..cfg
    };
    let mut sim = Sim::new(seed, net);
    let mut rng = Rng::new(seed ^ 0x5EED);
    let mut runner = Runner::new(&mut sim, cfg.clone(), seed);
    let n = sim.clients.len() as u64;
    // (at, what): a partition of client `c` starting or ending, or a restart.
    let mut plan: Vec<(Instant, usize, Option<Isolation>)> = Vec::new();
    let span = cfg.duration.as_millis() as u64;
    match faults {
        Faults::Partitions => {
            for _ in 0..4 {
                let c = rng.between(0, n - 1) as usize;
                let from = sim.now + ms(rng.between(0, span));
                let mode = if rng.chance(0.5) {
                    Isolation::DropRequests
                } else {
                    Isolation::DropReplies
                };
                plan.push((from, c, Some(mode)));
                plan.push((from + ms(rng.between(10, 400)), c, None));
            }
        }
        Faults::Restarts => {
            for _ in 0..2 {
                plan.push((sim.now + ms(rng.between(100, span)), usize::MAX, None));
            }
        }
        _ => {}
    }
    plan.sort_by_key(|p| p.0);
    plan.iter().for_each(|p| sim.wake_at(p.0));
    let mut restart_rng = Rng::new(seed ^ 0xD00D);
    runner.run_with(&mut sim, |s| {
        while plan.first().is_some_and(|p| p.0 <= s.now) {
            let (_, c, what) = plan.remove(0);
            match (c, what) {
                (usize::MAX, _) => s.restart_server(restart_rng.chance(0.5), Duration::ZERO),
                (c, Some(mode)) => {
                    s.isolated.insert(c, mode);
                }
                (c, None) => {
                    s.isolated.remove(&c);
                }
            }
        }
    });
    sim.isolated.clear();
    check::server_exclusion(&sim);
    check::fences_increase(&sim);
    check::one_wakeup_per_grant(&sim);
    if faults != Faults::Restarts {
        check::safety(&sim);
    }
    assert!(
        sim.server
            .executed
            .iter()
            .all(|e| !matches!(e.reply, Reply::Error(ref m) if !m.starts_with("NOSCRIPT"))),
        "seed {seed}: a script failed"
    );
    // Leftovers of crashed clients or abandoned cleanups expire by themselves.
    sim.run_for(Duration::from_secs(2));
    check::no_lock_state_left(&mut sim);
    (sim, runner)
}

fn shared_seeds() -> u64 {
    (seeds() / 8).max(1)
}

const ALL_FAULTS: [Faults; 4] = [
    Faults::Loss,
    Faults::Crashes,
    Faults::Partitions,
    Faults::Restarts,
];

// A semaphore never has more live holders than permits (client beliefs and server leases),
// under loss, crashes, partitions and restarts; permits really are shared.
#[test]
fn semaphore_never_exceeds_its_permits_under_faults() {
    let mut shared = 0;
    for faults in ALL_FAULTS {
        for seed in 0..shared_seeds() {
            let permits = 1 + seed as u32 % 3;
            let cfg = Workload {
                names: vec!["pool"],
                clients: 5,
                primitives: vec![Primitive::Semaphore { permits }],
                ..Workload::default()
            };
            let (sim, runner) = shared_workload(seed, cfg, faults);
            assert!(runner.stats.acquired > 0, "seed {seed}: nothing acquired");
            let key = sim.shared_keys("sem", "pool").holders;
            let most = check::max_concurrent_beliefs(&sim, &key);
            if faults != Faults::Restarts {
                assert!(most <= permits as usize, "seed {seed}: {most} holders");
            }
            shared += usize::from(most > 1);
        }
    }
    assert!(shared > 0, "no seed ever shared a permit");
}

// Read-write lock: a writer never overlaps any holder, readers overlap (each reader flavour
// with writers; the flavours are not mixed on one name, which the server refuses, PROTOCOL.md
// §7), under every fault.
#[test]
fn rw_lock_writers_are_exclusive_and_readers_share_under_faults() {
    for writers_first in [true, false] {
        let mut readers_overlapped = 0;
        for faults in ALL_FAULTS {
            for seed in 0..shared_seeds() {
                let cfg = Workload {
                    names: vec!["doc"],
                    clients: 5,
                    primitives: vec![Primitive::Read { writers_first }, Primitive::Write],
                    ..Workload::default()
                };
                let (sim, _) = shared_workload(seed, cfg, faults);
                let key = sim.shared_keys("rw", "doc").holders;
                readers_overlapped += usize::from(check::max_concurrent_beliefs(&sim, &key) > 1);
            }
        }
        assert!(readers_overlapped > 0, "readers (writers_first {writers_first}) never held together");
    }
}

// Election: at most one leader at any instant, terms strictly increase from leader to
// leader, under every fault (restarts: on the server side).
#[test]
fn election_has_one_leader_at_a_time_and_increasing_terms_under_faults() {
    for faults in ALL_FAULTS {
        for seed in 0..shared_seeds() {
            let cfg = Workload {
                names: vec!["ctl"],
                clients: 4,
                primitives: vec![Primitive::Leader {
                    value: String::new(),
                }],
                p_auto_renew: 0.8,
                ..Workload::default()
            };
            let (sim, runner) = shared_workload(seed, cfg, faults);
            assert!(runner.stats.acquired > 0, "seed {seed}: nobody led");
            let key = sim.shared_keys("elect", "ctl").holders;
            if faults != Faults::Restarts {
                check::terms_increase(&sim, &key);
                assert!(check::max_concurrent_beliefs(&sim, &key) <= 1);
            }
        }
    }
}

// Mutexes and read-write locks re-entered under loss and crashes: a re-entry returns the same
// lease and token, inner releases keep the lease, only the last frees it.
#[test]
fn reentrant_holds_under_faults_keep_the_lease_until_the_last_release() {
    let mut reentered = 0;
    for faults in [Faults::Loss, Faults::Crashes, Faults::Partitions] {
        for seed in 0..shared_seeds() {
            let cfg = Workload {
                names: vec!["re"],
                clients: 4,
                primitives: vec![
                    Primitive::Mutex,
                    Primitive::Read {
                        writers_first: true,
                    },
                    Primitive::Write,
                ],
                p_reenter: 0.5,
                ..Workload::default()
            };
            let (_, runner) = shared_workload(seed, cfg, faults);
            reentered += runner.stats.inner_releases;
        }
    }
    assert!(reentered > 0, "nothing was re-entered");
}

/// Acquires `p` with `Wait::Try` and expects it granted.
fn acquired_primitive(
    sim: &mut Sim,
    c: ClientId,
    name: &str,
    p: &Primitive,
    opts: &LockOptions,
) -> (Instant, lockgate_core::LeaseId, u64) {
    let op = sim.acquire_primitive(c, name, p, opts, Wait::Try);
    match outcome_of(sim, c, op, Duration::from_secs(1)) {
        (
            at,
            Outcome::Acquired {
                lease,
                fencing_token,
                ..
            },
        ) => (at, lease, fencing_token),
        other => panic!("expected to acquire {p:?} {name}: {other:?}"),
    }
}

/// Members of a shared primitive's queue (asserting the waiters hash matches it).
fn shared_queue(sim: &mut Sim, kind: &str, name: &str) -> Vec<String> {
    let k = sim.shared_keys(kind, name);
    let now = sim.now;
    sim.server.store.set_now(now);
    let queue: Vec<String> = sim
        .server
        .store
        .zmembers(&k.queue)
        .into_iter()
        .map(|m| m.1)
        .collect();
    let mut waiters = match sim.server.store.value(&k.waiters) {
        None => vec![],
        Some(Value::Hash(h)) => h.into_keys().collect(),
        other => panic!("waiters is {other:?}"),
    };
    let mut sorted = queue.clone();
    sorted.sort();
    waiters.sort();
    assert_eq!(sorted, waiters, "queue and waiters hash disagree");
    queue
}

// Permits of crashed holders come back within one lease: waiters take them over.
#[test]
fn semaphore_permits_of_crashed_holders_come_back_within_one_lease() {
    for seed in 0..seeds() / 4 {
        let net = net_for(seed);
        let slack = net.max_latency() * 4 + ms(2);
        let mut sim = Sim::new(seed, net);
        let mut rng = Rng::new(seed);
        let sem = Primitive::Semaphore { permits: 2 };
        let [a, b, c, d] = [0; 4].map(|_| sim.add_client());
        let lease = ms(rng.between(50, 1000));
        let opts = LockOptions::renewed_lease(lease);
        acquired_primitive(&mut sim, a, "pool", &sem, &opts);
        acquired_primitive(&mut sim, b, "pool", &sem, &opts);
        let wopts = LockOptions::renewed_lease(ms(200)).with_entry_ttl(ms(rng.between(100, 3000)));
        let op_c = sim.acquire_primitive(c, "pool", &sem, &wopts, Wait::Forever);
        // d queues behind c.
        assert!(sim.run_until(sim.now + ms(200), |s| s
            .server
            .store
            .peek_zcard(&s.shared_keys("sem", "pool").queue)
            == 1));
        let op_d = sim.acquire_primitive(d, "pool", &sem, &wopts, Wait::Forever);
        sim.run_for(lease * rng.between(10, 300) as u32 / 100);
        assert!(
            sim.outcome(c, op_c).is_none() && sim.outcome(d, op_d).is_none(),
            "seed {seed}: a third holder while two live holders hold both permits"
        );
        let crashed_at = sim.now;
        sim.crash(a);
        let (at, out) = outcome_of(&mut sim, c, op_c, lease * 2);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        assert!(
            at <= crashed_at + lease + slack,
            "seed {seed}: the permit came back {:?} after the crash",
            at.saturating_duration_since(crashed_at)
        );
        assert!(
            sim.outcome(d, op_d).is_none(),
            "seed {seed}: both waiters got in"
        );
        let crashed_at = sim.now;
        sim.crash(b);
        let (at, out) = outcome_of(&mut sim, d, op_d, lease * 2);
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        assert!(at <= crashed_at + lease + slack, "seed {seed}");
        sim.shutdown(c);
        release_all(&mut sim, d);
        check::safety(&sim);
        check::one_wakeup_per_grant(&sim);
        sim.run_for(lease + ms(10));
        check::no_lock_state_left(&mut sim);
    }
}

// A queued writer blocks readers that come after it (writers-first); readers that opt out
// join the current readers past it. Either way the writer gets in once the readers are gone.
#[test]
fn queued_writer_blocks_later_readers_only_with_writers_first() {
    for seed in 0..seeds() / 4 {
        for writers_first in [true, false] {
            let mut sim = Sim::new(seed, net_for(seed));
            let [r1, w, r2] = [0; 3].map(|_| sim.add_client());
            let read = Primitive::Read { writers_first };
            let opts = LockOptions::renewed_lease(ms(300));
            let (_, l1, _) = acquired_primitive(&mut sim, r1, "doc", &read, &opts);
            let op_w = sim.acquire_primitive(w, "doc", &Primitive::Write, &opts, Wait::Forever);
            assert!(
                sim.run_until(sim.now + ms(200), |s| {
                    s.clients[w].requests.len() >= 2
                    && s.server.executed.iter().any(|e| e.script == "shared_acquire"
                        && matches!(&e.reply, Reply::Array(a) if a.first() == Some(&Reply::Int(0))))
                }),
                "seed {seed}: the writer never queued"
            );
            sim.run_for(ms(10));
            assert_eq!(shared_queue(&mut sim, "rw", "doc").len(), 1, "seed {seed}");
            let op_r2 = sim.acquire_primitive(r2, "doc", &read, &opts, Wait::Forever);
            sim.run_for(ms(150));
            let r2_in = sim.acquired(r2, op_r2);
            assert_eq!(
                r2_in.is_some(),
                !writers_first,
                "seed {seed}: writers_first={writers_first}: a later reader {} the queued writer",
                if r2_in.is_some() {
                    "passed"
                } else {
                    "waited behind"
                }
            );
            assert!(
                sim.outcome(w, op_w).is_none(),
                "seed {seed}: writer beside readers"
            );
            sim.release(r1, l1);
            if let Some((_, l2, _)) = r2_in {
                sim.run_for(ms(50));
                assert!(
                    sim.outcome(w, op_w).is_none(),
                    "seed {seed}: writer beside a reader"
                );
                sim.release(r2, l2);
            }
            let (_, out) = outcome_of(&mut sim, w, op_w, ms(500));
            let Outcome::Acquired { lease: lw, .. } = out else {
                panic!("seed {seed}: {out:?}")
            };
            if writers_first {
                sim.run_for(ms(50));
                assert!(
                    sim.outcome(r2, op_r2).is_none(),
                    "seed {seed}: reader beside writer"
                );
            }
            sim.release(w, lw);
            if writers_first {
                let (_, out) = outcome_of(&mut sim, r2, op_r2, ms(500));
                assert!(
                    matches!(out, Outcome::Acquired { .. }),
                    "seed {seed}: {out:?}"
                );
            }
            release_all(&mut sim, r2);
            sim.settle(ms(500));
            check::safety(&sim);
            check::one_wakeup_per_grant(&sim);
            check::no_lock_state_left(&mut sim);
        }
    }
}

// A crashed leader is replaced within one lease (plus network slack) by the next candidate,
// with a larger term; observers see the current leader's value and term, and nobody once the
// last leader resigns.
#[test]
fn crashed_leader_is_replaced_within_one_lease_and_observed() {
    for seed in 0..seeds() / 4 {
        let net = net_for(seed);
        let slack = net.max_latency() * 4 + ms(2);
        let mut sim = Sim::new(seed, net);
        let mut rng = Rng::new(seed);
        let cands = sim.add_clients(3);
        let observer = sim.add_client();
        let lease = ms(rng.between(50, 1000));
        let opts = LockOptions::renewed_lease(lease).with_entry_ttl(ms(rng.between(100, 3000)));
        let leader = |c: ClientId| Primitive::Leader {
            value: format!("node-{c}"),
        };
        let ops: Vec<OpId> = cands
            .iter()
            .map(|&c| sim.acquire_primitive(c, "ctl", &leader(c), &opts, Wait::Forever))
            .collect();
        let observe = |sim: &mut Sim| {
            let op = sim.observe_leader(observer, "ctl");
            match outcome_of(sim, observer, op, ms(100)).1 {
                Outcome::Observed(info) => info,
                other => panic!("seed {seed}: observe: {other:?}"),
            }
        };
        let mut last_term = 0;
        let mut alive: Vec<usize> = (0..cands.len()).collect();
        let mut crashed_at: Option<Instant> = None;
        while !alive.is_empty() {
            assert!(
                sim.run_until(sim.now + lease * 3, |s| alive
                    .iter()
                    .any(|&i| s.acquired(cands[i], ops[i]).is_some())),
                "seed {seed}: nobody leads"
            );
            let i = *alive
                .iter()
                .find(|&&i| sim.acquired(cands[i], ops[i]).is_some())
                .expect("found");
            let (at, lease_id, term) = sim.acquired(cands[i], ops[i]).expect("found");
            if let Some(t) = crashed_at {
                assert!(
                    at <= t + lease + slack,
                    "seed {seed}: replaced {:?} after the crash",
                    at.saturating_duration_since(t)
                );
            }
            assert!(
                term > last_term,
                "seed {seed}: term {term} after {last_term}"
            );
            last_term = term;
            sim.run_for(lease * rng.between(0, 200) as u32 / 100);
            let info = observe(&mut sim).expect("a leader");
            assert_eq!(
                (info.value.as_str(), info.term),
                (format!("node-{}", cands[i]).as_str(), term),
                "seed {seed}"
            );
            assert!(info.remaining <= lease, "seed {seed}: {info:?}");
            alive.retain(|&j| j != i);
            if alive.is_empty() {
                sim.release(cands[i], lease_id);
                sim.settle(ms(500));
                assert_eq!(observe(&mut sim), None, "seed {seed}");
            } else {
                crashed_at = Some(sim.now);
                sim.crash(cands[i]);
            }
        }
        check::safety(&sim);
        check::terms_increase(&sim, &sim.shared_keys("elect", "ctl").holders);
        check::one_wakeup_per_grant(&sim);
        sim.run_for(lease + ms(10));
        check::no_lock_state_left(&mut sim);
    }
}

// Re-entering a mutex, read or write lock gives the same lease and fencing token; inner
// releases keep it held on the server, only the last one frees it for others.
#[test]
fn reacquire_returns_the_same_token_and_only_the_last_release_frees() {
    for seed in 0..seeds() / 8 {
        for p in [
            Primitive::Mutex,
            Primitive::Read {
                writers_first: true,
            },
            Primitive::Write,
        ] {
            let mut sim = Sim::new(seed, net_for(seed));
            let [a, b] = [sim.add_client(), sim.add_client()];
            let opts = LockOptions::renewed_lease(ms(100));
            let (_, lease, fence) = acquired_primitive(&mut sim, a, "re", &p, &opts);
            for _ in 0..2 {
                sim.run_for(ms(60));
                let op = sim.reacquire(a, lease);
                let (_, out) = sim.outcome(a, op).expect("completes at once");
                let Outcome::Acquired {
                    lease: l,
                    fencing_token,
                    ..
                } = out
                else {
                    panic!("seed {seed}: {out:?}")
                };
                assert_eq!((l, fencing_token), (lease, fence), "seed {seed}");
            }
            // The other side of the lock: a writer for a read hold, the same otherwise.
            let other = match p {
                Primitive::Read { .. } => Primitive::Write,
                ref p => p.clone(),
            };
            let try_other = |sim: &mut Sim| {
                let op = sim.acquire_primitive(b, "re", &other, &opts, Wait::Try);
                outcome_of(sim, b, op, ms(100)).1
            };
            for _ in 0..2 {
                let op = sim.release(a, lease);
                let (_, out) = sim.outcome(a, op).expect("completes at once");
                assert_eq!(out, Outcome::Released { was_held: true }, "seed {seed}");
                sim.run_for(ms(150));
                assert!(sim.clients[a].engine.is_held(sim.now, lease), "seed {seed}");
                assert_eq!(
                    try_other(&mut sim),
                    Outcome::NotAcquired,
                    "seed {seed}: {p:?}"
                );
            }
            let op = sim.release(a, lease);
            let (_, out) = outcome_of(&mut sim, a, op, ms(100));
            assert_eq!(out, Outcome::Released { was_held: true }, "seed {seed}");
            let reacquire = sim.reacquire(a, lease);
            assert!(
                matches!(sim.outcome(a, reacquire), Some((_, Outcome::Failed(ref e))) if e.kind() == ErrorKind::NotHeld),
                "seed {seed}: re-entered a released lease"
            );
            let Outcome::Acquired { lease: lb, .. } = try_other(&mut sim) else {
                panic!("seed {seed}: {p:?} still held after the last release")
            };
            sim.release(b, lb);
            sim.settle(ms(500));
            check::safety(&sim);
            check::no_lock_state_left(&mut sim);
        }
    }
}

fn every_primitive() -> Vec<Primitive> {
    vec![
        Primitive::Mutex,
        Primitive::Semaphore { permits: 1 },
        Primitive::Read {
            writers_first: true,
        },
        Primitive::Write,
        Primitive::Leader {
            value: "candidate".into(),
        },
    ]
}

// A cancelled waiter of every primitive leaves no queue entry, waiter field or value behind,
// including when the holder's release (and a grant) races the cancel.
#[test]
fn cancelled_waiters_of_every_primitive_leave_nothing() {
    let mut outcomes = [0usize; 2];
    for seed in 0..seeds() / 4 {
        for p in every_primitive() {
            let net = net_for(seed);
            let mut sim = Sim::new(seed, net.clone());
            let mut rng = Rng::new(seed);
            let [a, b] = [sim.add_client(), sim.add_client()];
            // Blocks the waiter: a writer for a reader, the same primitive otherwise.
            let blocker = match p {
                Primitive::Read { .. } => Primitive::Write,
                ref p => p.clone(),
            };
            let (_, lease_a, _) = acquired_primitive(
                &mut sim,
                a,
                "c",
                &blocker,
                &LockOptions::fixed_lease(ms(1000)),
            );
            let opts = LockOptions::renewed_lease(ms(300));
            let op = sim.acquire_primitive(b, "c", &p, &opts, Wait::Forever);
            let cancel_at = sim.now + ms(rng.between(20, 200));
            let spread = net.max_latency() * 3;
            let release_at = cancel_at - spread
                + Duration::from_micros(rng.between(0, 2 * spread.as_micros() as u64));
            sim.run_until(cancel_at.min(release_at), |_| false);
            let mut released = false;
            if release_at <= cancel_at {
                sim.release(a, lease_a);
                released = true;
                sim.run_until(cancel_at, |_| false);
            }
            sim.cancel(b, op);
            if !released {
                sim.run_until(release_at, |_| false);
                sim.release(a, lease_a);
            }
            let (_, out) = outcome_of(&mut sim, b, op, ms(500));
            match out {
                Outcome::Failed(e) => {
                    assert_eq!(e.kind(), ErrorKind::Cancelled, "seed {seed}: {e}");
                    outcomes[0] += 1;
                }
                Outcome::Acquired { lease, .. } => {
                    sim.release(b, lease);
                    outcomes[1] += 1;
                }
                other => panic!("seed {seed}: {other:?}"),
            }
            sim.settle(Duration::from_secs(5));
            let kind = sim::redis::shared_kind(&p);
            if let Some(kind) = kind {
                assert!(
                    shared_queue(&mut sim, kind, "c").is_empty(),
                    "seed {seed}: {p:?}"
                );
            } else {
                assert!(queue_members(&mut sim, "c").is_empty(), "seed {seed}");
            }
            check::safety(&sim);
            check::one_wakeup_per_grant(&sim);
            check::no_lock_state_left(&mut sim);
        }
    }
    assert!(outcomes[0] > 0, "no wait was cancelled");
}

// Each freed permit or hold wakes exactly the waiters it makes room for, in queue order: one
// per permit, every reader up to the next writer, and nobody else.
#[test]
fn each_grant_wakes_exactly_one_waiter() {
    for seed in 0..seeds() / 8 {
        let mut sim = Sim::new(seed, net_for(seed));
        let opts = LockOptions::renewed_lease(ms(300));
        // Semaphore, 2 permits, 2 holders, 4 waiters.
        let sem = Primitive::Semaphore { permits: 2 };
        let holders = sim.add_clients(2);
        let waiters = sim.add_clients(4);
        let mut leases: Vec<(ClientId, lockgate_core::LeaseId)> = holders
            .iter()
            .map(|&h| (h, acquired_primitive(&mut sim, h, "pool", &sem, &opts).1))
            .collect();
        let ops: Vec<OpId> = waiters
            .iter()
            .map(|&w| {
                let op = sim.acquire_primitive(w, "pool", &sem, &opts, Wait::Forever);
                sim.run_for(ms(20));
                op
            })
            .collect();
        assert_eq!(
            shared_queue(&mut sim, "sem", "pool").len(),
            4,
            "seed {seed}"
        );
        for (i, (&w, &op)) in waiters.iter().zip(&ops).enumerate() {
            let before = sim.server.published.len();
            let (h, l) = leases.remove(0);
            sim.release(h, l);
            let (_, out) = outcome_of(&mut sim, w, op, ms(100));
            let Outcome::Acquired { lease, .. } = out else {
                panic!("seed {seed}: {out:?}")
            };
            sim.run_for(ms(20));
            let woken = &sim.server.published[before..];
            assert_eq!(woken.len(), 1, "seed {seed}: {woken:?}");
            assert_eq!(woken[0].channel, sim.clients[w].engine.channel());
            for (&o, &oop) in waiters.iter().zip(&ops).skip(i + 1) {
                assert!(
                    sim.outcome(o, oop).is_none(),
                    "seed {seed}: {o} jumped the queue"
                );
            }
            leases.push((w, lease));
        }
        // Read-write: a writer holds; queued: 3 readers, a writer, a reader.
        let w0 = sim.add_client();
        let (_, lw0, _) = acquired_primitive(&mut sim, w0, "doc", &Primitive::Write, &opts);
        let read = Primitive::Read {
            writers_first: true,
        };
        let queue: Vec<(ClientId, Primitive)> = vec![
            (sim.add_client(), read.clone()),
            (sim.add_client(), read.clone()),
            (sim.add_client(), read.clone()),
            (sim.add_client(), Primitive::Write),
            (sim.add_client(), read.clone()),
        ];
        let rw_ops: Vec<OpId> = queue
            .iter()
            .map(|(c, p)| {
                let op = sim.acquire_primitive(*c, "doc", p, &opts, Wait::Forever);
                sim.run_for(ms(20));
                op
            })
            .collect();
        assert_eq!(shared_queue(&mut sim, "rw", "doc").len(), 5, "seed {seed}");
        let before = sim.server.published.len();
        sim.release(w0, lw0);
        sim.run_for(ms(60));
        let woken: Vec<&str> = sim.server.published[before..]
            .iter()
            .map(|p| p.channel.as_str())
            .collect();
        let expected: Vec<&str> = queue[..3]
            .iter()
            .map(|(c, _)| sim.clients[*c].engine.channel())
            .collect();
        assert_eq!(
            woken, expected,
            "seed {seed}: the writer's release woke the wrong set"
        );
        let readers: Vec<lockgate_core::LeaseId> = (0..3)
            .map(|i| sim.acquired(queue[i].0, rw_ops[i]).expect("reader in").1)
            .collect();
        assert!(sim.outcome(queue[3].0, rw_ops[3]).is_none());
        assert!(sim.outcome(queue[4].0, rw_ops[4]).is_none());
        for (i, l) in readers.into_iter().enumerate() {
            let before = sim.server.published.len();
            sim.release(queue[i].0, l);
            sim.run_for(ms(30));
            // Only the last reader's release makes room, for the writer alone.
            let expect = usize::from(i == 2);
            assert_eq!(sim.server.published.len() - before, expect, "seed {seed}");
        }
        let (_, lw) = sim
            .acquired(queue[3].0, rw_ops[3])
            .map(|a| (a.0, a.1))
            .expect("writer in");
        assert!(sim.outcome(queue[4].0, rw_ops[4]).is_none());
        sim.release(queue[3].0, lw);
        let (_, out) = outcome_of(&mut sim, queue[4].0, rw_ops[4], ms(100));
        assert!(
            matches!(out, Outcome::Acquired { .. }),
            "seed {seed}: {out:?}"
        );
        for c in 0..sim.clients.len() {
            sim.shutdown(c);
        }
        sim.settle(ms(500));
        check::safety(&sim);
        check::one_wakeup_per_grant(&sim);
        check::no_lock_state_left(&mut sim);
    }
}

// Shutdown releases every lease, including one re-entered several times: nothing stays held,
// renewed or on the server.
#[test]
fn shutdown_releases_reentered_leases() {
    for seed in 0..seeds() / 8 {
        for p in [Primitive::Mutex, Primitive::Write] {
            let mut sim = Sim::new(seed, net_for(seed));
            let [a, b] = [sim.add_client(), sim.add_client()];
            let opts = LockOptions::renewed_lease(ms(100));
            let (_, lease, _) = acquired_primitive(&mut sim, a, "sd", &p, &opts);
            sim.reacquire(a, lease);
            sim.shutdown(a);
            sim.run_for(Duration::from_secs(1));
            assert!(
                !sim.clients[a].engine.is_held(sim.now, lease) && sim.clients[a].engine.is_idle(),
                "seed {seed}: {p:?}: the re-entered lease is still held (and renewed) a second after shutdown"
            );
            let op = sim.acquire_primitive(b, "sd", &p, &opts, Wait::Try);
            let (_, out) = outcome_of(&mut sim, b, op, ms(100));
            let Outcome::Acquired { lease: lb, .. } = out else {
                panic!("seed {seed}: {p:?} still held after its owner shut down: {out:?}")
            };
            sim.release(b, lb);
            sim.settle(ms(500));
            check::safety(&sim);
            check::no_lock_state_left(&mut sim);
        }
    }
}

fn invalid_argument(out: &Outcome) -> Option<String> {
    match out {
        Outcome::Failed(e) if e.kind() == ErrorKind::InvalidArgument && !e.retryable() => Some(e.message().to_string()),
        _ => None,
    }
}

// PROTOCOL.md §7: a semaphore's permit count and a reader's writers_first are recorded by the
// server while the primitive is in use; another value is refused at once with INVALID_ARGUMENT
// (try or wait), changing nothing; once idle (released, or every holder's lease expired) the
// value may change. The write half of a read-write lock takes no part.
#[test]
fn settings_every_participant_must_agree_on_are_checked_by_the_server() {
    for seed in 0..20 {
        let mut sim = Sim::new(seed, net_for(seed));
        let (a, b) = (sim.add_client(), sim.add_client());
        let opts = LockOptions::default();
        let sem = |permits| Primitive::Semaphore { permits };
        let (_, held, _) = acquired_primitive(&mut sim, a, "s", &sem(1), &opts);
        for wait in [Wait::Try, Wait::For(ms(2_000))] {
            let start = sim.now;
            let op = sim.acquire_primitive(b, "s", &sem(2), &opts, wait);
            let (at, out) = outcome_of(&mut sim, b, op, ms(100));
            let why = invalid_argument(&out).unwrap_or_else(|| panic!("{wait:?}: {out:?}"));
            assert!(why.contains("permits = 1") && why.contains("permits = 2"), "{why}");
            assert!(at.saturating_duration_since(start) < ms(50), "{wait:?}: not at once");
        }
        assert!(shared_queue(&mut sim, "sem", "s").is_empty(), "a refused acquire queued");
        let released = sim.release(a, held);
        outcome_of(&mut sim, a, released, ms(100));
        // Idle: the new count is recorded, and the old one is refused now.
        let (_, b1, _) = acquired_primitive(&mut sim, b, "s", &sem(2), &opts);
        let (_, b2, _) = acquired_primitive(&mut sim, b, "s", &sem(2), &opts);
        let op = sim.acquire_primitive(a, "s", &sem(1), &opts, Wait::Try);
        let (_, out) = outcome_of(&mut sim, a, op, ms(100));
        assert!(invalid_argument(&out).is_some(), "{out:?}");
        for l in [b1, b2] {
            let op = sim.release(b, l);
            outcome_of(&mut sim, b, op, ms(100));
        }
        // A holder whose lease ran out (crashed) leaves the semaphore idle too.
        let short = LockOptions::fixed_lease(ms(100));
        acquired_primitive(&mut sim, a, "c", &sem(1), &short);
        sim.crash(a);
        sim.run_for(ms(150));
        let (_, b3, _) = acquired_primitive(&mut sim, b, "c", &sem(3), &opts);
        let op = sim.release(b, b3);
        outcome_of(&mut sim, b, op, ms(100));

        // The read-write lock's reader policy; a writer is not checked.
        let a = sim.add_client();
        let read = |writers_first| Primitive::Read { writers_first };
        let (_, r1, _) = acquired_primitive(&mut sim, a, "rw", &read(true), &opts);
        let op = sim.acquire_primitive(b, "rw", &read(false), &opts, Wait::For(ms(2_000)));
        let (_, out) = outcome_of(&mut sim, b, op, ms(100));
        let why = invalid_argument(&out).unwrap_or_else(|| panic!("{out:?}"));
        assert!(why.contains("writers_first = true") && why.contains("writers_first = false"), "{why}");
        let op = sim.acquire_primitive(b, "rw", &Primitive::Write, &opts, Wait::Try);
        assert!(matches!(outcome_of(&mut sim, b, op, ms(100)).1, Outcome::NotAcquired));
        let (_, r2, _) = acquired_primitive(&mut sim, b, "rw", &read(true), &opts);
        assert!(shared_queue(&mut sim, "rw", "rw").is_empty());
        for (c, l) in [(a, r1), (b, r2)] {
            let op = sim.release(c, l);
            outcome_of(&mut sim, c, op, ms(100));
        }
        let (_, r3, _) = acquired_primitive(&mut sim, b, "rw", &read(false), &opts);
        let op = sim.release(b, r3);
        outcome_of(&mut sim, b, op, ms(100));
        sim.settle(ms(30_000));
        check::safety(&sim);
        check::no_lock_state_left(&mut sim);
    }
}
