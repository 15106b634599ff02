//! The orchestrator's and the launcher's command lines and lifetimes: `--help` prints usage, an
//! unknown flag is an error (never the whole matrix), and the servers they start die with them
//! however they end (SIGTERM, or SIGKILL, which no handler sees).
//! Run: `cargo test --release -p lockgate-conformance --test lifetime`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CONFORMANCE: &str = env!("CARGO_BIN_EXE_conformance");
const TEST_SERVERS: &str = env!("CARGO_BIN_EXE_test-servers");

/// The repository root (the orchestrator reads `conformance/` from its working directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Runs `program args` to its end, killing it (and failing) if it takes longer than `limit`:
/// the old orchestrator took `--help` for a 17-minute run.
fn run_within(program: &str, args: &[&str], limit: Duration) -> Output {
    let child = Command::new(program)
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("wait"));
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            kill(pid, libc::SIGKILL);
            let _ = waiter.join();
            panic!("{program} {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().expect("waiter")
}

fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) of a process this test started.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Whether `pid` is gone (or a zombie waiting for its new parent to reap it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Every live descendant of `pid` (children of all its threads, recursively).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

fn command_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

/// Waits up to 5 s for every pid in `pids` to be gone; the ones left otherwise (killed here so
/// the test leaves nothing behind).
fn assert_all_gone(pids: &[u32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !pids.iter().all(|&p| gone(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
    for &p in &left {
        kill(p, libc::SIGKILL);
    }
    assert!(left.is_empty(), "{what}: servers {left:?} outlived it by 5 s");
}

#[test]
fn help_prints_usage_and_unknown_flags_are_errors() {
    let help = run_within(CONFORMANCE, &["--help"], Duration::from_secs(10));
    assert!(help.status.success(), "{help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("usage: conformance"), "{help:?}");

    for bogus in [&["--bogus"][..], &["--bindings", "rust", "--variant", "single"][..], &["--jobs"][..]] {
        let out = run_within(CONFORMANCE, bogus, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{bogus:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("usage: conformance"), "{bogus:?}: {err}");
    }

    let help = run_within(TEST_SERVERS, &["--help"], Duration::from_secs(10));
    assert!(help.status.success(), "{help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("usage: test-servers"), "{help:?}");
    let out = run_within(TEST_SERVERS, &["single", "--bogus"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: test-servers"), "{out:?}");
}

/// Starts `test-servers single` and returns it with the pids it reported.
fn launcher() -> (Child, Vec<u32>) {
    let mut child = Command::new(TEST_SERVERS)
        .arg("single")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start test-servers");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its description");
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON line");
    let pids: Vec<u32> = v["pids"].as_array().expect("pids").iter().map(|p| p.as_u64().expect("a pid") as u32).collect();
    assert!(!pids.is_empty() && pids.iter().all(|&p| !gone(p)), "{line}");
    (child, pids)
}

#[test]
fn launcher_servers_die_with_it() {
    for signal in [libc::SIGKILL, libc::SIGTERM] {
        let (mut child, pids) = launcher();
        kill(child.id(), signal);
        let _ = child.wait();
        assert_all_gone(&pids, &format!("test-servers ended by signal {signal}"));
    }
}

#[test]
fn orchestrator_servers_die_with_it() {
    for signal in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT] {
        // A scenario that runs for a while, so the servers are up when the signal comes.
        let mut child = Command::new(CONFORMANCE)
            .args(["--bindings", "rust", "--variants", "single", "--scenarios", "holder_crash_frees_within_lease"])
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start conformance");
        let deadline = Instant::now() + Duration::from_secs(30);
        let servers = loop {
            let servers: Vec<u32> =
                descendants(child.id()).into_iter().filter(|&p| command_name(p).starts_with("redis-server")).collect();
            if !servers.is_empty() {
                break servers;
            }
            assert!(Instant::now() < deadline, "no redis-server under the orchestrator within 30 s");
            assert!(child.try_wait().expect("try_wait").is_none(), "the orchestrator ended before its servers were up");
            std::thread::sleep(Duration::from_millis(20));
        };
        kill(child.id(), signal);
        let _ = child.wait();
        assert_all_gone(&servers, &format!("conformance ended by signal {signal}"));
    }
}
