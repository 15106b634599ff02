//! `test-servers`: the one test-server launcher every language's tests call. Starts real
//! redis-servers, ZooKeeper, etcd, PostgreSQL or MariaDB servers on free loopback ports (data in temp dirs), prints ONE
//! JSON line describing them, then runs until stdin closes or it gets SIGTERM/SIGINT, and
//! stops exactly the servers it started, by pid. See conformance/README.md ("Test servers").
//!
//! ```text
//! test-servers single | acl | replica | cluster | redlock | proxied
//!              [--replicas N] [--masters N] [--acl LINE]... [--user U --password P] [--tls]
//!              [-- <more redis-server arguments for every node>]
//! test-servers zookeeper [--members N] [--proxied | --tls] [-- <more zoo.cfg key=value lines>]
//! test-servers etcd [--members N] [--proxied | --tls] [-- <more etcd flags for every member>]
//! test-servers postgres | mariadb [--proxied | --tls] [-- <more server settings, key=value>]
//! test-servers postgres [--pgbouncer session|transaction] [--proxied | --tls] [-- ...]
//! test-servers memcached [--servers N] [--memory MB] [-- <more memcached flags>]
//! ```
//!
//! `postgres --pgbouncer MODE` also starts Debian's PgBouncer in front of the server in that pool
//! mode; the description gains `pgbouncer_url` (clients through the pooler; `url` and
//! `admin_url` stay direct), `pgbouncer_port`, `pgbouncer_pid`, `pgbouncer_mode`, and its pid
//! is in `pids`.
//!
//! While it runs it reads commands on stdin, one a line, and answers each with one JSON line:
//! `stop I`, `start I`, `restart I` (kill node I and start it again on its port: a
//! redis-server or memcached empty, a ZooKeeper or etcd member or a SQL server with its data), `pause I`, `resume I` (SIGSTOP /
//! SIGCONT), `silence`, `deafen` (replies held back, requests still forwarded), `restore`
//! (the fault proxies of `proxied` / `zookeeper --proxied` / `etcd --proxied` /
//! `postgres --proxied` / `mariadb --proxied`),
//! `leader` (ZooKeeper, etcd: waits for the ensemble's or cluster's leader and names it),
//! `describe`.

use std::io::Write;

use lockgate_conformance::deploy::{Deployment, Kind};
use lockgate_conformance::sql::{Engine, PoolMode};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: test-servers single|acl|replica|cluster|redlock|proxied [--replicas N] [--masters N] [--acl LINE]... [--user U] [--password P] [--tls] [-- redis-server args]\n       test-servers zookeeper [--members N] [--proxied | --tls] [-- zoo.cfg key=value lines]\n       test-servers etcd [--members N] [--proxied | --tls] [-- etcd flags]\n       test-servers postgres|mariadb [--proxied | --tls] [-- server settings key=value]\n       test-servers postgres --pgbouncer session|transaction [--proxied | --tls] [-- server settings key=value]\n       test-servers memcached [--servers N] [--memory MB] [-- memcached flags]";

/// What the command line asks for.
struct Request {
    kind: Kind,
    /// Extra server arguments (after `--`).
    extra: Vec<String>,
    /// `--tls`: serve TLS too.
    tls: bool,
    /// `postgres --pgbouncer MODE`: a PgBouncer in front of the server.
    pgbouncer: Option<PoolMode>,
}

