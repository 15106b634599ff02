//! Redlock over 3 and 5 independent masters against the single-instance mutex (issue 4):
//! uncontended acquire+release pairs, interleaved rounds on the same machine in the same run.

use std::time::{Duration, Instant};

use lockgate_core::connect::{redlock_url, OptionValue, Spelling};
use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::LockOptions;

/// The deployment's max lease for the benchmark: short, so fresh masters grant after ~3 s.
const MAX_LEASE: Duration = Duration::from_secs(2);

/// A markdown section: pairs/s of the single-instance mutex (on `masters[0]`) and of Redlock
/// over the first 3 and all 5 masters, each as a ratio to the single-instance mutex.
pub async fn run(masters: &[String], pairs: u64) -> Result<String, String> {
    if masters.len() < 5 {
        return Err(format!("the Redlock benchmark needs 5 masters, got {}", masters.len()));
    }
    let single = Client::connect(&masters[0]).await.map_err(|e| e.to_string())?;
    let mutex = single.lock("bench-redlock-single", LockOptions::fixed_lease(MAX_LEASE)).map_err(|e| e.to_string())?;
    let mut redlocks = Vec::new();
    for n in [3usize, 5] {
        // The same Client as the single-instance mutex, from a redlock:// URL.
        let mut o = ClientOptions::new(redlock_url(&masters[..n]).map_err(|e| e.to_string())?);
        o.set("max_lease", OptionValue::Number(MAX_LEASE.as_secs_f64()), &Spelling::RUST).map_err(|e| e.to_string())?;
        let rl = o.connect().await.map_err(|e| e.to_string())?;
        let lock = rl.lock("bench-redlock", LockOptions::fixed_lease(MAX_LEASE)).map_err(|e| e.to_string())?;
        // Fresh masters grant nothing for max_lease + 1 s (the delayed-restart rule).
        lock.acquire(Duration::from_secs(15)).await.map_err(|e| e.to_string())?.release().await.map_err(|e| e.to_string())?;
        redlocks.push((n, rl, lock));
    }
    let mut best_single = 0f64;
    let mut best = [0f64; 2];
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..pairs {
            let lease = mutex.try_acquire().await.map_err(|e| e.to_string())?.ok_or("uncontended lock was held")?;
            lease.release().await.map_err(|e| e.to_string())?;
        }
        best_single = best_single.max(pairs as f64 / t.elapsed().as_secs_f64());
        for (i, (_, _, lock)) in redlocks.iter().enumerate() {
            let t = Instant::now();
            for _ in 0..pairs {
                let lease = lock.try_acquire().await.map_err(|e| e.to_string())?.ok_or("uncontended Redlock was held")?;
                lease.release().await.map_err(|e| e.to_string())?;
            }
            best[i] = best[i].max(pairs as f64 / t.elapsed().as_secs_f64());
        }
    }
    for (_, rl, _) in &redlocks {
        rl.close().await;
    }
    single.close().await;
    let mut md = format!(
        "\n### Redlock: uncontended acquire+release ({pairs} pairs, best of 3, interleaved)\n\n\
         | | pairs/s | ratio to the single-instance mutex |\n|---|---|---|\n\
         | single-instance mutex (`Client::lock`, one master) | {best_single:.0} | 1.00 |\n"
    );
    for (i, (n, _, _)) in redlocks.iter().enumerate() {
        md.push_str(&format!(
            "| Redlock over {n} masters (quorum {}) | {:.0} | {:.2} |\n",
            n / 2 + 1,
            best[i],
            best[i] / best_single
        ));
    }
    md.push_str(
        "\nEvery master is a separate redis-server on this machine's loopback, so a Redlock round \
         competes with its own masters for the same cores; on separate hosts the round costs one \
         parallel round trip. A Redlock grant also pays the restart-rule check (`INFO server`) on \
         every master.\n",
    );
    Ok(md)
}
