//! A worker process: contends for one lock and reports each holding on stdout.
//!
//! `--mode demo`: a few rounds, each holding ~50 ms and bumping a shared counter with a
//! non-atomic GET/SET, printing one JSON line per holding as it happens.
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
        "demo" => demo(args, &url, &lock).await,
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

async fn demo(args: &Args, url: &str, lock: &lockgate_core::native::Lock) -> Result<(), String> {
    let id = args.str("id");
    let rounds = args.num("rounds", 3);
    let counter_key = format!("{}:counter", lock.name());
    let raw = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = raw.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    for _ in 0..rounds {
        let lease = lock.acquire(Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
        let start = wall_ns();
        let v: Option<i64> = redis::cmd("GET").arg(&counter_key).query_async(&mut conn).await.map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(40 + (lease.fencing_token() % 30))).await;
        let _: () = redis::cmd("SET").arg(&counter_key).arg(v.unwrap_or(0) + 1).query_async(&mut conn).await.map_err(|e| e.to_string())?;
        let end = wall_ns();
        println!(
            "{{\"worker\":\"{id}\",\"lang\":\"rust\",\"token\":{},\"start_ns\":{start},\"end_ns\":{end},\"held\":{}}}",
            lease.fencing_token(),
            lease.is_held()
        );
        lease.release().await.map_err(|e| e.to_string())?;
    }
    Ok(())
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
