//! The real ZooKeeper backend (`LockEngine<ZooKeeperBackend>`, core/src/backend/zookeeper) in the
//! deterministic simulator, over the ensemble model of `sim/zk.rs`: the same harness, workload
//! and checks as `simulation.rs`, with ZooKeeper's faults — connections that drop at a request
//! (before it ran, or after: a create applied whose reply is lost), partitions longer than the
//! session, followers that answer reads from behind the leader, leader failovers, crashed and
//! paused (SIGSTOP) clients, sessions expiring.
//!
//! Checked on every run (`*_is_safe`):
//! - **exclusion**: no two clients believe they hold one mutex, write lock or leadership at the
//!   same virtual instant, readers share only with readers, a semaphore never has more holders
//!   than permits — a belief lasting from the grant to its `valid_until` (moved by confirmed
//!   renewals), its release, loss or crash. Strict: no tolerance.
//! - **fencing**: the tokens (the holder node's `czxid`) of two holds of one lock of which one is
//!   exclusive increase in the order they started to hold, across leader failovers (new
//!   epochs).
//!
//! And on the same runs (`*_leave(s)_no_node_and_no_stuck_waiter`):
//! - **no stuck waiter**: a node that holds by the recipe's rules (a mutex's or election's
//!   head, a read-write lock's leading readers or writer), owned by a running, connected
//!   client, is never left unclaimed (nobody believing it holds) for long.
//! - **no orphans**: once every engine is idle, no node is left in the session of a client that
//!   is still running (a lost create reply adopted by its protected prefix, or deleted); once
//!   the crashed clients' sessions expired and the leader reaped the containers, nothing at all.
//!
//! Dedicated runs: a holder paused (SIGSTOP) past its session is told of the loss before the
//! next grant; clients stopped at random moments (holding, waiting or idle) never overlap; a create whose reply is lost is adopted, never orphaned; the exclusion check
//! fails on an ensemble that expires sessions early (it has teeth).
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation_zk`
//! (`LOCKGATE_SIM_SEEDS=2000` explores further).

mod sim;

use std::collections::HashMap;

use lockgate_core::time::{Duration, Instant};
use lockgate_core::engine::{Done, LeaderInfo};
use lockgate_core::{Event, LockOptions, Primitive, Wait};

use sim::check;
use sim::harness::ClientId;
use sim::net::Rng;
use sim::workload::{Runner, Workload};
use sim::zk::{EnsembleConfig, ZkSim as Sim};
use sim::NetConfig;

/// Seeds per property; `LOCKGATE_SIM_SEEDS=2000` explores further.
fn seeds() -> u64 {
    std::env::var("LOCKGATE_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200)
}

/// Seeds for the tests that show a check failing: at least the 40 whose counts the comments
/// give, whatever `LOCKGATE_SIM_SEEDS` says.
fn teeth_seeds() -> u64 {
    seeds().max(40)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The session timeout clients ask for (the ensemble's tick is 50 ms: it grants it as is).
const SESSION: u64 = 600;

/// Latencies that vary with the seed, well below the session timeout; no loss on the harness's
/// side (the model drops whole connections itself).
fn net_for(seed: u64) -> NetConfig {
    let mut rng = Rng::new(seed ^ 0xBEEF);
    let max = Duration::from_micros(rng.between(100, 5_000));
    let nmax = Duration::from_micros(rng.between(100, 5_000));
    NetConfig { latency: (Duration::from_micros(50), max), notify_latency: (Duration::from_micros(50), nmax), ..NetConfig::default() }
}

/// A 3-member ensemble (1 for every fourth seed) whose followers lag up to 30 ms, whose
/// connections drop at 3 % of requests, and whose outages are partitions of 0.3-1.2 s (up to
/// twice the session) one time in five. Every fifth seed's ensemble has a 20 ms tick, so it
/// grants 400 ms sessions to clients asking for 600 ms: validity must count from the
/// negotiated timeout. Every third seed's client library forgets its watches on a reconnect.
fn ensemble(seed: u64) -> EnsembleConfig {
    EnsembleConfig {
        members: if seed % 4 == 3 { 1 } else { 3 },
        tick: if seed % 5 == 4 { ms(20) } else { ms(50) },
        rewatch: seed % 3 != 1,
        session_timeout: ms(SESSION),
        follower_lag: (Duration::ZERO, ms(30)),
        p_drop: 0.03,
        p_long_outage: 0.2,
        ..EnsembleConfig::default()
    }
}

/// Faults injected at chosen instants: one leader failover (every other seed), a partition of
/// one client, and a follower stopped (SIGSTOP) for up to twice the session timeout.
struct Faults {
    failover: Option<(Instant, Duration)>,
    partition: (Instant, ClientId, Duration),
    stop: (Instant, Duration),
    done: (bool, bool, bool),
}

impl Faults {
    fn pick(sim: &mut Sim, seed: u64, clients: usize) -> Faults {
        let mut rng = Rng::new(seed ^ 0xFA11);
        let failover = (seed % 2 == 0).then(|| (sim.now + ms(rng.between(200, 1500)), ms(rng.between(20, 400))));
        let partition =
            (sim.now + ms(rng.between(100, 1500)), rng.between(0, clients as u64 - 1) as usize, ms(rng.between(100, 1500)));
        let stop = (sim.now + ms(rng.between(100, 3000)), ms(rng.between(50, 2 * SESSION)));
        if let Some((at, _)) = failover {
            sim.wake_at(at);
        }
        sim.wake_at(partition.0);
        sim.wake_at(stop.0);
        Faults { failover, partition, stop, done: (false, false, false) }
    }

    fn inject(&mut self, sim: &mut Sim) {
        if let Some((at, election)) = self.failover {
            if !self.done.0 && sim.now >= at {
                self.done.0 = true;
                sim.fail_leader(election);
            }
        }
        let (at, c, outage) = self.partition;
        if !self.done.1 && sim.now >= at {
            self.done.1 = true;
            if !sim.clients[c].crashed {
                sim.drop_zk_connection(c, Some(outage));
            }
        }
        let (at, length) = self.stop;
        if !self.done.2 && sim.now >= at && sim.server.cfg.members > 1 {
            self.done.2 = true;
            let follower = (sim.server.leader() + 1) % sim.server.cfg.members;
            sim.stop_member(follower, at + length);
        }
    }
}

/// Watches the nodes that hold by the recipes' rules (mutex and election heads, the readers
/// before a read-write lock's first writer or that writer): one owned by a running, connected
/// client that nobody believes holds, for longer than `patience`, is a stuck waiter.
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
        for (path, czxid, owner) in sim.server.heads(now) {
            if owner.is_none() || held.contains(&(czxid as u64)) {
                continue;
            }
            let since = *self.unclaimed.entry(path.clone()).or_insert(now);
            if now.saturating_duration_since(since) > self.patience {
                self.stuck.push(format!("{path} (czxid {czxid:#x}, client {owner:?}) unclaimed since {since:?}, now {now:?}"));
                self.unclaimed.insert(path.clone(), now);
            }
            seen.push(path);
        }
        self.unclaimed.retain(|p, _| seen.contains(p));
    }
}

/// Runs `run` for every seed, and fails with the list of every seed that failed (each with the
/// first line of its failure), so one run shows how widespread a problem is.
fn every_seed(seeds: impl Iterator<Item = u64>, mut run: impl FnMut(u64)) {
    let mut failed = Vec::new();
    for seed in seeds {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed)));
        if let Err(e) = r {
            let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
            let msg = msg.unwrap_or_default();
            let first = msg.lines().next().unwrap_or("");
            failed.push(if first.starts_with("seed ") { first.to_string() } else { format!("seed {seed}: {first}") });
        }
    }
    assert!(failed.is_empty(), "{} seed(s) failed:\n{}", failed.len(), failed.join("\n"));
}

/// What one run saw, for the assertions made over all seeds.
#[derive(Default)]
struct Totals {
    lost: usize,
    /// Runs in which one lock was held with tokens of two leader epochs (zxid `epoch << 32`).
    across_epochs: usize,
    stats: Vec<sim::zk::ZkStats>,
}

impl Totals {
    fn sum(&self, f: impl Fn(&sim::zk::ZkStats) -> usize) -> usize {
        self.stats.iter().map(f).sum()
    }
}

/// One run of `workload` over the faulty ensemble (with the faults of [`Faults`] if `faults`),
/// and the stuck waiters seen during it.
fn run_checked(seed: u64, cfg: EnsembleConfig, workload: Workload, faults: bool) -> (Sim, Runner, Vec<String>) {
    let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
    let clients = workload.clients;
    let mut runner = Runner::new(&mut sim, workload, seed);
    let mut faults = faults.then(|| Faults::pick(&mut sim, seed, clients));
    // A head's owner may be between a failed attempt and its retry (the engine backs off up to
    // a second) or reconnecting after an outage of up to twice the session: longer than that,
    // and it is stuck.
    let mut stuck = StuckWatch::new(ms(1000 + 2 * SESSION));
    runner.run_with(&mut sim, |s| {
        if let Some(f) = faults.as_mut() {
            f.inject(s);
        }
        stuck.sample(s);
    });
    (sim, runner, stuck.stuck)
}

/// Everything client `c` asked for and was told, in order (for a failure's message).
fn history(sim: &Sim, c: ClientId) -> String {
    let mut lines: Vec<(Instant, String)> = sim.clients[c].requests.iter().map(|(at, r)| (*at, format!("-> {:?} {:?}", r.id, r.op))).collect();
    lines.extend(sim.clients[c].events.iter().map(|(at, e)| (*at, format!("   {e:?}"))));
    lines.sort_by_key(|l| l.0);
    lines.iter().map(|(at, l)| format!("{at:?} {l}")).collect::<Vec<_>>().join("\n")
}

/// After the workload wound down (every engine idle): nothing of a running client is left;
/// once the crashed clients' sessions expired and containers were reaped, nothing at all.
fn check_nothing_left(sim: &mut Sim, seed: u64) {
    let orphans = sim.server.orphans();
    if !orphans.is_empty() && std::env::var("ZK_TRACE").is_ok() {
        for c in 0..sim.clients.len() {
            eprintln!("client {c}:\n{}", history(sim, c));
        }
    }
    assert!(orphans.is_empty(), "seed {seed}: nodes left in running clients' sessions: {orphans:?}");
    // A crashed client's session lives a session timeout (plus an election) after its last
    // ping; containers go one level per reaping round.
    sim.run_for(ms(SESSION + 500) + sim.server.cfg.container_check * 6);
    check::nothing_left(sim);
}

fn mutex_workload() -> Workload {
    Workload {
        clients: 5,
        duration: Duration::from_secs(4),
        // Shorter and longer than what one confirmation of the session is worth (400 ms).
        lease_ms: (100, 1000),
        wait_ms: (20, 800),
        p_crash: 0.1,
        p_reenter: 0.1,
        primitives: vec![Primitive::Mutex],
        ..Workload::default()
    }
}

// Mutex contention on a faulty ensemble: connections dropping before and after requests ran,
// partitions longer than the session, stale follower reads, a leader failover, crashes. Never
// two holders, tokens in holding order, progress on every seed, and every fault happened.
#[test]
fn zk_mutex_under_drops_partitions_lag_failover_and_crashes_is_safe() {
    let mut totals = Totals::default();
    every_seed(0..seeds(), |seed| {
        let (sim, runner, _) = run_checked(seed, ensemble(seed), mutex_workload(), true);
        totals.lost += runner.stats.lost;
        totals.stats.push(sim.server.stats.clone());
        let epochs = |key: &str| {
            let mut e: Vec<u64> = sim.beliefs.iter().filter(|b| b.key == key).filter_map(|b| b.fence).map(|f| f >> 32).collect();
            e.sort();
            e.dedup();
            e.len()
        };
        if ["mutex:alpha", "mutex:beta"].iter().any(|k| epochs(k) > 1) {
            totals.across_epochs += 1;
        }
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
        assert!(runner.stats.acquired > 0, "seed {seed}: nothing was acquired");
    });
    if std::env::var("ZK_STATS").is_ok() {
        eprintln!("lost leases {}, per seed: {:#?}", totals.lost, totals.stats);
    }
    // The faults really happened.
    assert!(totals.sum(|s| s.lost_create_replies) > 0, "no create lost its reply");
    assert!(totals.sum(|s| s.stale_reads) > 0, "no follower answered from behind");
    assert!(totals.sum(|s| s.sessions_expired) > 0, "no session expired");
    assert!(totals.sum(|s| s.failovers) > 0, "no leader failed");
    assert!(totals.across_epochs > 0, "no lock was held with tokens from before and after a failover");
    assert!(totals.sum(|s| s.reconnects) > 0, "no client reconnected");
    assert!(totals.sum(|s| s.stalls) > 0, "no client left a stopped follower");
    assert!(totals.sum(|s| s.watches_fired) > 0, "no watch fired");
    assert!(totals.sum(|s| s.containers_reaped) > 0, "no container was reaped");
    assert!(totals.lost > 0, "no lease was lost: partitions past the session were not exercised");
}

// The same runs: no waiter stuck behind a queue head nobody holds, no node left in a running
// client's session once every engine is idle, nothing at all once crashed clients' sessions
// expired. (Found two backend bugs, fixed in 8faa067: background deletes that gave up after the
// lease span left nodes in live sessions, 29 of the first 200 seeds; see the lost-create test.)
#[test]
fn zk_mutex_under_faults_leaves_no_node_and_no_stuck_waiter() {
    every_seed(0..seeds(), |seed| {
        let (mut sim, _, stuck) = run_checked(seed, ensemble(seed), mutex_workload(), true);
        assert!(stuck.is_empty(), "seed {seed}: waiters stuck while the lock was free: {}", stuck.join("; "));
        check_nothing_left(&mut sim, seed);
    });
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

// Read-write locks, semaphores and elections on the same faulty ensemble: writers and leaders
// alone, readers together, never more semaphore holders than permits, tokens in holding order
// wherever a hold is exclusive.
#[test]
fn zk_shared_primitives_under_faults_are_safe() {
    let mut shared_reads = 0;
    let mut full_semaphores = 0;
    every_seed(0..seeds(), |seed| {
        let (sim, runner, _) = run_checked(seed, ensemble(seed), shared_workload(), true);
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
    });
    assert!(shared_reads > 0, "readers never shared a read-write lock");
    assert!(full_semaphores > 0, "no semaphore ever had both its permits taken");
}

// The same runs leave nothing behind and no election waits behind a head nobody holds (34 of the
// first 200 seeds failed before 8faa067).
#[test]
fn zk_shared_primitives_under_faults_leave_no_node_and_no_stuck_waiter() {
    every_seed(0..seeds(), |seed| {
        let (mut sim, _, stuck) = run_checked(seed, ensemble(seed), shared_workload(), true);
        assert!(stuck.is_empty(), "seed {seed}: waiters stuck while the lock was free: {}", stuck.join("; "));
        check_nothing_left(&mut sim, seed);
    });
}

/// Runs until `done` holds, or panics after `within`.
fn run_until(sim: &mut Sim, within: Duration, what: &str, done: impl FnMut(&Sim) -> bool) {
    let limit = sim.now + within;
    assert!(sim.run_until(limit, done), "{what} did not happen within {within:?}");
}

// A holder stopped (SIGSTOP) past its session timeout: its lease ends, by its own clock, before
// the ensemble expires its session, so before the next holder is granted; when it runs again
// it is told the lease is lost; the next holder's token is larger.
#[test]
fn zk_paused_holder_loses_its_lease_before_the_next_grant() {
    every_seed(0..seeds(), |seed| {
        let mut rng = Rng::new(seed ^ 0x5709);
        let cfg = EnsembleConfig { session_timeout: ms(SESSION), ..ensemble(seed) };
        let mut sim = Sim::zookeeper(EnsembleConfig { p_drop: 0.0, p_long_outage: 0.0, ..cfg }, seed, net_for(seed));
        let [a, b, c] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let opts = LockOptions { auto_renew: true, ..LockOptions::fixed_lease(ms(300)) };
        let first = sim.acquire(a, "paused", &opts, Wait::Forever);
        run_until(&mut sim, ms(1000), "the first grant", |s| s.granted(a, first).is_some());
        let (_, lease_a, fence_a) = sim.granted(a, first).expect("granted");
        let waits = [sim.acquire(b, "paused", &opts, Wait::Forever), sim.acquire(c, "paused", &opts, Wait::Forever)];
        // Hold a while (renewals go on), then stop for one to three session timeouts.
        sim.run_for(ms(rng.between(50, 900)));
        assert!(sim.clients[a].engine.is_held(sim.now, lease_a), "seed {seed}: the holder lost its lease before the pause");
        let stop = ms(rng.between(SESSION + 50, 3 * SESSION));
        let resume = sim.now + stop;
        sim.pause_client(a, resume);
        run_until(&mut sim, stop + ms(2000), "the next grant", |s| {
            s.granted(b, waits[0]).is_some() || s.granted(c, waits[1]).is_some()
        });
        let (who, op) = if sim.granted(b, waits[0]).is_some() { (b, waits[0]) } else { (c, waits[1]) };
        let (granted_at, _, fence) = sim.granted(who, op).expect("granted");
        let a_until = sim.beliefs.iter().find(|x| x.client == a && x.lease == lease_a).expect("a's belief");
        let a_end = a_until.segments().last().map(|s| s.1).expect("a held");
        assert!(a_end <= granted_at, "seed {seed}: the paused holder believed it held until {a_end:?}, past the next grant at {granted_at:?}");
        assert!(fence.is_some() && fence > fence_a, "seed {seed}: the next token {fence:?} does not exceed the paused holder's {fence_a:?}");
        // It runs again and is told.
        let left = resume.saturating_duration_since(sim.now) + ms(10);
        run_until(&mut sim, left, "the paused holder's resumption", |s| s.now >= resume);
        sim.run_for(ms(50));
        let told = sim.clients[a].events.iter().any(|(at, e)| matches!(e, Event::Lost { lease, .. } if *lease == lease_a) && *at >= resume);
        assert!(told, "seed {seed}: the paused holder was not told its lease was lost when it ran again");
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
    });
}

// A create applied whose reply is lost with the connection: the backend finds its node again
// by its protected prefix after reconnecting (it holds with that node's token, or deletes it),
// and never leaves it behind. The reconnect may land on a follower that has not applied the
// create yet (the client never saw its zxid): the backend must make it catch up before looking
// (seed 74 duplicated the node before 8faa067).
#[test]
fn zk_lost_create_reply_is_adopted_never_orphaned() {
    every_seed(0..seeds(), |seed| {
        let cfg = EnsembleConfig { p_drop: 0.0, p_long_outage: 0.0, ..ensemble(seed) };
        let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
        let [a, b] = [sim.add_client(), sim.add_client()];
        let opts = LockOptions::fixed_lease(ms(300));
        // b holds, so a's node waits in the queue.
        let held = sim.acquire(b, "lost", &opts, Wait::Try);
        run_until(&mut sim, ms(1000), "b's grant", |s| s.granted(b, held).is_some());
        let (_, lease_b, _) = sim.granted(b, held).expect("granted");
        sim.server.drop_after_create.insert(a);
        let wait = sim.acquire(a, "lost", &opts, Wait::For(ms(3000)));
        run_until(&mut sim, ms(1000), "the lost create", |s| s.server.stats.lost_create_replies > 0);
        sim.run_for(ms(100));
        let mine: Vec<String> = sim.server.children("/lockgate/mutex/lost");
        assert_eq!(mine.len(), 2, "seed {seed}: a's retry made a second node instead of finding its own: {mine:?}");
        let release = sim.release(b, lease_b);
        run_until(&mut sim, ms(1000), "a's grant", |s| s.granted(a, wait).is_some() && s.done(b, release).is_some());
        let (_, lease_a, fence) = sim.granted(a, wait).expect("granted");
        let first = sim.server.created.iter().filter(|(_, (p, who))| *who == Some(a) && p.contains("/lost/")).map(|(z, _)| *z).min();
        assert_eq!(fence.map(|f| f as i64), first, "seed {seed}: a did not hold with the node its lost create made");
        sim.release(a, lease_a);
        sim.settle(ms(2000));
        check_nothing_left(&mut sim, seed);
    });
}

/// The mutex workload (with leases of `lease_ms`) over `cfg`, with the faults of [`Faults`];
/// whether the exclusion check fails.
fn exclusion_fails(seed: u64, cfg: EnsembleConfig, lease_ms: (u64, u64)) -> bool {
    let (sim, _) = {
        let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
        let mut runner = Runner::new(&mut sim, Workload { p_crash: 0.0, lease_ms, ..mutex_workload() }, seed);
        let mut faults = Faults::pick(&mut sim, seed, 5);
        runner.run_with(&mut sim, |s| faults.inject(s));
        (sim, runner)
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check::mutual_exclusion(&sim))).is_err()
}

// The check has teeth: an ensemble that expires a silent session after a third of the timeout
// it granted lets a second client in while a partitioned holder still believes it holds (16 of
// the first 40 seeds).
#[test]
fn zk_checks_catch_an_ensemble_that_expires_sessions_early() {
    let caught = (0..teeth_seeds().min(40))
        .filter(|&seed| exclusion_fails(seed, EnsembleConfig { expiry_pct: 30, ..ensemble(seed) }, mutex_workload().lease_ms))
        .count();
    assert!(caught > 0, "no run showed two holders with sessions expiring at 30 % of their timeout");
}

// The check has teeth: a transport that reports the session timeout it asked for (1.2 s) where
// the ensemble granted less (400 ms: 20 ticks of 20 ms) makes clients count on more than the
// session lives: a second client gets in while a partitioned holder still believes it holds
// (6 of the first 40 seeds).
#[test]
fn zk_checks_catch_a_session_timeout_longer_than_granted() {
    let asked = ms(2 * SESSION);
    let cfg = |seed| EnsembleConfig { tick: ms(20), session_timeout: asked, reported_timeout: Some(asked), ..ensemble(seed) };
    // Leases longer than the granted session, so the validity the wrong timeout allows is used.
    let caught = (0..teeth_seeds().min(40)).filter(|&seed| exclusion_fails(seed, cfg(seed), (600, 1000))).count();
    assert!(caught > 0, "no run showed two holders with validity counted from a timeout the ensemble did not grant");
}

/// Observes election `name` from `c` until it reports `term` (reads may be served by a lagging
/// follower: an older leader, or none, until it catches up); panics after a second.
fn observe_until(sim: &mut Sim, c: ClientId, name: &str, term: u64) -> LeaderInfo {
    let limit = sim.now + ms(1000);
    let mut seen = Vec::new();
    while sim.now < limit {
        let op = sim.observe_leader(c, name);
        run_until(sim, ms(500), "an observation", |s| s.done(c, op).is_some());
        match sim.done(c, op).expect("done").1 {
            Done::Observed(Some(info)) if info.term == term => return info,
            other => seen.push(format!("{other:?}")),
        }
        sim.run_for(ms(10));
    }
    panic!("the observer never saw term {term}: {seen:?}");
}

// Observers read the leader's value and term (its node's czxid, the grant's fencing token); a
// later leader's term is larger; once nobody campaigns there is no leader.
#[test]
fn zk_observers_see_each_leader_and_its_term() {
    every_seed(0..teeth_seeds(), |seed| {
        let cfg = EnsembleConfig { p_drop: 0.0, p_long_outage: 0.0, ..ensemble(seed) };
        let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
        let [a, b, observer] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let opts = LockOptions { auto_renew: true, ..LockOptions::fixed_lease(ms(300)) };
        let campaign = |sim: &mut Sim, c: ClientId, value: &str| {
            sim.acquire_primitive(c, "e", &Primitive::Leader { value: value.into() }, &opts, Wait::Forever)
        };
        let ops = [campaign(&mut sim, a, "at-a"), campaign(&mut sim, b, "at-b")];
        run_until(&mut sim, ms(1000), "a leader", |s| s.granted(a, ops[0]).is_some() || s.granted(b, ops[1]).is_some());
        let (first, second) = if sim.granted(a, ops[0]).is_some() { ((a, ops[0], "at-a"), (b, ops[1], "at-b")) } else { ((b, ops[1], "at-b"), (a, ops[0], "at-a")) };
        let (_, lease, term) = sim.granted(first.0, first.1).expect("granted");
        let term = term.expect("a leader has a term");
        let seen = observe_until(&mut sim, observer, "e", term);
        assert_eq!(seen.value, first.2, "seed {seed}: the observer read another value for the leader");
        sim.release(first.0, lease);
        run_until(&mut sim, ms(1000), "the next leader", |s| s.granted(second.0, second.1).is_some());
        let (_, lease, next) = sim.granted(second.0, second.1).expect("granted");
        let next = next.expect("a leader has a term");
        assert!(next > term, "seed {seed}: the next term {next} does not exceed {term}");
        let seen = observe_until(&mut sim, observer, "e", next);
        assert_eq!(seen.value, second.2, "seed {seed}: the observer read another value for the next leader");
        sim.release(second.0, lease);
        sim.run_for(ms(100));
        let op = sim.observe_leader(observer, "e");
        run_until(&mut sim, ms(500), "an observation", |s| s.done(observer, op).is_some());
        assert!(matches!(sim.done(observer, op).expect("done").1, Done::Observed(None)), "seed {seed}: a leader after everyone resigned");
        check::mutual_exclusion(&sim);
    });
}

// The liveness checks have teeth: a node in a running client's session that its engine does not
// know (what a lost create without adoption leaves) is reported as a stuck queue head while a
// waiter queues behind it, and as an orphan once every engine is idle.
#[test]
fn zk_checks_catch_a_node_its_owner_does_not_know() {
    every_seed(0..teeth_seeds().min(40), |seed| {
        let cfg = EnsembleConfig { p_drop: 0.0, p_long_outage: 0.0, ..ensemble(seed) };
        let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
        let [a, b] = [sim.add_client(), sim.add_client()];
        let opts = LockOptions::fixed_lease(ms(300));
        let first = sim.acquire(a, "planted", &opts, Wait::Try);
        run_until(&mut sim, ms(1000), "a's grant", |s| s.granted(a, first).is_some());
        let (_, lease, _) = sim.granted(a, first).expect("granted");
        sim.release(a, lease);
        sim.settle(ms(1000));
        let planted = sim.plant_node(a, "/lockgate/mutex/planted/_c_00000000-0000-0000-0000-000000000000-lock-");
        let wait = sim.acquire(b, "planted", &opts, Wait::For(ms(4000)));
        let mut stuck = StuckWatch::new(ms(1000 + 2 * SESSION));
        let limit = sim.now + ms(3500);
        while sim.now < limit {
            stuck.sample(&sim);
            sim.step(limit);
        }
        assert!(sim.granted(b, wait).is_none(), "seed {seed}: b was granted behind a node nobody released");
        assert!(stuck.stuck.iter().any(|s| s.starts_with(&planted)), "seed {seed}: the stuck head {planted} was not reported: {:?}", stuck.stuck);
        sim.cancel(b, wait);
        sim.settle(ms(2000));
        let orphans = sim.server.orphans();
        assert!(orphans.iter().any(|o| o.starts_with(&planted)), "seed {seed}: the orphan {planted} was not reported: {orphans:?}");
    });
}

/// What one client of [`paused_contention`] is doing.
#[derive(Clone, Copy, Debug)]
enum Step {
    Idle(Instant),
    Acquiring(lockgate_core::OpId),
    Holding(lockgate_core::LeaseId, Instant),
    Releasing(lockgate_core::OpId),
}

/// Clients contending for one mutex (waits of up to a second, holds of up to 600 ms, renewed)
/// while, now and then, one of them is stopped (SIGSTOP) for up to three session timeouts, as a
/// holder, a waiter or between the two. A stopped client does nothing: its next move waits for
/// it to run again. Returns the run, how many stops outlasted the session and how many leases
/// were lost.
fn paused_contention(seed: u64) -> (Sim, usize, usize) {
    let cfg = EnsembleConfig { p_drop: 0.01, p_long_outage: 0.0, ..ensemble(seed) };
    let mut sim = Sim::zookeeper(cfg, seed, net_for(seed));
    let mut rng = Rng::new(seed ^ 0x9A05E);
    let clients = sim.add_clients(4);
    let mut steps: Vec<Step> = clients.iter().map(|_| Step::Idle(sim.now)).collect();
    let opts = LockOptions { auto_renew: true, ..LockOptions::fixed_lease(ms(300)) };
    let end = sim.now + ms(5000);
    let (mut long_stops, mut lost) = (0, 0);
    let mut next_stop = sim.now + ms(rng.between(100, 600));
    sim.wake_at(next_stop);
    let mut stopping = false;
    loop {
        let now = sim.now;
        for (c, ev) in sim.take_events() {
            match (steps[c], ev) {
                (Step::Acquiring(op), Event::Completed { op: o, outcome }) if o == op => {
                    steps[c] = match outcome {
                        Done::Acquired { lease, .. } => Step::Holding(lease, now + ms(rng.between(0, 600))),
                        _ => Step::Idle(now + ms(rng.between(0, 50))),
                    };
                }
                (Step::Holding(l, _), Event::Lost { lease, .. }) if l == lease => {
                    lost += 1;
                    steps[c] = Step::Idle(now + ms(rng.between(0, 50)));
                }
                (Step::Releasing(op), Event::Completed { op: o, .. }) if o == op => {
                    steps[c] = Step::Idle(now + ms(rng.between(0, 50)));
                }
                _ => {}
            }
        }
        if now >= end && !stopping {
            stopping = true;
        }
        if !stopping && now >= next_stop {
            let c = rng.between(0, clients.len() as u64 - 1) as usize;
            if !sim.client_is_paused(c) {
                let length = ms(rng.between(50, 3 * SESSION));
                if length > ms(SESSION) {
                    long_stops += 1;
                }
                sim.pause_client(c, now + length);
            }
            next_stop = now + ms(rng.between(100, 800));
            sim.wake_at(next_stop);
        }
        for c in 0..clients.len() {
            if sim.client_is_paused(c) {
                continue;
            }
            match steps[c] {
                Step::Idle(at) if at <= now && !stopping => {
                    let op = sim.acquire(c, "paused", &opts, Wait::For(ms(rng.between(100, 1000))));
                    steps[c] = Step::Acquiring(op);
                }
                Step::Idle(at) if !stopping => sim.wake_at(at),
                Step::Acquiring(op) if stopping => sim.cancel(c, op),
                Step::Holding(lease, at) if at <= now || stopping => steps[c] = Step::Releasing(sim.release(c, lease)),
                Step::Holding(_, at) => sim.wake_at(at),
                _ => {}
            }
        }
        let idle = steps.iter().all(|s| matches!(s, Step::Idle(_)));
        if stopping && idle && clients.iter().all(|&c| !sim.client_is_paused(c)) && sim.quiescent() {
            break;
        }
        assert!(now < end + ms(20_000), "seed {seed}: the run did not wind down: {steps:?}");
        sim.step(end + ms(20_000));
    }
    (sim, long_stops, lost)
}

// Clients stopped (SIGSTOP) at random moments, as holders, waiters or neither, some past their
// session: never two holders (each stopped holder's lease ends, by its own clock, before its
// session can expire), tokens in holding order, nothing left once all is released.
#[test]
fn zk_clients_stopped_at_random_moments_never_overlap() {
    let (mut long_stops, mut lost) = (0, 0);
    every_seed(0..seeds(), |seed| {
        let (mut sim, long, l) = paused_contention(seed);
        long_stops += long;
        lost += l;
        check::mutual_exclusion(&sim);
        check::fences_order_exclusive_holds(&sim);
        assert!(sim.beliefs.len() > 2, "seed {seed}: hardly anything was acquired");
        check_nothing_left(&mut sim, seed);
    });
    assert!(long_stops > 0, "no client was stopped past its session");
    assert!(lost > 0, "no stopped holder lost its lease");
}
