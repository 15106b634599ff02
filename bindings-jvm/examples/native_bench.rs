//! The native Rust side of the JVM binding benchmark (issue 7): the same two measurements as
//! `io.lockgate.bench.JvmBench`, made directly on `lockgate_core::native`, so the JVM figures
//! can be given as a ratio to what the core does in the same run against the same server.
//!
//! `cargo run --release -p lockgate-jvm --example native_bench -- URL PAIRS THREADS SECONDS`
//! prints one line: `uncontended_per_s=<f> handoff_p50_us=<f> handoff_p99_us=<f> acquisitions=<n>`.

use std::time::{Duration, Instant};

use lockgate_core::native::{foreign_runtime, Client, InPlace};
use lockgate_core::LockOptions;

fn arg(i: usize, default: &str) -> String {
    std::env::args()
        .nth(i)
        .unwrap_or_else(|| default.to_string())
}

/// Waits for `fut` on `rt` from this plain thread, as the bindings wait for a call (no deadline).
fn in_place<F: std::future::Future>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output {
    InPlace::new().wait(rt.handle(), std::pin::pin!(fut), None).expect("no deadline: the call answers")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = arg(1, "redis://127.0.0.1:6379");
    let pairs: u64 = arg(2, "3000").parse().expect("PAIRS");
    let threads: usize = arg(3, "4").parse().expect("THREADS");
    let seconds: f64 = arg(4, "3").parse().expect("SECONDS");

    // Uncontended: blocking-style acquire(timeout) + release, one caller; warm-up, best of 3.
    let client = Client::connect(&url).await.expect("connect");
    let lock = client
        .lock("jvm-bench-uncontended-native", LockOptions::default())
        .expect("lock");
    let mut best = 0f64;
    for round in 0..4 {
        let n = if round == 0 { pairs / 5 } else { pairs };
        let t = Instant::now();
        for _ in 0..n {
            let lease = lock.acquire(Duration::from_secs(5)).await.expect("acquire");
            lease.release().await.expect("release");
        }
        if round > 0 {
            best = best.max(n as f64 / t.elapsed().as_secs_f64());
        }
    }
    // The same loop driven from a plain OS thread that blocks on each call, as a foreign caller
    // (the JVM, Python) does: the core's one-worker runtime, and the calling thread polling each
    // call in place (`InPlace`), exactly as the bindings drive it.
    let foreign_url = url.clone();
    let foreign = std::thread::spawn(move || {
        let rt = foreign_runtime("native-bench-io").expect("runtime");
        let client = in_place(&rt, Client::connect(&foreign_url)).expect("connect");
        let lock = client.lock("jvm-bench-uncontended-foreign", LockOptions::default()).expect("lock");
        let mut best = 0f64;
        for round in 0..4 {
            let n = if round == 0 { pairs / 5 } else { pairs };
            let t = Instant::now();
            for _ in 0..n {
                let lease = in_place(&rt, lock.acquire(Duration::from_secs(5))).expect("acquire");
                in_place(&rt, lease.release()).expect("release");
            }
            if round > 0 {
                best = best.max(n as f64 / t.elapsed().as_secs_f64());
            }
        }
        in_place(&rt, client.close());
        best
    })
    .join()
    .expect("foreign thread");
    client.close().await;

    // Contended: THREADS workers, one client each, one lock; each holds briefly and re-queues.
    let origin = Instant::now();
    let deadline = origin + Duration::from_secs_f64(seconds + 0.5);
    let warm_until = origin + Duration::from_millis(500);
    let name = format!("jvm-bench-contended-native-{}", std::process::id());
    let mut tasks = Vec::new();
    for _ in 0..threads {
        let url = url.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let client = Client::connect(&url).await.expect("connect");
            let lock = client.lock(&name, LockOptions::default()).expect("lock");
            let mut recs = Vec::new();
            while Instant::now() < deadline {
                let lease = lock
                    .acquire(Duration::from_secs(30))
                    .await
                    .expect("acquire");
                let acquired = Instant::now();
                std::hint::black_box(lease.fencing_token());
                let release_start = Instant::now();
                lease.release().await.expect("release");
                if acquired > warm_until {
                    recs.push((lease.fencing_token(), acquired, release_start));
                }
            }
            client.close().await;
            recs
        }));
    }
    let mut recs = Vec::new();
    for t in tasks {
        recs.extend(t.await.expect("worker"));
    }
    recs.sort_by_key(|r| r.0);
    let mut gaps: Vec<f64> = recs
        .windows(2)
        .map(|w| w[1].1.saturating_duration_since(w[0].2).as_secs_f64() * 1e6)
        .collect();
    gaps.sort_by(f64::total_cmp);
    println!(
        "uncontended_per_s={best:.0} uncontended_foreign_thread_per_s={foreign:.0} handoff_p50_us={:.1} handoff_p99_us={:.1} acquisitions={}",
        percentile(&gaps, 50.0),
        percentile(&gaps, 99.0),
        recs.len()
    );
}
