//! The demo: several processes contend for one lock and the tally proves they never overlapped.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::Args;

/// One holding reported by a worker.
struct Holding {
    worker: String,
    lang: String,
    token: u64,
    start: u128,
    end: u128,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &line[at..];
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest.find(['"', ',', '}'])?;
    Some(&rest[..end])
}

fn parse(line: &str) -> Option<Holding> {
    Some(Holding {
        worker: field(line, "worker")?.to_string(),
        lang: field(line, "lang")?.to_string(),
        token: field(line, "token")?.parse().ok()?,
        start: field(line, "start_ns")?.parse().ok()?,
        end: field(line, "end_ns")?.parse().ok()?,
    })
}

pub async fn run(args: &Args) -> i32 {
    let url = args.str("url");
    let workers = args.num("workers", 4);
    let rounds = args.num("rounds", 3);
    let name = format!("demo-{}", std::process::id());
    let exe = std::env::current_exe().expect("own path");
    println!("lockgate demo: {workers} processes contend for lock {name:?} on {url}, {rounds} rounds each\n");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut children = Vec::new();
    for i in 0..workers {
        let mut cmd = Command::new(&exe);
        cmd.args(["worker", "--mode", "demo", "--url", &url, "--name", &name, "--id"])
            .arg(format!("rust-{i}"))
            .args(["--rounds", &rounds.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn worker");
        let stdout = child.stdout.take().expect("piped");
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let _ = tx.send(l);
            }
        });
        children.push(child);
    }
    drop(tx);
    let mut holdings = Vec::new();
    while let Some(line) = rx.recv().await {
        match parse(&line) {
            Some(h) => {
                println!("  {:<8} ({}) held {name:?} with fencing token {}  ({} ms)", h.worker, h.lang, h.token, (h.end - h.start) / 1_000_000);
                holdings.push(h);
            }
            None => println!("  ? {line}"),
        }
    }
    let mut failed = false;
    for mut c in children {
        if !c.wait().await.map(|s| s.success()).unwrap_or(false) {
            failed = true;
        }
    }
    holdings.sort_by_key(|h| h.start);
    let overlaps = holdings.windows(2).filter(|w| w[1].start < w[0].end).count();
    let increasing = holdings.windows(2).all(|w| w[1].token > w[0].token);
    let counter = read_counter(&url, &format!("{name}:counter")).await;
    println!("\ntally: {} holdings by {workers} processes", holdings.len());
    println!("  overlapping holdings:        {overlaps}");
    println!("  fencing tokens increasing:   {}", if increasing { "yes" } else { "NO" });
    println!("  shared counter (GET/SET):    {counter} (expected {})", workers * rounds);
    let ok = !failed && overlaps == 0 && increasing && counter == (workers * rounds) as i64 && holdings.len() as u64 == workers * rounds;
    println!("\n{}", if ok { "demo OK: never two holders, no lost update" } else { "demo FAILED" });
    if ok { 0 } else { 1 }
}

async fn read_counter(url: &str, key: &str) -> i64 {
    let Ok(client) = redis::Client::open(url) else { return -1 };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else { return -1 };
    let v: Option<i64> = redis::cmd("GET").arg(key).query_async(&mut conn).await.unwrap_or(None);
    let _: Result<(), _> = redis::cmd("DEL").arg(key).query_async(&mut conn).await;
    v.unwrap_or(0)
}
