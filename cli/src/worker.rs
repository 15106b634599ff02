//! A worker process: contends for one lock and reports each holding on stdout.
//!
//! `--mode bench`: from `--start-ns` for `--duration-ms`, acquire / hold `--hold-us` (spinning,
//! for precision) / release at once; prints `token wait_start acquired release_start` lines at the end.

use std::time::{Duration, Instant};

use lockgate_core::native::Client;
use lockgate_core::LockOptions;

use crate::stats::wall_ns;
use crate::Args;

pub async fn run(args: &Args) -> i32 {
    let url = args.str("url");
    let name = args.str("name");
    let client = match Client::connect(&url).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("worker: {e}");
            return 1;
        }
    };
    let lock = client.lock(&name, LockOptions::default()).expect("valid lock options");
    let result = match args.str("mode").as_str() {
        "bench" => bench(args, &lock).await,
        _ => Err("unknown --mode".to_string()),
    };
    client.close().await;
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("worker: {e}");
            1
        }
    }
}

async fn bench(args: &Args, lock: &lockgate_core::native::Lock) -> Result<(), String> {
    let hold = Duration::from_micros(args.num("hold-us", 1000));
    let start_ns = args.num("start-ns", 0) as u128;
    let duration_ns = args.num("duration-ms", 3000) as u128 * 1_000_000;
    let now = wall_ns();
    if start_ns > now {
        tokio::time::sleep(Duration::from_nanos((start_ns - now) as u64)).await;
    }
    let mut records = Vec::new();
    while wall_ns() < start_ns + duration_ns {
        let wait_start = wall_ns();
        let lease = lock.acquire(Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
        let acquired = wall_ns();
        let spin = Instant::now();
        while spin.elapsed() < hold {
            std::hint::spin_loop();
        }
        let release_start = wall_ns();
        lease.release().await.map_err(|e| e.to_string())?;
        records.push((lease.fencing_token(), wait_start, acquired, release_start));
    }
    let mut out = String::new();
    for (t, w, a, r) in records {
        out.push_str(&format!("{t} {w} {a} {r}\n"));
    }
    print!("{out}");
    Ok(())
}
