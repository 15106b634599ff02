//! The core benchmarks: uncontended pairs vs the raw floor and contended handoff (issue 2); the
//! fair lock vs a plain polling mutex and commands per grant as the queue grows (issue 3).
//! Every figure is measured against the same redis-server in the same run.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use tokio::process::Command;

use crate::stats::{jain, percentile, wall_ns};

/// `bench`'s arguments.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// A Redis server to measure on (`redis://127.0.0.1:PORT`).
    #[arg(long)]
    url: String,
    /// Also write the Markdown to this file.
    #[arg(long)]
    out: Option<String>,
    /// Seconds of each contended run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Uncontended acquire/release pairs.
    #[arg(long, default_value_t = 5000)]
    pairs: u64,
    /// Five Redis masters (comma-separated URLs) for the Redlock rows.
    #[arg(long)]
    redlock_urls: Option<String>,
    /// The command line shown in the report.
    #[arg(long)]
    command: Option<String>,
}

/// The figures of one contended run that the issues' targets are checked against.
pub(crate) struct Contended {
    workers: u64,
    pub(crate) acq_per_s: f64,
    pub(crate) handoff_p50_us: f64,
    pub(crate) handoff_p99_us: f64,
    wait_p99_us: f64,
    jain: f64,
    client_cmds: f64,
    all_cmds: f64,
    row: String,
}

/// One contended run: `processes` worker processes with `tasks` loops each, on one lock.
#[derive(Clone)]
pub(crate) struct Spec {
    pub(crate) plain: bool,
    pub(crate) processes: u64,
    pub(crate) tasks: u64,
    pub(crate) seconds: u64,
    /// The fair workers' client label: `None` the default (`<host>:<pid>`), `Some("")` none.
    pub(crate) label: Option<String>,
}

const HOLD_US: u64 = 1000;
const CAD: &str = crate::worker::CAD;
const HEADER: &str = "| acq/s | handoff p50 | handoff p99 | wait p50 | wait p99 | wait max | Jain | re-taken by releaser | client cmds/acq | all cmds/acq (incl. inside scripts) |";

pub async fn run(args: &BenchArgs) -> i32 {
    let url = args.url.clone();
    let (seconds, pairs) = (args.seconds, args.pairs);
    let mut md = String::new();
    let _ = writeln!(md, "## Core (Rust, native driver)\n");
    let _ = writeln!(md, "Command: `{}`\n", args.command.clone().unwrap_or_else(|| "./run bench".into()));
    let ratio = match uncontended(&url, pairs).await {
        Ok((s, ratio)) => {
            md.push_str(&s);
            ratio
        }
        Err(e) => {
            eprintln!("bench: {e}");
            return 1;
        }
    };
    let _ = writeln!(
        md,
        "\n### Contended: one lock, workers hold ~1 ms then re-acquire at once ({seconds} s per row)\n"
    );
    let _ = writeln!(md, "| workers {HEADER}");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for workers in [4u64, 16] {
        let spec = Spec { plain: false, processes: workers, tasks: 1, seconds, label: None };
        match contended(&url, spec).await {
            Ok(c) => {
                md.push_str(&c.row);
                rows.push(c);
            }
            Err(e) => {
                eprintln!("bench: {e}");
                return 1;
            }
        }
    }
    md.push_str("\nHandoff = one holder starting its release → the next holder's acquire returning. ");
    md.push_str("Client commands are the EVALSHA/EVAL/SUBSCRIBE calls clients send; the last column also counts the commands the scripts run (INFO commandstats delta).\n");
    md.push_str(&targets(ratio, &rows));
    match fairness(&url, seconds, &rows).await {
        Ok(s) => md.push_str(&s),
        Err(e) => {
            eprintln!("bench: {e}");
            return 1;
        }
    }
    if let Some(urls) = args.redlock_urls.clone() {
        let urls: Vec<String> = urls.split(',').map(String::from).collect();
        match crate::bench_redlock::run(&urls, pairs).await {
            Ok(s) => md.push_str(&s),
            Err(e) => {
                eprintln!("bench: redlock: {e}");
                return 1;
            }
        }
    }
    #[cfg(feature = "bench-telemetry")]
    match crate::bench_telemetry::run(&url, pairs).await {
        Ok(s) => md.push_str(&s),
        Err(e) => {
            eprintln!("bench: telemetry: {e}");
            return 1;
        }
    }
    // No server involved: the engines' timer bookkeeping at 10,000 held leases (issue 14).
    md.push_str(&crate::bench_timers::run("cargo run --release -p lockgate-cli --bin lockgate-bench -- bench-timers (also part of ./run bench)"));
    match args.out.clone() {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, &md) {
                eprintln!("bench: cannot write {path}: {e}");
                return 1;
            }
            print!("{md}");
        }
        None => print!("{md}"),
    }
    0
}

