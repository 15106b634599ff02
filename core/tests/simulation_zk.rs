//! The ZooKeeper-shaped backend (sequential nodes in expiring sessions, `sim/zk.rs`) in the
//! deterministic simulator: the same harness, workload and checks as `simulation.rs`. Issue 15's
//! real ZooKeeper backend starts from this model.
//!
//! Checked: no two clients believe they hold one lock at the same instant (the holder's
//! validity is counted from a heartbeat's send, the server keeps the session `session_timeout`
//! after hearing it, and the lease is no longer than that timeout); fencing tokens (sequence
//! numbers) strictly increase in holding order; crashed clients' sessions expire and their
//! nodes go; nothing is left once the run winds down and those sessions expired.
//!
//! Run: `cargo test -p lockgate-core --no-default-features --test simulation_zk`.

mod sim;

use lockgate_core::time::Duration;
use lockgate_core::Primitive;

use sim::check;
use sim::net::Rng;
use sim::workload::{Runner, Workload};
use sim::zk::{SimZk, ZkSim as Sim};
use sim::NetConfig;

/// Seeds per property; `LOCKGATE_SIM_SEEDS=5000` explores further.
fn seeds() -> u64 {
    std::env::var("LOCKGATE_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(40)
}

/// Seeds for the tests that show a check failing: at least the 40 whose counts the comments
/// give, whatever `LOCKGATE_SIM_SEEDS` says.
fn teeth_seeds() -> u64 {
    seeds().max(40)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn net_for(seed: u64) -> NetConfig {
    let mut rng = Rng::new(seed ^ 0xBEEF);
    let max = Duration::from_micros(rng.between(100, 5_000));
    let nmax = Duration::from_micros(rng.between(100, 5_000));
    NetConfig { latency: (Duration::from_micros(50), max), notify_latency: (Duration::from_micros(50), nmax), ..NetConfig::default() }
}

/// One run: sessions time out after 300 ms of silence; clients count on `lease` after each
/// heartbeat and ask for leases of 100-500 ms (extends up to 1 s).
fn run(seed: u64, lease: Duration) -> (Sim, Runner) {
    let model = SimZk::new(ms(300), lease);
    let mut sim = Sim::with_model(model, seed, net_for(seed).lossy(0.05, 0.05, 0.2));
    let cfg = Workload {
        clients: 5,
        lease_ms: (100, 500),
        p_crash: 0.15,
        p_reenter: 0.1,
        primitives: vec![Primitive::Mutex],
        ..Workload::default()
    };
    let mut runner = Runner::new(&mut sim, cfg, seed);
    runner.run(&mut sim);
    (sim, runner)
}

// Contention with lost requests, replies and watch events, and crashing clients.
#[test]
fn zk_contention_with_loss_and_crashes_is_safe() {
    let mut expired = 0;
    for seed in 0..seeds() {
        let (mut sim, runner) = run(seed, ms(300));
        check::mutual_exclusion(&sim);
        check::fences_follow_holding_order(&sim);
        assert!(runner.stats.acquired > 0, "seed {seed}: nothing was acquired");
        // The sessions of crashed clients expire one session timeout after they were last heard.
        sim.run_for(ms(400));
        check::nothing_left(&mut sim);
        expired += sim.server.expired;
    }
    assert!(expired > 0, "no session ever expired: crashes were not exercised");
}

/// Whether the exclusion check fails on the run.
fn exclusion_fails(sim: &Sim) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check::mutual_exclusion(sim))).is_err()
}

// The check has teeth: clients that count on more than the session timeout after a heartbeat
// believe they hold nodes the server already deleted with their session.
#[test]
fn zk_checks_catch_a_lease_longer_than_the_session() {
    let caught = (0..teeth_seeds()).filter(|&seed| exclusion_fails(&run(seed, ms(600)).0)).count();
    assert!(caught > 0, "no run showed two holders with leases twice the session timeout");
}