/// The kind, its options and extra server arguments from the command line.
fn parse(args: &[String]) -> Result<Request, String> {
    let (ours, extra) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], args[i + 1..].to_vec()),
        None => (args, Vec::new()),
    };
    let kind = ours.first().ok_or(USAGE)?;
    // Every flag must be known: a typo must not silently start something else.
    let mut i = 1;
    while i < ours.len() {
        match ours[i].as_str() {
            "--replicas" | "--masters" | "--members" | "--acl" | "--user" | "--password" | "--pgbouncer" | "--servers" | "--memory" => {
                if ours.get(i + 1).is_none() {
                    return Err(format!("{} needs a value\n{USAGE}", ours[i]));
                }
                i += 2;
            }
            "--tls" | "--proxied" => i += 1,
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let value = |key: &str| ours.iter().position(|a| a == key).and_then(|i| ours.get(i + 1)).cloned();
    let count = |key: &str, default: usize| -> Result<usize, String> {
        value(key).map_or(Ok(default), |v| v.parse().map_err(|_| format!("{key} needs a number, got {v:?}")))
    };
    let kind = match kind.as_str() {
        "single" => Kind::Single,
        "proxied" => Kind::Proxied,
        "cluster" => Kind::Cluster,
        "replica" => Kind::Replica { replicas: count("--replicas", 1)? },
        "redlock" => Kind::Redlock { masters: count("--masters", 3)? },
        "zookeeper" => Kind::ZooKeeper { members: count("--members", 1)?, proxied: ours.iter().any(|a| a == "--proxied") },
        "etcd" => Kind::Etcd { members: count("--members", 1)?, proxied: ours.iter().any(|a| a == "--proxied") },
        "postgres" => Kind::Sql { engine: Engine::Postgres, proxied: ours.iter().any(|a| a == "--proxied") },
        "mariadb" => Kind::Sql { engine: Engine::MariaDb, proxied: ours.iter().any(|a| a == "--proxied") },
        "memcached" => Kind::Memcached {
            servers: count("--servers", 1)?,
            memory_mb: count("--memory", lockgate_conformance::memcached::DEFAULT_MEMORY_MB as usize)? as u32,
        },
        "acl" => {
            let user = value("--user").unwrap_or_else(|| "app".into());
            let password = value("--password").unwrap_or_else(|| "s3cret-pw".into());
            let mut lines: Vec<String> = ours.windows(2).filter(|w| w[0] == "--acl").map(|w| w[1].clone()).collect();
            if lines.is_empty() {
                // Only `user` may log in, with every right; the default user is off.
                lines = vec![format!("user {user} on >{password} ~* &* +@all"), "user default off".into()];
            }
            Kind::Acl { lines, user, password }
        }
        other => return Err(format!("unknown kind {other:?}\n{USAGE}")),
    };
    let pgbouncer = match ours.iter().position(|a| a == "--pgbouncer") {
        None => None,
        Some(_) if !matches!(kind, Kind::Sql { engine: Engine::Postgres, .. }) => return Err(format!("--pgbouncer is for postgres, not {}", kind.name())),
        Some(_) => Some(PoolMode::parse(&value("--pgbouncer").ok_or("--pgbouncer needs session or transaction")?)?),
    };
    Ok(Request { kind, extra, tls: ours.iter().any(|a| a == "--tls"), pgbouncer })
}

/// The deployment's description plus its PgBouncer's, if it has one.
fn describe(d: &Deployment) -> Value {
    let mut out = d.describe();
    if let Some(b) = d.sql.as_ref().and_then(|s| s.pgbouncer()) {
        out["pgbouncer_url"] = json!(b.url());
        out["pgbouncer_port"] = json!(b.port);
        out["pgbouncer_pid"] = json!(b.pid());
        out["pgbouncer_mode"] = json!(b.mode.name());
        if let (Some(pids), Some(pid)) = (out["pids"].as_array_mut(), b.pid()) {
            pids.push(json!(pid));
        }
    }
    out
}

fn node(d: &Deployment, words: &[&str]) -> Result<usize, String> {
    let i: usize = words.get(1).and_then(|w| w.parse().ok()).ok_or("which node? (an index)")?;
    if i < d.node_count() {
        Ok(i)
    } else {
        Err(format!("no node {i}"))
    }
}

/// How long `leader` waits for an ensemble or cluster to elect one (a few ticks after a leader
/// is lost).
const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs one stdin command.
fn command(d: &mut Deployment, line: &str) -> Result<Value, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.first().copied() {
        Some("describe") => return Ok(describe(d)),
        Some("stop") => {
            let i = node(d, &words)?;
            d.stop_node(i)?;
        }
        Some("start" | "restart") => {
            let i = node(d, &words)?;
            let pid = d.start_node(i)?;
            return Ok(json!({"ok": true, "pid": pid}));
        }
        Some("pause") => d.signal_node(node(d, &words)?, libc::SIGSTOP)?,
        Some("resume") => d.signal_node(node(d, &words)?, libc::SIGCONT)?,
        Some("silence" | "deafen" | "restore") if d.proxies.is_empty() => return Err("no proxy (kinds proxied, zookeeper --proxied, etcd --proxied, postgres --proxied and mariadb --proxied have them)".into()),
        Some("silence") => d.proxies.iter().for_each(|p| p.silence()),
        Some("deafen") => d.proxies.iter().for_each(|p| p.deafen()),
        Some("restore") => d.proxies.iter().for_each(|p| p.restore()),
        Some("leader") if d.etcd.is_some() => {
            let etcd = d.etcd.as_ref().ok_or("no etcd")?;
            let i = etcd.await_leader(LEADER_WAIT)?;
            let m = &etcd.members[i];
            return Ok(json!({"ok": true, "leader": i, "port": m.port, "pid": m.pid(), "member_id": m.member_id}));
        }
        Some("leader") => {
            let zk = d.zookeeper.as_ref().ok_or("leader is for the zookeeper and etcd kinds")?;
            let i = zk.await_leader(LEADER_WAIT)?;
            return Ok(json!({"ok": true, "leader": i, "port": zk.members[i].port, "pid": zk.members[i].pid()}));
        }
        _ => return Err(format!("unknown command {line:?}: stop|start|restart|pause|resume I, silence, deafen, restore, leader, describe")),
    }
    Ok(json!({"ok": true}))
}

fn say(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let request = match parse(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("test-servers: {e}");
            std::process::exit(2);
        }
    };
    // Servers die with this process even if it is SIGKILLed.
    lockgate_conformance::spawn::die_with_parent();
    let started = Deployment::start_with(request.kind, &request.extra, request.tls).and_then(|mut d| {
        if let (Some(mode), Some(sql)) = (request.pgbouncer, d.sql.as_mut()) {
            sql.start_pgbouncer(mode)?;
        }
        Ok(d)
    });
    let mut d = match started {
        Ok(d) => d,
        Err(e) => {
            eprintln!("test-servers: {e}");
            std::process::exit(1);
        }
    };
    say(&describe(&d));
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("test-servers: cannot watch signals");
        std::process::exit(1);
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(l)) if l.trim().is_empty() => {}
                Ok(Some(l)) => say(&command(&mut d, &l).unwrap_or_else(|e| json!({"ok": false, "error": e}))),
                // stdin closed: the test is done (or gone).
                _ => break,
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    // Dropping the deployment kills each server by its own pid and removes its temp dir.
    drop(d);
    // Exit now: the runtime would otherwise wait for its blocked stdin reader on shutdown.
    std::process::exit(0);
}
