//! Issue 25's operator benchmark, per backend: `inspect` of a lock with W waiters queued behind
//! its holder, and `list` over N held locks (every page of 1,000 read to the end), wall time
//! and, where the server counts them, the requests it received (Redis: `total_commands_processed`
//! from `INFO stats`; etcd: `grpc_server_msg_received_total` from the member's `/metrics`).

use std::time::{Duration, Instant};

use lockgate_core::native::ClientOptions;
use lockgate_core::inspect::Kind;
use lockgate_core::LockOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `lockgate-bench bench-listing`'s arguments.
#[derive(clap::Args)]
pub struct BenchListingArgs {
    /// The lock service (as for `lockgate`).
    #[arg(long)]
    url: String,
    /// The backend's name in the table.
    #[arg(long)]
    backend: String,
    /// How many held locks `list` walks.
    #[arg(long, default_value_t = 10_000)]
    locks: usize,
    /// How many waiters queue behind the inspected lock's holder (0 on a Redlock, which has no
    /// queue: the holder alone is inspected).
    #[arg(long, default_value_t = 1_000)]
    waiters: usize,
    /// Where the server's request counter is read: `redis:HOST:PORT[,HOST:PORT...]` (a Redlock's
    /// masters, summed), `etcd:http://HOST:PORT`.
    #[arg(long)]
    counter: Option<String>,
}

/// Runs the benchmark and prints one table row: backend, inspect ms, its requests, list ms, its
/// requests, pages.
pub async fn run(args: &BenchListingArgs) -> i32 {
    match measure(args).await {
        Ok(row) => {
            println!("{row}");
            0
        }
        Err(e) => {
            eprintln!("bench-listing ({}): {e}", args.backend);
            1
        }
    }
}

async fn measure(args: &BenchListingArgs) -> Result<String, String> {
    let connect = |label: &str| {
        let mut o = ClientOptions::new(args.url.clone());
        o.label = Some(label.to_string());
        async move { o.connect().await.map_err(|e| e.to_string()) }
    };
    let holder = connect("bench-holder").await?;
    let waiter = connect("bench-waiter").await?;
    let reader = connect("bench-reader").await?;
    let run = std::process::id();
    // A Redlock takes no lease longer than its max_lease, and its masters, just started, grant
    // nothing for one max_lease (the restart rule): its first acquire waits that out.
    let lease = match ClientOptions::new(args.url.clone()).redlock_config() {
        Ok(redlock) => redlock.max_lease,
        Err(_) => Duration::from_secs(600),
    };
    let long = LockOptions { lease, ..LockOptions::default() };

    // Inspect: one holder, W waiters from one client (each its own queue entry).
    let name = format!("bl{run}:queue");
    let held = holder.lock(&name, long.clone()).map_err(|e| e.to_string())?.acquire(Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
    let mut waits = Vec::new();
    for _ in 0..args.waiters {
        let l = waiter.lock(&name, long.clone()).map_err(|e| e.to_string())?;
        waits.push(tokio::spawn(async move { l.acquire(Duration::from_secs(600)).await }));
    }
    let started = Instant::now();
    loop {
        // While a thousand waiters queue, a busy server may let a read time out: read again.
        let queued = reader.inspect(&name, Kind::Mutex).await.map(|s| s.waiters.len());
        if queued.as_ref().is_ok_and(|n| *n >= args.waiters) {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Err(format!("the {} waiters did not all queue within 300 s: {queued:?}", args.waiters));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut inspect_ms = Vec::new();
    let before = requests(args.counter.as_deref()).await;
    for _ in 0..5 {
        let t = Instant::now();
        let s = reader.inspect(&name, Kind::Mutex).await.map_err(|e| e.to_string())?;
        inspect_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if s.waiters.len() != args.waiters || s.holders.len() != 1 {
            return Err(format!("inspect read {} holders and {} waiters", s.holders.len(), s.waiters.len()));
        }
    }
    let inspect_requests = delta(args.counter.as_deref(), before, requests(args.counter.as_deref()).await, 5);
    for w in &waits {
        w.abort();
    }
    let _ = held.release().await;
    waiter.close().await;

    // List: N held locks, every page read.
    let mut leases = Vec::new();
    for chunk in (0..args.locks).collect::<Vec<_>>().chunks(200) {
        let mut batch = Vec::new();
        for i in chunk {
            let l = holder.lock(&format!("bl{run}:l{i:05}"), long.clone()).map_err(|e| e.to_string())?;
            batch.push(tokio::spawn(async move { l.acquire(Duration::from_secs(60)).await }));
        }
        for task in batch {
            leases.push(task.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?);
        }
    }
    let prefix = format!("bl{run}:l");
    let mut list_ms = Vec::new();
    let mut pages = 0;
    let before = requests(args.counter.as_deref()).await;
    for _ in 0..3 {
        let t = Instant::now();
        let (mut seen, mut cursor) = (0usize, None::<String>);
        pages = 0;
        loop {
            let page = reader.list(&prefix, Some(1000), cursor.as_deref()).await.map_err(|e| e.to_string())?;
            pages += 1;
            seen += page.entries.len();
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        list_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if seen != args.locks {
            return Err(format!("list read {seen} of {} locks", args.locks));
        }
    }
    let list_requests = delta(args.counter.as_deref(), before, requests(args.counter.as_deref()).await, 3);
    for l in leases {
        let _ = l.release().await;
    }
    holder.close().await;
    reader.close().await;
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(format!(
        "| {} | {:.1} | {} | {:.0} | {} | {} |",
        args.backend,
        med(inspect_ms),
        inspect_requests,
        med(list_ms),
        list_requests,
        pages
    ))
}

/// Requests per run between two counter readings, or `—`. Redis counts the first reading's
/// `INFO` itself (its `QUIT` is not counted); an etcd `/metrics` read is HTTP, no gRPC message.
fn delta(counter: Option<&str>, before: Option<f64>, after: Option<f64>, runs: u32) -> String {
    // One INFO per Redis server read.
    let own = counter.and_then(|c| c.strip_prefix("redis:")).map_or(0.0, |a| a.split(',').count() as f64);
    match (before, after) {
        (Some(b), Some(a)) => format!("{:.0}", (a - b - own).max(0.0) / f64::from(runs)),
        _ => "—".into(),
    }
}

/// The server's request counter now, where it has one.
async fn requests(counter: Option<&str>) -> Option<f64> {
    let counter = counter?;
    if let Some(addrs) = counter.strip_prefix("redis:") {
        let mut total = 0.0;
        for addr in addrs.split(',') {
            let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
            s.write_all(b"INFO stats\r\nQUIT\r\n").await.ok()?;
            let mut body = String::new();
            s.read_to_string(&mut body).await.ok()?;
            total += body.lines().find_map(|l| l.strip_prefix("total_commands_processed:")?.trim().parse::<f64>().ok())?;
        }
        return Some(total);
    }
    let hostport = counter.strip_prefix("etcd:")?.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(hostport).await.ok()?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {hostport}\r\n\r\n").as_bytes()).await.ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    let sum: f64 = body
        .lines()
        .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (sum > 0.0).then_some(sum)
}
