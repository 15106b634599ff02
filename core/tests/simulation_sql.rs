//! The real SQL backend (`LockEngine<SqlBackend>`, core/src/backend/sql) in the deterministic
//! simulator, over the database model of `sim/sql.rs`, in both dialects (PostgreSQL:
//! notifications; MySQL/MariaDB: doorbells): the same harness, workload and checks as the other
//! backends, with the SQL faults — requests and replies lost (an acquire transaction applied
//! whose reply is lost: the retry must find its own row), crashed and paused (SIGSTOP) clients,
//! database restarts (rows and ids kept, connections, named locks and listeners gone), one
//! client cut off from the database for a while (its rows may expire meanwhile).
//!
//! Checked on every run:
//! - **exclusion**: no two clients believe they hold one mutex, write lock or leadership at the
//!   same virtual instant; readers share only with readers; a semaphore never has more holders
//!   than permits. Strict: no tolerance.
//! - **fencing**: the tokens (row ids) of two holds of one lock of which one is exclusive
//!   increase in the order they started to hold — never two holders whose fences both land.
//! - **nothing left**: once the workload wound down and crashed clients' rows expired, no live
//!   row is left.
//! - **no stuck waiter**: a row that holds by the recipe's rules, of a running client, is never
//!   left unclaimed for long.
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation_sql`
//! (`LOCKGATE_SIM_SEEDS=2000` explores further).

mod sim;

use std::collections::HashMap;

use lockgate_core::backend::sql::Dialect;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Event, LeaseId, LockOptions, OpId, Primitive, Wait};

use sim::check;
use sim::harness::ClientId;
use sim::net::Rng;
use sim::sql::SqlSim as Sim;
use sim::workload::{Runner, Workload};
use sim::{Isolation, NetConfig};

/// Seeds per property; `LOCKGATE_SIM_SEEDS=2000` explores further.
fn seeds() -> u64 {
    std::env::var("LOCKGATE_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The dialect of a seed: both, alternately.
fn dialect(seed: u64) -> Dialect {
    if seed % 2 == 0 {
        Dialect::Postgres
    } else {
        Dialect::MySql
    }
}

/// Latencies that vary with the seed; 2 % of requests and of replies lost.
fn net_for(seed: u64) -> NetConfig {
    let mut rng = Rng::new(seed ^ 0x5A1);
    let max = Duration::from_micros(rng.between(100, 8_000));
    let nmax = Duration::from_micros(rng.between(100, 8_000));
    NetConfig { latency: (Duration::from_micros(50), max), notify_latency: (Duration::from_micros(50), nmax), ..NetConfig::default() }
        .lossy(0.02, 0.02, 0.0)
}

/// Runs `run` for every seed, and fails with the list of every seed that failed.
fn every_seed(seeds: impl Iterator<Item = u64>, mut run: impl FnMut(u64)) {
    let mut failed = Vec::new();
    for seed in seeds {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed)));
        if let Err(e) = r {
            let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
            let first = msg.unwrap_or_default().lines().next().unwrap_or("").to_string();
            failed.push(if first.starts_with("seed ") { first } else { format!("seed {seed}: {first}") });
        }
    }
    assert!(failed.is_empty(), "{} seed(s) failed:\n{}", failed.len(), failed.join("\n"));
}

/// Watches the rows that hold by the recipes' rules: one whose client runs that nobody
/// believes holds, for longer than `patience`, is a stuck waiter.
struct StuckWatch {
    patience: Duration,
    unclaimed: HashMap<String, Instant>,
    stuck: Vec<String>,
}

impl StuckWatch {
    fn sample(&mut self, sim: &Sim) {
        let now = sim.now;
        let held: Vec<u64> = sim
            .beliefs
            .iter()
            .filter(|b| b.end.is_none() && b.claims.last().is_some_and(|c| c.1 > now))
            .filter_map(|b| b.fence)
            .collect();
        let mut seen = Vec::new();
        for (key, id, owner) in sim.server.heads(now) {
            let running = owner.is_some_and(|c| !sim.clients[c].crashed && !sim.client_is_paused(c));
            if !running || held.contains(&(id as u64)) {
                continue;
            }
            let since = *self.unclaimed.entry(key.clone()).or_insert(now);
            if now.saturating_duration_since(since) > self.patience {
                self.stuck.push(format!("{key} (client {owner:?}) unclaimed since {since:?}, now {now:?}"));
                self.unclaimed.insert(key.clone(), now);
            }
            seen.push(key);
        }
        self.unclaimed.retain(|k, _| seen.contains(k));
    }
}

/// One run of `workload`: a database restart on every other seed, one client cut off for a
/// while on two seeds in three; fails on a stuck waiter.
fn run(seed: u64, workload: Workload) -> (Sim, Runner) {
    let mut sim = Sim::sql(dialect(seed), seed, net_for(seed));
    let mut rng = Rng::new(seed ^ 0xFA11);
    let clients = workload.clients;
    let restart = ((seed / 2) % 2 == 0).then(|| sim.now + ms(rng.between(200, 2500)));
    let last = sim.now + workload.duration - ms(100);
    let partition = (seed % 3 != 0).then(|| {
        let at = sim.now + ms(rng.between(100, 1500));
        (at, rng.between(0, clients as u64 - 1) as usize, (at + ms(rng.between(300, 2500))).min(last))
    });
    for at in restart.into_iter().chain(partition.iter().flat_map(|p| [p.0, p.2])) {
        sim.wake_at(at);
    }
    let mut runner = Runner::new(&mut sim, workload, seed);
    let (mut restarted, mut cut, mut healed) = (false, false, false);
    // A head's client may be between a failed attempt and its retry (backoff up to a second),
    // or waiting out its timer re-check (a third of its entry lease, a MySQL doorbell that
    // cannot block here): longer than that, and it is stuck.
    let mut stuck = StuckWatch { patience: ms(4500), unclaimed: HashMap::new(), stuck: Vec::new() };
    runner.run_with(&mut sim, |s| {
        if let Some(at) = restart {
            if !restarted && s.now >= at {
                restarted = true;
                s.restart_server(true, Duration::ZERO);
            }
        }
        if let Some((at, c, until)) = partition {
            if !cut && s.now >= at {
                cut = true;
                s.isolated.insert(c, Isolation::DropRequests);
            }
            if !healed && s.now >= until {
                healed = true;
                s.isolated.remove(&c);
            }
        }
        stuck.sample(s);
    });
    assert!(stuck.stuck.is_empty(), "seed {seed}: waiters stuck while the lock was free: {}", stuck.stuck.join("; "));
    (sim, runner)
}

/// After the workload wound down: once crashed clients' rows expired, no live row at all.
fn check_nothing_left(sim: &mut Sim) {
    sim.run_for(ms(3000));
    check::nothing_left(sim);
}

fn mutex_workload() -> Workload {
    Workload {
        clients: 5,
        duration: Duration::from_secs(4),
        lease_ms: (100, 1500),
        wait_ms: (20, 800),
        p_crash: 0.1,
        p_reenter: 0.1,
        primitives: vec![Primitive::Mutex],
        ..Workload::default()
    }
}

// Mutex contention with lost requests and replies, database restarts, a client cut off and
// crashes, in both dialects: never two holders, tokens in holding order, progress on every
// seed, nothing left, and every fault happened.
#[test]
fn sql_mutex_under_loss_restarts_and_crashes_is_safe_and_leaves_nothing() {
    let (mut restarts, mut reaped, mut adopted, mut notified, mut lost) = (0, 0, 0, 0, 0);
    every_seed(0..seeds(), |seed| {
        let (mut sim, runner) = run(seed, mutex_workload());
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
        assert!(runner.stats.acquired > 0, "seed {seed}: nothing was acquired");
        restarts += sim.server.stats.restarts;
        reaped += sim.server.stats.reaped;
        adopted += sim.server.stats.adopted;
        notified += sim.server.stats.notified;
        lost += runner.stats.lost;
        check_nothing_left(&mut sim);
    });
    assert!(restarts > 0, "the database never restarted");
    assert!(reaped > 0, "no expired row was reaped (crashed clients' rows must be)");
    assert!(adopted > 0, "no acquire found its own row (retries and re-checks must)");
    assert!(notified > 0, "no PostgreSQL notification was sent");
    assert!(lost > 0, "no lease was lost");
}

fn shared_workload() -> Workload {
    Workload {
        clients: 6,
        primitives: vec![
            Primitive::Read { writers_first: true },
            Primitive::Write,
            Primitive::Semaphore { permits: 2 },
            Primitive::Leader { value: String::new() },
        ],
        ..mutex_workload()
    }
}

// Read-write locks, semaphores and elections under the same faults: writers and leaders alone,
// readers together, never more semaphore holders than permits, tokens in holding order
// wherever a hold is exclusive, nothing left.
#[test]
fn sql_shared_primitives_under_faults_are_safe_and_leave_nothing() {
    let mut shared_reads = 0;
    let mut full_semaphores = 0;
    every_seed(0..seeds(), |seed| {
        let (mut sim, runner) = run(seed, shared_workload());
        for name in ["alpha", "beta"] {
            if check::max_concurrent_beliefs(&sim, &format!("rw:{name}")) > 1 {
                shared_reads += 1;
            }
            if check::max_concurrent_beliefs(&sim, &format!("sem2:{name}")) == 2 {
                full_semaphores += 1;
            }
        }
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
        assert!(runner.stats.acquired > 0, "seed {seed}: nothing was acquired");
        check_nothing_left(&mut sim);
    });
    assert!(shared_reads > 0, "readers never shared a read-write lock");
    assert!(full_semaphores > 0, "no semaphore ever had both its permits taken");
}

/// Runs until `done` holds, or panics after `within`.
fn run_until(sim: &mut Sim, within: Duration, what: &str, done: impl FnMut(&Sim) -> bool) {
    let limit = sim.now + within;
    assert!(sim.run_until(limit, done), "{what} did not happen within {within:?}");
}

// A holder stopped (SIGSTOP) past its lease: its hold ends, by its own clock counted from the
// send time, before its row expires on the server's clock, so before the next holder is
// granted; when it runs again it is told; the next holder's token is larger.
#[test]
fn sql_paused_holder_loses_its_lease_before_the_next_grant() {
    every_seed(0..seeds(), |seed| paused_holder(seed, 100));
}

// The checks have teeth: a database that expires rows at 80 % of the time they were set for
// lets a paused holder's row go while it still believes it holds, and the next grant overlaps
// its belief: the paused-holder run fails on some seeds.
#[test]
fn sql_paused_holder_check_fails_when_rows_expire_early() {
    let caught = (0..seeds().max(40)).filter(|&seed| std::panic::catch_unwind(|| paused_holder(seed, 80)).is_err()).count();
    assert!(caught > 0, "early row expiry was never caught");
}

/// One paused-holder run on a database expiring rows at `expiry_pct` % (panics on a violation).
fn paused_holder(seed: u64, expiry_pct: u32) {
    {
        let mut rng = Rng::new(seed ^ 0x5709);
        let mut sim = Sim::sql(dialect(seed), seed, net_for(seed).lossy(0.0, 0.0, 0.0));
        sim.server.expiry_pct = expiry_pct;
        let [a, b, c]: [ClientId; 3] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let opts = LockOptions::renewed_lease(ms(900));
        let first = sim.acquire(a, "paused", &opts, Wait::Forever);
        run_until(&mut sim, ms(1000), "the first grant", |s| s.granted(a, first).is_some());
        let (_, lease_a, fence_a) = sim.granted(a, first).expect("granted");
        let waits = [sim.acquire(b, "paused", &opts, Wait::Forever), sim.acquire(c, "paused", &opts, Wait::Forever)];
        sim.run_for(ms(rng.between(50, 900)));
        assert!(sim.clients[a].engine.is_held(sim.now, lease_a), "seed {seed}: the holder lost its lease before the pause");
        let stop = ms(rng.between(1000, 3000));
        let resume = sim.now + stop;
        sim.pause_client(a, resume);
        run_until(&mut sim, stop + ms(4000), "the next grant", |s| s.granted(b, waits[0]).is_some() || s.granted(c, waits[1]).is_some());
        let (who, op) = if sim.granted(b, waits[0]).is_some() { (b, waits[0]) } else { (c, waits[1]) };
        let (granted_at, _, fence) = sim.granted(who, op).expect("granted");
        let a_belief = sim.beliefs.iter().find(|x| x.client == a && x.lease == lease_a).expect("a's belief");
        let a_end = a_belief.segments().last().map(|s| s.1).expect("a held");
        assert!(a_end <= granted_at, "seed {seed}: the paused holder believed it held until {a_end:?}, past the next grant at {granted_at:?}");
        assert!(fence.is_some() && fence > fence_a, "seed {seed}: the next token {fence:?} does not exceed {fence_a:?}");
        let left = resume.saturating_duration_since(sim.now) + ms(10);
        run_until(&mut sim, left, "the paused holder's resumption", |s| s.now >= resume);
        sim.run_for(ms(400));
        let told = sim.clients[a].events.iter().any(|(at, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a) && *at >= resume);
        assert!(told, "seed {seed}: the paused holder was not told its lease was lost when it ran again");
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
    }
}

/// One of a client's concurrent acquires of one name.
#[derive(Clone, Copy, Debug)]
enum Handle {
    Idle(Instant),
    Waiting(OpId),
    Holding(LeaseId, Instant),
}

/// Each of `clients` clients keeps `per_client` acquires of one mutex going at once; a waiter
/// gives up (cancels) with `p_cancel` at each instant it looks; every client closes at the
/// end. Checks exclusion, fencing order, and that no live row is left.
fn concurrent_run(seed: u64, clients: usize, per_client: usize, p_cancel: f64) {
    let mut sim = Sim::sql(dialect(seed), seed, net_for(seed));
    let mut rng = Rng::new(seed ^ 0xC0C0);
    let clients = sim.add_clients(clients);
    let opts = LockOptions::renewed_lease(ms(1000));
    let mut handles: Vec<(ClientId, Handle)> =
        clients.iter().flat_map(|&c| (0..per_client).map(move |_| (c, Handle::Idle(Instant::default())))).collect();
    let end = sim.now + Duration::from_secs(3);
    let (mut acquired, mut cancelled) = (0, 0);
    while sim.now < end {
        let now = sim.now;
        for (c, h) in handles.iter_mut() {
            *h = match *h {
                Handle::Idle(t) if t <= now => Handle::Waiting(sim.acquire(*c, "alpha", &opts, Wait::Forever)),
                Handle::Waiting(op) => match (sim.granted(*c, op), sim.done(*c, op)) {
                    (Some((_, lease, _)), _) => {
                        acquired += 1;
                        let at = now + ms(rng.between(5, 200));
                        sim.wake_at(at);
                        Handle::Holding(lease, at)
                    }
                    (None, Some(_)) => Handle::Idle(now + ms(10)),
                    (None, None) if rng.chance(p_cancel) => {
                        cancelled += 1;
                        sim.cancel(*c, op);
                        Handle::Idle(now + ms(rng.between(0, 100)))
                    }
                    (None, None) => Handle::Waiting(op),
                },
                Handle::Holding(lease, t) if t <= now => {
                    sim.release(*c, lease);
                    let at = now + ms(rng.between(0, 50));
                    sim.wake_at(at);
                    Handle::Idle(at)
                }
                other => other,
            };
        }
        sim.step(end);
    }
    for &c in &clients {
        sim.shutdown(c);
    }
    sim.run_for(Duration::from_secs(1));
    check::mutual_exclusion(&sim);
    check::fences_order_exclusive_holds(&sim);
    assert!(acquired > 3, "seed {seed}: only {acquired} grants");
    assert!(p_cancel == 0.0 || cancelled > 0, "seed {seed}: no waiter gave up");
    check_nothing_left(&mut sim);
}

// Many waiters that give up at random: three clients with twelve acquires of one mutex each
// going at once, waiters cancelling as they wait, every client closed at the end: never two
// holders, and no live row is left.
#[test]
fn sql_many_waiters_with_random_cancels_leave_no_row() {
    every_seed(0..(seeds() / 10).max(4), |seed| concurrent_run(seed, 3, 12, 0.003));
}
