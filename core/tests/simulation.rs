//! Deterministic simulation tests of the lock engine: virtual time, a simulated Redis that runs
//! the three scripts, a lossy network, crashing clients and restarting servers. No sleeps, no
//! server, no async runtime; every run is fixed by its seed.
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation`.

mod sim;

use lockgate_core::redis::reply::Reply;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{ErrorKind, Event, LockOptions, OpId, Outcome, RequestKind, Wait};

use sim::harness::ClientId;
use sim::net::Rng;
use sim::redis::script_of;
use sim::store::Value;
use sim::workload::{Runner, Workload};
use sim::{check, Isolation, NetConfig, Sim};

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
        .redis
        .grants
        .iter()
        .find(|g| g.key == key && g.fence == fence)
        .expect("grant exists");
    sim.redis
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
    sim.redis
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
    sim.redis.store.set_now(now);
    let queue = match sim.redis.store.value(&k.queue) {
        None => vec![],
        Some(Value::Zset(z)) => z.into_iter().map(|(_, m)| m).collect(),
        other => panic!("queue is {other:?}"),
    };
    let mut waiters = match sim.redis.store.value(&k.waiters) {
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
            .redis
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
        let noscript_before = sim.redis.noscript;
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
            sim.redis.noscript > noscript_before,
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
            .redis
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
        .redis
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
            let published_before = sim.redis.published.len();
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
            let published = &sim.redis.published[published_before..];
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
        sim.redis.store.set_now(now);
        if taken_over {
            assert!(
                sim.redis.store.pttl(&key) <= 500,
                "seed {seed}: B's lease was extended"
            );
            sim.release(b, b_lease.expect("taken over"));
        } else {
            assert_eq!(
                sim.redis.store.pttl(&key),
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
    sim.fault = Some(Box::new(move |client, cmd| {
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
        sim.fault = None;
        let (_, lease, _) = acquired_now(&mut sim, a, "t", &LockOptions::renewed_lease(ms(90)));
        corrupt(&mut sim, a, "extend", g.clone());
        let lost = sim.run_until(sim.now + ms(200), |s| {
            s.clients[a]
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Lost { lease: l, .. } if *l == lease))
        });
        assert!(lost, "renewal {g:?}: no Lost");
        sim.fault = None;
        release_all(&mut sim, a);
        sim.run_for(ms(300));
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
    sim.pipeline_fault = Some(Box::new(|_, _, mut r| {
        r.push(Reply::Int(1));
        r
    }));
    let op = sim.acquire(a, "r", &LockOptions::default(), Wait::Try);
    let (_, out) = outcome_of(&mut sim, a, op, ms(100));
    assert!(is_protocol_failure(&out), "{out:?}");
    sim.pipeline_fault = None;
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
                sim.pipeline_fault = Some(Box::new(move |c, cmds, r| {
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
            sim.pipeline_fault = None;
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
    sim.redis
        .store
        .set_raw(&k.queue, Value::Str("not a zset".into()), Some(1000));
    let op = sim.acquire(b, "r", &LockOptions::default(), Wait::Forever);
    let (_, out) = outcome_of(&mut sim, b, op, ms(100));
    assert!(is_protocol_failure(&out), "{out:?}");
    sim.release(a, lease);
    sim.redis
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
        sim.fault = None;
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
    sim.fault = Some(Box::new(move |c, cmd| {
        let hit = c == b && script_of(cmd) == Some("acquire") && std::mem::take(&mut first);
        hit.then(|| Reply::Array(vec![Reply::Int(0), Reply::Data(b"0".to_vec()), Reply::Int(0)]))
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
