//! A worker process: contends for one lock and reports each holding on stdout.
//!
//! `--mode bench`: from `--start-ns` for `--duration-ms`, `--tasks` concurrent loops (default 1,
//! sharing one client) acquire / hold `--hold-us` (spinning, for precision) / release at once;
//! prints `task token wait_start acquired release_start` lines at the end.
//! `--lock fair` (default) is lockgate's mutex (the FIFO queue); `--lock plain` is the classic
//! `SET NX PX` + retry-polling mutex (1 ms retry, compare-and-delete release), the comparison
//! baseline: its "token" is a per-process counter, so overlap checks use times only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate_core::native::{ClientOptions, Lock};
use lockgate_core::LockOptions;

use crate::stats::wall_ns;

/// One worker's arguments (the benchmarks spawn it; see the module doc).
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The lock service's URL.
    #[arg(long)]
    url: String,
    /// The lock's name.
    #[arg(long)]
    name: String,
    /// What to do (only `bench`).
    #[arg(long, default_value = "bench", value_parser = ["bench"])]
    mode: String,
    /// `fair` (lockgate's mutex), `plain` (`SET NX PX` + polling) or `naive` (the SQL table lock of bench-sql).
    #[arg(long, default_value = "fair", value_parser = ["fair", "plain", "naive"])]
    lock: String,
    /// Concurrent loops sharing one client.
    #[arg(long, default_value_t = 1)]
    tasks: u64,
    /// How long each holding spins, in microseconds.
    #[arg(long, default_value_t = 1000)]
    pub hold_us: u64,
    /// When to start, in wall-clock nanoseconds since the epoch.
    #[arg(long, default_value_t = 0)]
    pub start_ns: u64,
    /// How long to contend, in milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub duration_ms: u64,
    /// The fair lock's client label (empty: none stored); the default label when absent.
    #[arg(long)]
    pub label: Option<String>,
}

/// Compare-and-delete: the plain mutex's owner-only release.
pub const CAD: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

type Record = (u64, u64, u128, u128, u128);

pub async fn run(args: &WorkerArgs) -> i32 {
    let (url, name) = (&args.url, &args.name);
    let result = match args.lock.as_str() {
        "plain" => plain(args, url, name).await,
        "naive" => {
            let (hold, window) = (Duration::from_micros(args.hold_us), Duration::from_millis(args.duration_ms));
            let records = crate::bench_sql::naive_worker(url, name, hold, args.start_ns as u128, window).await;
            records.map(|r| r.into_iter().map(|(t, w, a, r)| (0, t, w, a, r)).collect())
        }
        _ => fair(args, url, name).await,
    };
    match result {
        Ok(records) => {
            let mut out = String::new();
            for (task, t, w, a, r) in records {
                out.push_str(&format!("{task} {t} {w} {a} {r}\n"));
            }
            print!("{out}");
            0
        }
        Err(e) => {
            eprintln!("worker: {e}");
            1
        }
    }
}

struct Window {
    hold: Duration,
    start_ns: u128,
    end_ns: u128,
}

impl Window {
    fn from(args: &WorkerArgs) -> Window {
        let start_ns = args.start_ns as u128;
        Window {
            hold: Duration::from_micros(args.hold_us),
            start_ns,
            end_ns: start_ns + args.duration_ms as u128 * 1_000_000,
        }
    }

    async fn wait_start(&self) {
        let now = wall_ns();
        if self.start_ns > now {
            tokio::time::sleep(Duration::from_nanos((self.start_ns - now) as u64)).await;
        }
    }

    fn hold(&self) {
        let spin = Instant::now();
        while spin.elapsed() < self.hold {
            std::hint::spin_loop();
        }
    }
}

async fn fair(args: &WorkerArgs, url: &str, name: &str) -> Result<Vec<Record>, String> {
    let mut options = ClientOptions::new(url);
    options.label = args.label.clone();
    let client = options.connect().await.map_err(|e| e.to_string())?;
    let lock = client.lock(name, LockOptions::default()).map_err(|e| e.to_string())?;
    let window = Arc::new(Window::from(args));
    let mut tasks = Vec::new();
    for task in 0..args.tasks {
        let (lock, window): (Lock, _) = (lock.clone(), window.clone());
        tasks.push(tokio::spawn(async move {
            window.wait_start().await;
            let mut records = Vec::new();
            while wall_ns() < window.end_ns {
                let wait_start = wall_ns();
                let lease = lock.acquire(Duration::from_secs(120)).await.map_err(|e| e.to_string())?;
                let acquired = wall_ns();
                window.hold();
                let release_start = wall_ns();
                lease.release().await.map_err(|e| e.to_string())?;
                let token = lease.fencing_token().ok_or("the fair-lock bench needs a backend with fencing tokens")?;
                records.push((task, token, wait_start, acquired, release_start));
            }
            Ok::<_, String>(records)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    client.close().await;
    Ok(all)
}

async fn plain(args: &WorkerArgs, url: &str, name: &str) -> Result<Vec<Record>, String> {
    let raw = redis::Client::open(url).map_err(|e| e.to_string())?;
    let conn = raw.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let window = Arc::new(Window::from(args));
    let key = format!("plain:{name}");
    let mut tasks = Vec::new();
    for task in 0..args.tasks {
        let (mut conn, window, key) = (conn.clone(), window.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            window.wait_start().await;
            let mut records = Vec::new();
            let mut n = 0u64;
            while wall_ns() < window.end_ns {
                n += 1;
                let token = format!("{}-{task}-{n}", std::process::id());
                let wait_start = wall_ns();
                loop {
                    let ok: Option<String> = redis::cmd("SET").arg(&key).arg(&token).arg("NX").arg("PX").arg(30000)
                        .query_async(&mut conn).await.map_err(|e| e.to_string())?;
                    if ok.is_some() {
                        break;
                    }
                    if wall_ns() > window.end_ns + 10_000_000_000 {
                        return Err("plain lock never acquired".to_string());
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let acquired = wall_ns();
                window.hold();
                let release_start = wall_ns();
                let _: i64 = redis::cmd("EVAL").arg(CAD).arg(1).arg(&key).arg(&token)
                    .query_async(&mut conn).await.map_err(|e| e.to_string())?;
                records.push((task, n, wait_start, acquired, release_start));
            }
            Ok::<_, String>(records)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}
