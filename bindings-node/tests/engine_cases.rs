//! The engine compiled to WebAssembly behaves like the native engine on the core's cases.
//!
//! Two parts, both built from the core's own simulation code (`core/tests/sim`, a simulated
//! Redis running lockgate's scripts, a lossy network and a virtual clock):
//!
//! 1. `core_simulation`: every `#[test]` of `core/tests/simulation.rs`, copied by `build.rs`
//!    with `#[test]` turned into `#[wasm_bindgen_test]`, runs under wasm32 in Node. Natively
//!    these are compiled but not run here (the core's own `cargo test` runs them).
//! 2. `traces_match_native`: random workloads (default, lossy network, crashing clients) are run
//!    for a set of seeds and every request and event each engine emitted is hashed. The native
//!    run writes the digests to `target/tmp/`; the wasm32 build embeds that file (build.rs
//!    copies it from `$LOCKGATE_NATIVE_DIGESTS`) and must reproduce every digest exactly.
//!    `ci.sh test` runs native first, then wasm32:
//!
//! ```text
//! cargo test -p lockgate-node --release --test engine_cases
//! LOCKGATE_NATIVE_DIGESTS=$PWD/target/tmp/lockgate-node-engine-digests.txt \
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test -p lockgate-node --release --test engine_cases --target wasm32-unknown-unknown
//! ```

#[allow(dead_code, unused_imports, unused_attributes, clippy::all)]
mod core_simulation {
    include!(concat!(env!("OUT_DIR"), "/core_simulation.rs"));
}

/// A missing or restructured core suite must not shrink this run silently.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
fn core_simulation_cases_are_present() {
    assert!(
        core_simulation::CASES >= 10,
        "only {} cases were carried over from core/tests/simulation.rs (see build.rs)",
        core_simulation::CASES
    );
}

#[allow(unused_imports)]
#[path = "../../core/tests/sim/mod.rs"]
mod sim;

use std::fmt::Write as _;

use sim::workload::{Runner, Workload};
use sim::redis::RedisSim as Sim;
use sim::redis_check as check;
use sim::NetConfig;

/// Seeds per workload variant.
const SEEDS: u64 = 40;

struct Hasher(sha1_smol::Sha1);

impl std::fmt::Write for Hasher {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

/// A workload variant: its name, network and crash probability.
type Variant = (&'static str, fn() -> NetConfig, f64);

/// One line per (variant, seed): the SHA-1 of every request and event of every engine, in
/// order, with the virtual instant each was emitted at.
fn digests() -> String {
    let variants: [Variant; 3] = [
        ("default", NetConfig::default, 0.0),
        ("lossy", || NetConfig::default().lossy(0.05, 0.05, 0.2), 0.0),
        ("crashes", NetConfig::default, 0.1),
    ];
    let mut out = String::new();
    for (name, net, p_crash) in variants {
        for seed in 0..SEEDS {
            let mut sim = Sim::new(seed, net());
            let workload = Workload {
                p_crash,
                ..Workload::default()
            };
            let mut runner = Runner::new(&mut sim, workload, seed);
            runner.run(&mut sim);
            check::safety(&sim);
            let mut h = Hasher(sha1_smol::Sha1::new());
            for (i, c) in sim.clients.iter().enumerate() {
                write!(h, "client {i}\n{:?}\n{:?}\n", c.requests, c.events).expect("infallible");
            }
            writeln!(
                out,
                "{name} {seed} {} acquired={}",
                h.0.digest(),
                runner.stats.acquired
            )
            .expect("infallible");
        }
    }
    out
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn traces_match_native() {
    let first = digests();
    // A trace that differs between two native runs (HashMap order, say) could not be compared.
    assert_eq!(first, digests(), "the simulation is not deterministic natively");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lockgate-node-engine-digests.txt");
    std::fs::write(&path, &first).expect("write native digests");
    eprintln!("wrote {} digests to {}", first.lines().count(), path.display());
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
fn traces_match_native() {
    // What the native run wrote; build.rs copies it from $LOCKGATE_NATIVE_DIGESTS.
    const NATIVE: &str = include_str!(concat!(env!("OUT_DIR"), "/native_digests.txt"));
    assert!(
        !NATIVE.is_empty(),
        "no native digests: run `cargo test -p lockgate-node --release --test engine_cases` \
         first and build this with LOCKGATE_NATIVE_DIGESTS=<target>/tmp/lockgate-node-engine-digests.txt \
         (bindings-node/ci.sh test does both)"
    );
    let wasm = digests();
    for (n, w) in NATIVE.lines().zip(wasm.lines()) {
        assert_eq!(w, n, "the wasm32 engine diverged from native (wasm vs native)");
    }
    assert_eq!(
        NATIVE.lines().count(),
        wasm.lines().count(),
        "native digests are stale: run the native engine_cases test first (ci.sh test does)"
    );
}
