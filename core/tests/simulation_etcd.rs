//! The real etcd backend (`LockEngine<EtcdBackend>`, core/src/backend/etcd) in the deterministic
//! simulator, over the cluster model of `sim/etcd.rs`: the same harness, workload and checks as
//! `simulation.rs` and `simulation_zk.rs`, with etcd's faults — requests and replies lost (a
//! create applied whose reply is lost), a Raft leader failover during contention (nothing
//! served, every watch stream broken, leases extended), crashed and paused (SIGSTOP) clients,
//! leases expiring exactly a TTL after the last keepalive the leader took, one client cut off
//! from the cluster for up to 2.5 TTLs (its lease may expire meanwhile).
//!
//! Checked on every run:
//! - **exclusion**: no two clients believe they hold one mutex, write lock or leadership at the
//!   same virtual instant, readers share only with readers, a semaphore never has more holders
//!   than permits (a belief lasting from the grant to its `valid_until`, moved by confirmed
//!   renewals, its release, loss or crash). Strict: no tolerance.
//! - **fencing**: the tokens (the holder key's create revision) of two holds of one lock of
//!   which one is exclusive increase in the order they started to hold.
//! - **nothing left**: once the workload wound down and crashed clients' leases expired, no
//!   key is left.
//! - **no stuck waiter**: a key that holds by the recipe's rules, on the lease of a running
//!   client, is never left unclaimed (nobody believing it holds) for long.
//!
//! Dedicated runs: a holder paused past its lease's TTL is told of the loss before the next
//! grant, and that check fails on a cluster that expires leases early (it has teeth); one
//! client's concurrent acquires of one name (a key and a lease each) exclude each other, and
//! many concurrent waiters cancelling at random leave no key and no extra lease behind.
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation_etcd`
//! (`LOCKGATE_SIM_SEEDS=2000` explores further).

mod sim;

use std::collections::HashMap;

use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Event, LeaseId, LockOptions, OpId, Primitive, Wait};

use sim::check;
use lockgate_core::backend::etcd::EtcdOp;
use sim::etcd::{ClusterConfig, EtcdSim as Sim};
use sim::harness::ClientId;
use sim::net::Rng;
use sim::workload::{Runner, Workload};
use sim::{Isolation, NetConfig};

/// Seeds per property; `LOCKGATE_SIM_SEEDS=2000` explores further.
fn seeds() -> u64 {
    std::env::var("LOCKGATE_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(150)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The lease TTL clients ask for (etcd's smallest, 1 s: two thirds of it, 667 ms, count).
const TTL: u64 = 1000;

/// Latencies that vary with the seed, well below the TTL; 2 % of requests and of replies lost.
fn net_for(seed: u64) -> NetConfig {
    let mut rng = Rng::new(seed ^ 0xE7CD);
    let max = Duration::from_micros(rng.between(100, 8_000));
    let nmax = Duration::from_micros(rng.between(100, 8_000));
    NetConfig { latency: (Duration::from_micros(50), max), notify_latency: (Duration::from_micros(50), nmax), ..NetConfig::default() }
        .lossy(0.02, 0.02, 0.0)
}

fn cluster() -> ClusterConfig {
    ClusterConfig { ttl: ms(TTL), ..ClusterConfig::default() }
}

/// Runs `run` for every seed, and fails with the list of every seed that failed (each with the
/// first line of its failure).
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

/// Watches the keys that hold by the recipes' rules: one whose owner runs (not crashed, not
/// paused) that nobody believes holds, for longer than `patience`, is a stuck waiter.
struct StuckWatch {
    patience: Duration,
    unclaimed: HashMap<String, Instant>,
    stuck: Vec<String>,
}

impl StuckWatch {
    fn new(patience: Duration) -> StuckWatch {
        StuckWatch { patience, unclaimed: HashMap::new(), stuck: Vec::new() }
    }

    fn sample(&mut self, sim: &Sim) {
        let now = sim.now;
        let held: Vec<u64> = sim
            .beliefs
            .iter()
            .filter(|b| b.end.is_none() && b.claims.last().is_some_and(|c| c.1 > now))
            .filter_map(|b| b.fence)
            .collect();
        let mut seen = Vec::new();
        for (key, rev, owner) in sim.server.heads() {
            let running = owner.is_some_and(|c| !sim.clients[c].crashed && !sim.client_is_paused(c));
            if !running || held.contains(&(rev as u64)) {
                continue;
            }
            let since = *self.unclaimed.entry(key.clone()).or_insert(now);
            if now.saturating_duration_since(since) > self.patience {
                self.stuck.push(format!("{key} (rev {rev}, client {owner:?}) unclaimed since {since:?}, now {now:?}"));
                self.unclaimed.insert(key.clone(), now);
            }
            seen.push(key);
        }
        self.unclaimed.retain(|k, _| seen.contains(k));
    }
}

/// One run of `workload`, with a leader failover during contention on every other seed; fails
/// on a stuck waiter.
fn run(seed: u64, cfg: ClusterConfig, workload: Workload) -> (Sim, Runner) {
    let mut sim = Sim::etcd(cfg, seed, net_for(seed));
    let mut rng = Rng::new(seed ^ 0xFA11);
    let clients = workload.clients;
    let failover = (seed % 2 == 0).then(|| (sim.now + ms(rng.between(200, 2500)), ms(rng.between(20, 600))));
    // Two seeds in three: one client cut off from the cluster (its requests lost) for 0.3 to
    // 2.5 TTLs, so its lease may expire on the server while it is away.
    // It heals before the workload ends (the hook runs only until then).
    let last = sim.now + workload.duration - ms(100);
    let partition = (seed % 3 != 0).then(|| {
        let at = sim.now + ms(rng.between(100, 1500));
        (at, rng.between(0, clients as u64 - 1) as usize, (at + ms(rng.between(300, 5 * TTL / 2))).min(last))
    });
    for at in failover.map(|f| f.0).into_iter().chain(partition.iter().flat_map(|p| [p.0, p.2])) {
        sim.wake_at(at);
    }
    let mut runner = Runner::new(&mut sim, workload, seed);
    let (mut failed_over, mut cut, mut healed) = (false, false, false);
    // A head's owner may be between a failed attempt and its retry (backoff up to a second),
    // waiting out an election, or cut off (its key then goes with its lease): longer than
    // that, and it is stuck.
    let mut stuck = StuckWatch::new(ms(1000 + 3 * TTL));
    runner.run_with(&mut sim, |s| {
        if let Some((at, election)) = failover {
            if !failed_over && s.now >= at {
                failed_over = true;
                s.fail_etcd_leader(election);
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

/// After the workload wound down: once crashed clients' leases expired, nothing at all.
fn check_nothing_left(sim: &mut Sim) {
    sim.run_for(ms(TTL + 1500));
    check::nothing_left(sim);
}

fn mutex_workload() -> Workload {
    Workload {
        clients: 5,
        duration: Duration::from_secs(4),
        // Shorter and longer than what one keepalive is worth (667 ms).
        lease_ms: (100, 1500),
        wait_ms: (20, 800),
        p_crash: 0.1,
        p_reenter: 0.1,
        primitives: vec![Primitive::Mutex],
        ..Workload::default()
    }
}

// Mutex contention with lost requests and replies, a leader failover on every other seed and
// crashes: never two holders, tokens in holding order, progress on every seed, nothing left,
// and every fault happened.
#[test]
fn etcd_mutex_under_loss_failover_and_crashes_is_safe_and_leaves_nothing() {
    let (mut failovers, mut expired, mut adopted, mut lost, mut unavailable) = (0, 0, 0, 0, 0);
    every_seed(0..seeds(), |seed| {
        let (mut sim, runner) = run(seed, cluster(), mutex_workload());
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
        assert!(runner.stats.acquired > 0, "seed {seed}: nothing was acquired");
        failovers += sim.server.stats.failovers;
        expired += sim.server.stats.leases_expired;
        adopted += sim.server.stats.adopted;
        unavailable += sim.server.stats.unavailable;
        lost += runner.stats.lost;
        check_nothing_left(&mut sim);
    });
    assert!(failovers > 0, "no leader failed");
    assert!(unavailable > 0, "no request met an election");
    assert!(expired > 0, "no lease expired (crashed clients' leases must)");
    assert!(adopted > 0, "no create retry found its own key after a lost reply");
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
fn etcd_shared_primitives_under_faults_are_safe_and_leave_nothing() {
    let mut shared_reads = 0;
    let mut full_semaphores = 0;
    every_seed(0..seeds(), |seed| {
        let (mut sim, runner) = run(seed, cluster(), shared_workload());
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

// A holder stopped (SIGSTOP) past its lease's TTL: its hold ends, by its own clock, before the
// leader expires the lease, so before the next holder is granted; when it runs again it is
// told; the next holder's token is larger.
#[test]
fn etcd_paused_holder_loses_its_lease_before_the_next_grant() {
    every_seed(0..seeds(), |seed| paused_holder(seed, cluster()));
}

/// One paused-holder run on `cfg`'s cluster (panics on a violation).
fn paused_holder(seed: u64, cfg: ClusterConfig) {
    {
        let mut rng = Rng::new(seed ^ 0x5709);
        let mut sim = Sim::etcd(cfg, seed, NetConfig { ..net_for(seed) }.lossy(0.0, 0.0, 0.0));
        let [a, b, c]: [ClientId; 3] = [sim.add_client(), sim.add_client(), sim.add_client()];
        // Longer than what one keepalive is worth: the validity is the lease TTL's two thirds.
        let opts = LockOptions::renewed_lease(ms(2000));
        let first = sim.acquire(a, "paused", &opts, Wait::Forever);
        run_until(&mut sim, ms(1000), "the first grant", |s| s.granted(a, first).is_some());
        let (_, lease_a, fence_a) = sim.granted(a, first).expect("granted");
        let waits = [sim.acquire(b, "paused", &opts, Wait::Forever), sim.acquire(c, "paused", &opts, Wait::Forever)];
        sim.run_for(ms(rng.between(50, 900)));
        assert!(sim.clients[a].engine.is_held(sim.now, lease_a), "seed {seed}: the holder lost its lease before the pause");
        let stop = ms(rng.between(TTL + 50, 3 * TTL));
        let resume = sim.now + stop;
        sim.pause_client(a, resume);
        run_until(&mut sim, stop + ms(2000), "the next grant", |s| s.granted(b, waits[0]).is_some() || s.granted(c, waits[1]).is_some());
        let (who, op) = if sim.granted(b, waits[0]).is_some() { (b, waits[0]) } else { (c, waits[1]) };
        let (granted_at, _, fence) = sim.granted(who, op).expect("granted");
        let a_belief = sim.beliefs.iter().find(|x| x.client == a && x.lease == lease_a).expect("a's belief");
        let a_end = a_belief.segments().last().map(|s| s.1).expect("a held");
        assert!(a_end <= granted_at, "seed {seed}: the paused holder believed it held until {a_end:?}, past the next grant at {granted_at:?}");
        assert!(fence.is_some() && fence > fence_a, "seed {seed}: the next token {fence:?} does not exceed {fence_a:?}");
        let left = resume.saturating_duration_since(sim.now) + ms(10);
        run_until(&mut sim, left, "the paused holder's resumption", |s| s.now >= resume);
        sim.run_for(ms(50));
        let told = sim.clients[a].events.iter().any(|(at, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a) && *at >= resume);
        assert!(told, "seed {seed}: the paused holder was not told its lease was lost when it ran again");
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
    }
}

// The checks have teeth: a cluster that expires leases at half their TTL (before the two
// thirds a keepalive is counted for) lets a paused holder's key go while it still believes it
// holds, and the next grant overlaps its belief: the paused-holder run fails on some seeds.
#[test]
fn etcd_paused_holder_check_fails_when_leases_expire_early() {
    let mut caught = 0;
    for seed in 0..seeds().max(40) {
        let cfg = ClusterConfig { expiry_pct: 50, ..cluster() };
        if std::panic::catch_unwind(|| paused_holder(seed, cfg)).is_err() {
            caught += 1;
        }
    }
    assert!(caught > 0, "early lease expiry was never caught");
}

/// One of a client's concurrent acquires of one name.
#[derive(Clone, Copy, Debug)]
enum Handle {
    Idle(Instant),
    Waiting(OpId),
    Holding(LeaseId, Instant),
}

/// A run where each of `clients` clients keeps `per_client` acquires of one mutex going at
/// once (as that many handles of one client would), under lost requests and replies and a
/// failover on every other seed; a waiter gives up (cancels) with `p_cancel` at each instant it
/// looks. Checks exclusion, fencing order, that every client keeps at most its own lease once
/// all is released, and that nothing is left. Returns how many clients needed a second lease.
fn concurrent_run(seed: u64, clients: usize, per_client: usize, p_cancel: f64) -> usize {
    let mut sim = Sim::etcd(cluster(), seed, net_for(seed));
    let mut rng = Rng::new(seed ^ 0xC0C0);
    let clients = sim.add_clients(clients);
    let opts = LockOptions::renewed_lease(ms(1000));
    let mut handles: Vec<(ClientId, Handle)> =
        clients.iter().flat_map(|&c| (0..per_client).map(move |_| (c, Handle::Idle(Instant::default())))).collect();
    let end = sim.now + Duration::from_secs(3);
    let mut failover = (seed % 2 == 0).then(|| (sim.now + ms(rng.between(200, 2500)), ms(rng.between(20, 600))));
    if let Some((at, _)) = failover {
        sim.wake_at(at);
    }
    let (mut acquired, mut cancelled) = (0, 0);
    while sim.now < end {
        if let Some((_, election)) = failover.filter(|(at, _)| sim.now >= *at) {
            failover = None;
            sim.fail_etcd_leader(election);
        }
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
    for (c, h) in &handles {
        match *h {
            Handle::Waiting(op) => sim.cancel(*c, op),
            Handle::Holding(lease, _) => {
                sim.release(*c, lease);
            }
            Handle::Idle(_) => {}
        }
    }
    sim.run_for(Duration::from_secs(2));
    check::mutual_exclusion(&sim);
    check::fences_order_exclusive_holds(&sim);
    assert!(acquired > 3, "seed {seed}: only {acquired} grants");
    assert!(p_cancel == 0.0 || cancelled > 0, "seed {seed}: no waiter gave up");
    for &c in &clients {
        let kept = sim.clients[c].engine.backend().leases();
        if kept.len() > 1 && std::env::var("ETCD_TRACE").is_ok() {
            let reqs: Vec<String> = sim.clients[c]
                .requests
                .iter()
                .filter(|(_, r)| matches!(r.op, EtcdOp::LeaseGrant { .. } | EtcdOp::LeaseRevoke { .. }))
                .map(|(at, r)| format!("{at:?} {:?} {:?}", r.id, r.op))
                .collect();
            eprintln!("seed {seed} client {c} kept {kept:?} keys {:?}\n{}", sim.server.key_names(), reqs.join("\n"));
        }
        assert!(kept.len() <= 1, "seed {seed}: client {c} keeps {} leases alive after releasing everything", kept.len());
    }
    check_nothing_left(&mut sim);
    clients
        .iter()
        .filter(|&&c| sim.clients[c].requests.iter().filter(|(_, r)| matches!(r.op, EtcdOp::LeaseGrant { .. })).count() > 1)
        .count()
}

// One key per waiter: each of two clients keeps three acquires of one mutex going at once (as
// three handles of one client would). They get a key each (a lease each beyond the first) and
// exclude each other and the other client's; the extra leases go with their last key.
#[test]
fn etcd_concurrent_acquires_of_one_client_on_one_name_exclude_each_other() {
    let mut extra_leases = 0;
    every_seed(0..seeds(), |seed| extra_leases += concurrent_run(seed, 2, 3, 0.0));
    assert!(extra_leases > 0, "no client needed a lease of its own for a second key");
}

// Many waiters that give up at random: three clients with twelve acquires of one mutex each
// going at once, waiters cancelling as they wait. Never two holders, and no key and no extra
// lease is left once all is released.
#[test]
fn etcd_many_waiters_with_random_cancels_leave_no_key() {
    every_seed(0..seeds() / 10, |seed| {
        concurrent_run(seed, 3, 12, 0.003);
    });
}