/// The targets next to this run's figures, each marked met or not.
fn targets(ratio: f64, rows: &[Contended]) -> String {
    let each = |f: &dyn Fn(&Contended) -> String| rows.iter().map(f).collect::<Vec<_>>().join(" / ");
    let all = |f: &dyn Fn(&Contended) -> bool| if rows.iter().all(f) { "yes" } else { "no" };
    let flat = rows.windows(2).all(|w| (w[0].client_cmds - w[1].client_cmds).abs() < 0.5);
    let mut t = String::from("\n### Targets (issue 2), this run\n\n| target | measured (4 / 16 workers) | met |\n|---|---|---|\n");
    let _ = writeln!(t, "| uncontended pair ratio ≥ 0.90 of the floor | {ratio:.2} | {} |", if ratio >= 0.9 { "yes" } else { "no" });
    let _ = writeln!(t, "| ≥ 900 acquisitions/s with 1 ms holds | {} | {} |", each(&|c| format!("{:.0}", c.acq_per_s)), all(&|c| c.acq_per_s >= 900.0));
    let _ = writeln!(t, "| handoff p50 ≤ 100 µs | {} | {} |", each(&|c| format!("{:.0} µs", c.handoff_p50_us)), all(&|c| c.handoff_p50_us <= 100.0));
    let _ = writeln!(t, "| handoff p99 ≤ 1 ms | {} | {} |", each(&|c| format!("{:.0} µs", c.handoff_p99_us)), all(&|c| c.handoff_p99_us <= 1000.0));
    let _ = writeln!(
        t,
        "| ≤ 5 commands per acquisition, the same at 4 and 16 — client commands | {} | {} |",
        each(&|c| format!("{:.2}", c.client_cmds)),
        if flat && rows.iter().all(|c| c.client_cmds <= 5.0) { "yes" } else { "no" }
    );
    let _ = writeln!(
        t,
        "| the same, counting the commands scripts run inside Redis | {} | {} |",
        each(&|c| format!("{:.1}", c.all_cmds)),
        all(&|c| c.all_cmds <= 5.0)
    );
    let _ = writeln!(t, "\nWorkers: {}.", each(&|c| c.workers.to_string()));
    t
}

/// Issue 3: the fair lock (lockgate's mutex) against a plain `SET NX` + polling mutex, and
/// commands per grant with 1 to 1000 waiters.
async fn fairness(url: &str, seconds: u64, fair_rows: &[Contended]) -> Result<String, String> {
    let mut md = format!(
        "\n## Fair lock vs plain polling mutex (issue 3)\n\nSame harness: one lock, each worker holds ~{HOLD_US} µs and re-acquires at once, {seconds} s per row. \
         *fair* = lockgate's mutex (FIFO queue, targeted wake-up, the figures of the table above); *plain* = `SET NX PX` retried every 1 ms, \
         compare-and-delete release (what most Redis lock libraries do by default, with a shorter retry than theirs).\n\n| lock | workers {HEADER}\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for c in fair_rows {
        md.push_str(&format!("| fair {}", c.row));
    }
    for workers in [4u64, 16] {
        let c = contended(url, Spec { plain: true, processes: workers, tasks: 1, seconds, label: None }).await?;
        md.push_str(&format!("| plain {}", c.row));
    }
    md.push_str(&format!(
        "\n### Commands per grant as the queue grows\n\nW waiters spread evenly over up to 4 processes (one client per process), each re-queueing at once after a ~{HOLD_US} µs hold, 3 s per row. \
         Plain at 1000 is not run: 1000 pollers at 1 ms would send a million commands per second.\n\n| lock | waiters {HEADER}\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    ));
    let mut scaling = Vec::new();
    // Split W waiters evenly over up to 4 processes.
    let split = |w: u64| [4u64, 2, 1].into_iter().find(|p| w.is_multiple_of(*p)).unwrap_or(1);
    for w in [1u64, 10, 100, 1000] {
        let processes = split(w);
        let c = contended(url, Spec { plain: false, processes, tasks: w / processes, seconds: 3, label: None }).await?;
        md.push_str(&format!("| fair {}", c.row));
        scaling.push(c);
    }
    for w in [1u64, 10, 100] {
        let processes = split(w);
        let c = contended(url, Spec { plain: true, processes, tasks: w / processes, seconds: 3, label: None }).await?;
        md.push_str(&format!("| plain {}", c.row));
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    let each = |rows: &[Contended], f: &dyn Fn(&Contended) -> String| rows.iter().map(f).collect::<Vec<_>>().join(" / ");
    let cycle_us = |c: &Contended| HOLD_US as f64 + c.handoff_p50_us;
    let bound = |c: &Contended| 2.0 * c.workers as f64 * cycle_us(c);
    let spread = |f: &dyn Fn(&Contended) -> f64| {
        let v: Vec<f64> = scaling.iter().map(f).collect();
        v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
    };
    md.push_str("\n### Targets (issue 3, fair lock), this run\n\n| target | measured | met |\n|---|---|---|\n");
    md.push_str(&format!("| ≥ 900 acquisitions/s (4 / 16 workers) | {} | {} |\n", each(fair_rows, &|c| format!("{:.0}", c.acq_per_s)), yes(fair_rows.iter().all(|c| c.acq_per_s >= 900.0))));
    md.push_str(&format!("| Jain index ≥ 0.99 (4 / 16 workers) | {} | {} |\n", each(fair_rows, &|c| format!("{:.3}", c.jain)), yes(fair_rows.iter().all(|c| c.jain >= 0.99))));
    md.push_str(&format!(
        "| wait p99 ≤ 2 × workers × (hold + handoff p50) (4 / 16 workers) | {} | {} |\n",
        each(fair_rows, &|c| format!("{:.2} ms ≤ {:.2} ms", c.wait_p99_us / 1000.0, bound(c) / 1000.0)),
        yes(fair_rows.iter().all(|c| c.wait_p99_us <= bound(c)))
    ));
    md.push_str(&format!(
        "| ≤ 5 commands per grant, flat from 1 to 1000 waiters — client commands | {} | {} |\n",
        each(&scaling, &|c| format!("{:.2}", c.client_cmds)),
        yes(scaling.iter().all(|c| c.client_cmds <= 5.0) && spread(&|c| c.client_cmds) < 1.0)
    ));
    md.push_str(&format!(
        "| the same, counting the commands scripts run inside Redis | {} | {} |\n",
        each(&scaling, &|c| format!("{:.1}", c.all_cmds)),
        yes(scaling.iter().all(|c| c.all_cmds <= 5.0))
    ));
    md.push_str("\nWaiters for the command rows: 1 / 10 / 100 / 1000.\n");
    Ok(md)
}

/// Acquire+release pairs per second through lockgate vs SET NX PX + compare-and-delete by hand.
async fn uncontended(url: &str, pairs: u64) -> Result<(String, f64), String> {
    let client = Client::connect(url).await.map_err(|e| e.to_string())?;
    let lock = client.lock("bench-uncontended", LockOptions::default()).map_err(|e| e.to_string())?;
    let raw = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = raw.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(CAD).query_async(&mut conn).await.map_err(|e| e.to_string())?;
    let mut best_lg = 0f64;
    let mut best_raw = 0f64;
    // Interleave rounds so both see the same machine noise; keep each side's best round.
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..pairs {
            let lease = lock.try_acquire().await.map_err(|e| e.to_string())?.ok_or("uncontended lock was held")?;
            lease.release().await.map_err(|e| e.to_string())?;
        }
        best_lg = best_lg.max(pairs as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for i in 0..pairs {
            let token = format!("{:032x}", i);
            let ok: Option<String> = redis::cmd("SET")
                .arg("bench-raw")
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(30000)
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            ok.ok_or("raw lock was held")?;
            let _: i64 = redis::cmd("EVALSHA").arg(&sha).arg(1).arg("bench-raw").arg(&token).query_async(&mut conn).await.map_err(|e| e.to_string())?;
        }
        best_raw = best_raw.max(pairs as f64 / t.elapsed().as_secs_f64());
    }
    client.close().await;
    Ok((format!(
        "### Uncontended acquire+release ({pairs} pairs, best of 3)\n\n| | pairs/s | ratio to floor |\n|---|---|---|\n| raw floor: SET NX PX + compare-and-delete EVALSHA (redis-rs, one connection) | {best_raw:.0} | 1.00 |\n| lockgate `try_acquire` + `release` | {best_lg:.0} | {:.2} |\n",
        best_lg / best_raw
    ), best_lg / best_raw))
}

async fn commandstats(url: &str) -> Result<HashMap<String, u64>, String> {
    let raw = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = raw.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for line in info.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_") {
            let (name, stats) = rest.split_once(':').unwrap_or((rest, ""));
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls=")).and_then(|v| v.parse().ok()).unwrap_or(0);
            out.insert(name.to_string(), calls);
        }
    }
    Ok(out)
}

pub(crate) async fn contended(url: &str, spec: Spec) -> Result<Contended, String> {
    let Spec { plain, processes, tasks, seconds, label } = spec;
    let workers = processes * tasks;
    let name = format!("bench-contended-{workers}-{plain}-{}", std::process::id());
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let start_ns = wall_ns() + 1_000_000_000 + processes as u128 * 50_000_000 + workers as u128 * 2_000_000;
    let mut children = Vec::new();
    for _ in 0..processes {
        let mut command = Command::new(&exe);
        command
            .args(["worker", "--mode", "bench", "--url", url, "--name", &name, "--hold-us", &HOLD_US.to_string()])
            .args(["--lock", if plain { "plain" } else { "fair" }, "--tasks", &tasks.to_string()])
            .args(["--start-ns", &start_ns.to_string(), "--duration-ms", &(seconds * 1000).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(label) = &label {
            command.args(["--label", label]);
        }
        let child = command
            .spawn()
            .map_err(|e| e.to_string())?;
        children.push(child);
    }
    let until_start = start_ns.saturating_sub(wall_ns()).saturating_sub(20_000_000);
    tokio::time::sleep(Duration::from_nanos(until_start as u64)).await;
    let before = commandstats(url).await?;
    // (worker index, token, wait_start, acquired, release_start)
    let mut recs: Vec<(usize, u64, u128, u128, u128)> = Vec::new();
    let tasks_usize = tasks as usize;
    for (w, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().await.map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("bench worker {w} failed"));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: Vec<u128> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            if v.len() == 5 {
                recs.push((w * tasks_usize + v[0] as usize, v[1] as u64, v[2], v[3], v[4]));
            }
        }
    }
    let after = commandstats(url).await?;
    let delta = |names: &[&str]| -> u64 {
        names.iter().map(|n| after.get(*n).unwrap_or(&0) - before.get(*n).unwrap_or(&0)).sum()
    };
    let client_cmds = if plain { delta(&["set", "eval"]) } else { delta(&["evalsha", "eval", "subscribe"]) };
    let all_cmds: u64 = after.iter().filter(|(k, _)| k.as_str() != "info").map(|(k, v)| v - before.get(k).unwrap_or(&0)).sum();
    // Holding order; for the fair lock it must also be fencing-token order.
    recs.sort_by_key(|r| r.3);
    if recs.len() < 2 {
        return Err("too few acquisitions".into());
    }
    if recs.windows(2).any(|w| w[1].3 < w[0].4 || (!plain && w[1].1 <= w[0].1)) {
        return Err("two holders overlapped, or tokens did not increase in holding order".into());
    }
    let n = recs.len();
    let span = (recs[n - 1].4 - recs[0].3) as f64 / 1e9;
    let mut gaps: Vec<f64> = recs.windows(2).map(|w| (w[1].3 as f64 - w[0].4 as f64) / 1e3).collect();
    gaps.sort_by(f64::total_cmp);
    let mut waits: Vec<f64> = recs.iter().map(|r| (r.3 - r.2) as f64 / 1e3).collect();
    waits.sort_by(f64::total_cmp);
    let mut counts = vec![0u64; workers as usize];
    for r in &recs {
        counts[r.0] += 1;
    }
    let retaken = recs.windows(2).filter(|w| w[0].0 == w[1].0).count() as f64 / (n - 1) as f64;
    let us = |v: f64| if v >= 1000.0 { format!("{:.2} ms", v / 1000.0) } else { format!("{v:.0} µs") };
    let (acq_per_s, p50, p99) = (n as f64 / span, percentile(&gaps, 50.0), percentile(&gaps, 99.0));
    let (client, all) = (client_cmds as f64 / n as f64, all_cmds as f64 / n as f64);
    let row = format!(
        "| {workers} | {:.0} | {} | {} | {} | {} | {} | {:.3} | {:.1}% | {:.2} | {:.1} |\n",
        acq_per_s,
        us(p50),
        us(p99),
        us(percentile(&waits, 50.0)),
        us(percentile(&waits, 99.0)),
        us(*waits.last().expect("non-empty")),
        jain(&counts),
        retaken * 100.0,
        client,
        all,
    );
    Ok(Contended {
        workers,
        acq_per_s,
        handoff_p50_us: p50,
        handoff_p99_us: p99,
        wait_p99_us: percentile(&waits, 99.0),
        jain: jain(&counts),
        client_cmds: client,
        all_cmds: all,
        row,
    })
}
