//! `lockgate run` / `elect` against real servers from the project's launcher: the same FIFO
//! queue as library holders, the command dead before the next holder's grant when the lock is
//! lost (Redis, ZooKeeper, etcd, PostgreSQL), SIGKILL after `--grace`, grandchildren behind
//! `sh -c`, `lockgate` itself SIGKILLed, signals forwarded, exit codes and bad input.
//!
//! Every wait is bounded and polls an observable fact (a file the command writes, a process
//! state); no assertion is on a duration.

#[path = "../../core/tests/support/test_servers.rs"]
mod test_servers;

#[path = "../../core/tests/support/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use proxy::SilentProxy;
use test_servers::TestServers;

const LOCKGATE: &str = env!("CARGO_BIN_EXE_lockgate");
const USAGE: i32 = 64;
const CONNECT: i32 = 69;
const BUSY: i32 = 75;
const AUTH: i32 = 77;
const LOST: i32 = 79;

/// A scratch directory of one test, removed when it ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("lockgate-cli-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `lockgate ARGS...` started in `dir`, stderr captured.
fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(LOCKGATE)
        .args(args)
        .current_dir(dir)
        .env_remove("LOCKGATE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `lockgate ARGS...` run to its end in `dir`.
fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(LOCKGATE).args(args).current_dir(dir).env_remove("LOCKGATE_URL").stdin(Stdio::null()).output().unwrap()
}

/// Waits (bounded) for a child's exit; its code and stderr.
fn finish(child: Child, limit: Duration) -> (i32, String) {
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let mut child = child;
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned());
        }
        assert!(Instant::now() < deadline, "lockgate (pid {pid}) still runs after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until `path` exists with content; the content.
fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s.trim().to_string();
            }
        }
        assert!(Instant::now() < deadline, "{} never written", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` is dead: gone, or a zombie nobody reaped yet.
fn dead(pid: &str) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (bounded) until process `pid` is dead.
fn wait_dead(pid: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !dead(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The command every run below starts: writes its token, starts a grandchild (`sleep`) and
/// writes both pids, then waits. `trap` makes it ignore SIGTERM when asked.
fn job(ignore_term: bool) -> String {
    let trap = if ignore_term { "trap 'echo term >> got-term' TERM; " } else { "" };
    format!(
        "{trap}echo \"$LOCKGATE_FENCING_TOKEN\" > token; echo \"$LOCKGATE_NAME\" > name; sleep 60 & echo $! > gpid; echo $$ > pid; \
         while :; do wait; done"
    )
}

// ------------------------------------------------------------------------------------ input

#[test]
fn bad_input_is_a_one_line_usage_error_and_starts_nothing() {
    let dir = Scratch::new("bad-input");
    let marker = dir.path("started");
    let m = marker.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--frobnicate", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--wait", "5 parsecs", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--lease", "-1s", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--lease", "1ms", "--", "touch", m],
        vec!["run", "x", "--url", "bogus://127.0.0.1:1", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:notaport", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--"],
        vec!["run", "x", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--read", "--write", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--semaphore", "0", "--", "touch", m],
        vec!["run", "x", "--url", "redis://127.0.0.1:1", "--wait", "1s", "--no-wait", "--", "touch", m],
        vec!["frobnicate"],
        vec![],
    ];
    for args in cases {
        let out = run(&dir.0, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("lockgate: "), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?} started the command");
    }
    // A password in a refused URL is never shown.
    let out = run(&dir.0, &["run", "x", "--url", "redis://u:hunter2@127.0.0.1:1?frob=1", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("hunter2"), "{err}");
    // --help is not an error.
    assert_eq!(run(&dir.0, &["run", "--help"]).status.code(), Some(0));
}

#[test]
fn connect_and_authentication_failures_have_their_codes() {
    let dir = Scratch::new("connect");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("redis://127.0.0.1:{free}");
    let out = run(&dir.0, &["run", "x", "--url", &url, "--", "touch", "started"]);
    assert_eq!(out.status.code(), Some(CONNECT), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path("started").exists());

    let servers = TestServers::start(&["acl"]);
    let good = servers.url();
    let password = servers.info["password"].as_str().unwrap().to_string();
    let bad = good.replace(&password, "wrong-pw");
    let out = run(&dir.0, &["run", "x", "--url", &bad, "--", "touch", "started"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(AUTH), "{err}");
    assert!(!err.contains("wrong-pw") && !dir.path("started").exists(), "{err}");
    // The right credentials from LOCKGATE_URL, never printed with --verbose either.
    let out = Command::new(LOCKGATE)
        .args(["run", "-v", "x", "--", "sh", "-c", "exit 0"])
        .env("LOCKGATE_URL", &good)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains(&password), "{err}");
}

// ------------------------------------------------------------------------- exit codes, env

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_environment_and_busy() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("codes");
    let d = &dir.0;
    let out = run(d, &["run", "codes", "--url", &url, "--", "sh", "-c", "echo \"$LOCKGATE_NAME $LOCKGATE_FENCING_TOKEN\" > env; exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    let env = wait_file(&dir.path("env"));
    let (name, token) = env.split_once(' ').unwrap();
    assert_eq!(name, "codes");
    assert!(token.parse::<u64>().is_ok(), "token {token:?}");
    assert_eq!(run(d, &["run", "codes", "--url", &url, "--", "sh", "-c", "kill -9 $$"]).status.code(), Some(128 + 9));
    assert_eq!(run(d, &["run", "codes", "--url", &url, "--", "/nonexistent/cmd"]).status.code(), Some(127));

    // Held by a library user: --no-wait and a timed-out --wait are busy (-E changes the code).
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock("codes", LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let out = run(d, &["run", "codes", "--url", &url, "--no-wait", "--", "touch", "started"]);
    assert_eq!(out.status.code(), Some(BUSY), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run(d, &["run", "codes", "--url", &url, "--wait", "200ms", "-E", "9", "--", "touch", "started"]).status.code(), Some(9));
    assert!(!dir.path("started").exists());
    // A semaphore of 2 and the read side: held side by side; a third permit is busy.
    let a = spawn(d, &["run", "sem", "--url", &url, "--semaphore", "2", "--", "sh", "-c", "echo > a; sleep 3"]);
    let b = spawn(d, &["run", "sem", "--url", &url, "--semaphore", "2", "--", "sh", "-c", "echo > b; sleep 3"]);
    wait_file(&dir.path("a"));
    wait_file(&dir.path("b"));
    assert_eq!(run(d, &["run", "sem", "--url", &url, "--semaphore", "2", "--no-wait", "--", "true"]).status.code(), Some(BUSY));
    for c in [a, b] {
        c_kill(&c, libc::SIGTERM);
        assert_eq!(finish(c, Duration::from_secs(10)).0, 128 + libc::SIGTERM);
    }
    let r1 = spawn(d, &["run", "rw", "--url", &url, "--read", "--", "sh", "-c", "echo > r1; sleep 3"]);
    wait_file(&dir.path("r1"));
    assert_eq!(run(d, &["run", "rw", "--url", &url, "--read", "--no-wait", "--", "true"]).status.code(), Some(0));
    assert_eq!(run(d, &["run", "rw", "--url", &url, "--write", "--no-wait", "--", "true"]).status.code(), Some(BUSY));
    c_kill(&r1, libc::SIGINT);
    // SIGINT forwarded to the command (sh dies of it).
    assert_eq!(finish(r1, Duration::from_secs(10)).0, 128 + libc::SIGINT);
    // An election: the command runs while leading, the term as its token; a second is busy.
    let e = spawn(d, &["elect", "el", "--url", &url, "--", "sh", "-c", "echo $LOCKGATE_FENCING_TOKEN > term; sleep 3"]);
    let term = wait_file(&dir.path("term"));
    assert!(term.parse::<u64>().is_ok(), "term {term:?}");
    assert_eq!(run(d, &["elect", "el", "--url", &url, "--no-wait", "--", "true"]).status.code(), Some(BUSY));
    c_kill(&e, libc::SIGHUP);
    assert_eq!(finish(e, Duration::from_secs(10)).0, 128 + libc::SIGHUP);
    lease.release().await.unwrap();
    client.close().await;
}

fn c_kill(child: &Child, sig: i32) {
    // SAFETY: our own child process, by pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

// ------------------------------------------------------------------- FIFO with the library

/// Appends a line to the shared log (O_APPEND: whole lines from every process).
fn append(path: &Path, line: &str) {
    let mut f = OpenOptions::new().create(true).append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_queues_fifo_with_library_holders() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("fifo");
    let log = dir.path("log");
    let client = Client::connect(&url).await.unwrap();
    let lock = client.lock("fifo", LockOptions::default()).unwrap();
    let first = lock.acquire(Duration::from_secs(5)).await.unwrap();
    let script = "echo \"start $LOCKGATE_FENCING_TOKEN\" >> log; sleep 0.2; echo \"end $LOCKGATE_FENCING_TOKEN\" >> log";
    // Queued in this order: lockgate A, the library B, lockgate C.
    let a = spawn(&dir.0, &["run", "fifo", "--url", &url, "--", "sh", "-c", script]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let other = Client::connect(&url).await.unwrap();
    let b_lock = other.lock("fifo", LockOptions::default()).unwrap();
    let b_log = log.clone();
    let b = tokio::spawn(async move {
        let lease = b_lock.acquire(Duration::from_secs(30)).await.unwrap();
        let t = lease.fencing_token().unwrap();
        append(&b_log, &format!("start {t}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        append(&b_log, &format!("end {t}"));
        lease.release().await.unwrap();
        t
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let c = spawn(&dir.0, &["run", "fifo", "--url", &url, "--", "sh", "-c", script]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = first.fencing_token().unwrap();
    first.release().await.unwrap();
    assert_eq!(finish(a, Duration::from_secs(20)).0, 0);
    let tb = b.await.unwrap();
    assert_eq!(finish(c, Duration::from_secs(20)).0, 0);
    let lines: Vec<String> = fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let mut last = t0;
    for pair in lines.chunks(2) {
        let (s, e) = (pair[0].strip_prefix("start ").unwrap(), pair[1].strip_prefix("end ").unwrap());
        assert_eq!(s, e, "overlap: {lines:?}");
        let t: u64 = s.parse().unwrap();
        assert!(t > last, "tokens not increasing: {lines:?}");
        last = t;
    }
    assert_eq!(lines[2], format!("start {tb}"), "the library waiter was not second: {lines:?}");
    client.close().await;
    other.close().await;
}

// ----------------------------------------------------------------------------------- loss

/// The holder behind a frozen proxy (every connection, old and new, silent) loses its lease;
/// the command and its grandchild must be dead when a library waiter (direct) is granted, with
/// a greater token, and lockgate exits LOST.
async fn loss_kills_before_the_next_grant(servers: TestServers, extra: &[&str], test: &str) {
    let direct = servers.url();
    let port = servers.port(0);
    let proxy = SilentProxy::start(port).await;
    let via_proxy = direct.replace(&format!("127.0.0.1:{port}"), &format!("127.0.0.1:{}", proxy.port));
    let dir = Scratch::new(test);
    let script = job(false);
    let mut args = vec!["run", test, "--url", &via_proxy, "-v", "--grace", "300ms"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", &script]);
    let lg = spawn(&dir.0, &args);
    let (pid, gpid) = (wait_file(&dir.path("pid")), wait_file(&dir.path("gpid")));
    let token: Option<u64> = wait_file(&dir.path("token")).parse().ok();
    assert_eq!(wait_file(&dir.path("name")), test);
    let client = Client::connect(&direct).await.unwrap();
    let waiter = client.lock(test, LockOptions::default()).unwrap();
    let granted = tokio::spawn(async move { waiter.acquire(Duration::from_secs(60)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.freeze();
    let lease = tokio::time::timeout(Duration::from_secs(60), granted).await.expect("no grant").unwrap().unwrap();
    // Checked at once on the grant: nothing of the command may still run.
    let (cmd_dead, grandchild_dead) = (dead(&pid), dead(&gpid));
    let (code, err) = finish(lg, Duration::from_secs(20));
    assert!(cmd_dead && grandchild_dead, "{test}: still running at the next grant (command dead: {cmd_dead}, grandchild: {grandchild_dead}); lockgate said:\n{err}");
    if let (Some(mine), Some(next)) = (token, lease.fencing_token()) {
        assert!(next > mine, "{test}: token {next} not above {mine}");
    }
    assert_eq!(code, LOST, "{test}: {err}");
    assert!(err.contains("SIGTERM") && err.contains("lockgate: [acquire.granted]") && err.contains("fencing token"), "{test}: {err}");
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_on_redis() {
    loss_kills_before_the_next_grant(TestServers::start(&["single"]), &["--lease", "2s"], "loss-redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_on_zookeeper() {
    loss_kills_before_the_next_grant(TestServers::start(&["zookeeper"]), &["--session-timeout", "2s"], "loss-zookeeper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_on_etcd() {
    loss_kills_before_the_next_grant(TestServers::start(&["etcd"]), &["--session-timeout", "2s"], "loss-etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_on_postgres() {
    loss_kills_before_the_next_grant(TestServers::start(&["postgres"]), &["--lease", "2s"], "loss-postgres").await;
}

/// A command that ignores SIGTERM is killed (SIGKILL) after the grace, still before the
/// lease's validity ends (the next grant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace_escalates_to_sigkill() {
    let servers = TestServers::start(&["single"]);
    let direct = servers.url();
    let port = servers.port(0);
    let proxy = SilentProxy::start(port).await;
    let via_proxy = direct.replace(&format!(":{port}"), &format!(":{}", proxy.port));
    let dir = Scratch::new("grace");
    let script = job(true);
    let lg = spawn(&dir.0, &["run", "grace", "--url", &via_proxy, "--lease", "3s", "--grace", "400ms", "--", "sh", "-c", &script]);
    let pid = wait_file(&dir.path("pid"));
    let client = Client::connect(&direct).await.unwrap();
    let waiter = client.lock("grace", LockOptions::default()).unwrap();
    let granted = tokio::spawn(async move { waiter.acquire(Duration::from_secs(60)).await });
    proxy.freeze();
    let lease = tokio::time::timeout(Duration::from_secs(60), granted).await.expect("no grant").unwrap().unwrap();
    let cmd_dead = dead(&pid);
    let (code, err) = finish(lg, Duration::from_secs(20));
    assert!(cmd_dead, "the command outlived the lease: {err}");
    assert_eq!(code, LOST, "{err}");
    // It saw the SIGTERM and went on: only the SIGKILL ended it.
    assert_eq!(fs::read_to_string(dir.path("got-term")).unwrap_or_default().trim(), "term", "{err}");
    lease.release().await.unwrap();
    client.close().await;
}

/// `lockgate` SIGKILLed: the kernel kills the command (PR_SET_PDEATHSIG) and the watchdog its
/// group (the grandchild), both before the lease's validity ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_lockgate_leaves_nothing_running() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("sigkill");
    let script = job(true);
    let lg = spawn(&dir.0, &["run", "sigkill", "--url", &url, "--lease", "3s", "--grace", "300ms", "--", "sh", "-c", &script]);
    let (pid, gpid) = (wait_file(&dir.path("pid")), wait_file(&dir.path("gpid")));
    c_kill(&lg, libc::SIGKILL);
    let _ = finish(lg, Duration::from_secs(5));
    // Both are gone well within the 3 s lease (the grace is 300 ms).
    assert!(wait_dead(&pid, Duration::from_secs(2)), "the command outlived lockgate");
    assert!(wait_dead(&gpid, Duration::from_secs(2)), "the grandchild outlived lockgate");
    // And the lock frees itself by its lease: a library user gets it.
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock("sigkill", LockOptions::default()).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    lease.release().await.unwrap();
    client.close().await;
}

/// `lockgate run /jobs/nightly` and `etcdctl lock /jobs/nightly` are one lock (etcd's own mutex
/// recipe, PROTOCOL.md "etcd"): busy while etcdctl holds it, then granted after it, no overlap.
#[test]
fn run_beside_etcdctl_lock() {
    let servers = TestServers::start(&["etcd"]);
    let url = servers.url();
    let endpoints = servers.info["endpoints"].as_str().unwrap().to_string();
    let dir = Scratch::new("etcdctl");
    let etcdctl = Command::new("etcdctl")
        .args([&format!("--endpoints={endpoints}"), "lock", "/jobs/nightly", "--", "sh", "-c", "echo start-etcdctl >> log; sleep 1; echo end-etcdctl >> log"])
        .current_dir(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Debian's etcdctl (scripts/lib.sh installs etcd-client)");
    wait_file(&dir.path("log"));
    let busy = run(&dir.0, &["run", "/jobs/nightly", "--url", &url, "--no-wait", "--", "touch", "started"]);
    assert_eq!(busy.status.code(), Some(BUSY), "{}", String::from_utf8_lossy(&busy.stderr));
    let out = run(&dir.0, &["run", "/jobs/nightly", "--url", &url, "--wait", "20s", "--", "sh", "-c", "echo start-lockgate >> log; echo end-lockgate >> log"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, err) = finish(etcdctl, Duration::from_secs(20));
    assert_eq!(code, 0, "etcdctl: {err}");
    let log = fs::read_to_string(dir.path("log")).unwrap();
    assert_eq!(log, "start-etcdctl\nend-etcdctl\nstart-lockgate\nend-lockgate\n");
    assert!(!dir.path("started").exists());
}

/// The lock deleted behind lockgate's back (the conformance fixture's `steal`: `DEL` of the
/// mutex key `lockgate:{NAME}`): the loss signal ends the command at once, exit LOST.
#[test]
fn a_stolen_lock_ends_the_command() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("steal");
    let script = job(false);
    let lg = spawn(&dir.0, &["run", "steal", "--url", &url, "--lease", "1500ms", "--grace", "300ms", "--", "sh", "-c", &script]);
    let (pid, gpid) = (wait_file(&dir.path("pid")), wait_file(&dir.path("gpid")));
    let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let deleted: i64 = redis::cmd("DEL").arg("lockgate:{steal}").query(&mut conn).unwrap();
    assert_eq!(deleted, 1, "the mutex key is not where the fixture says");
    let (code, err) = finish(lg, Duration::from_secs(20));
    assert_eq!(code, LOST, "{err}");
    assert!(err.contains("NOT_HELD"), "{err}");
    assert!(wait_dead(&pid, Duration::from_secs(2)) && wait_dead(&gpid, Duration::from_secs(2)), "{err}");
}

/// `--label` (or `LOCKGATE_LABEL`) is stored with the holder's entry where an operator reads it
/// (PROTOCOL.md §12: Redis's waiters hash, field `l:<token>`) and handed to the command; without
/// it the label is `<hostname>:<lockgate's pid>`; an invalid one is a usage error, nothing started.
#[test]
fn the_label_is_stored_and_handed_to_the_command() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("label");
    let d = &dir.0;
    let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let stored = |conn: &mut redis::Connection| -> Vec<String> {
        let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL").arg("lockgate:{lab}:waiters").query(conn).unwrap();
        fields.into_iter().filter(|(k, _)| k.starts_with("l:")).map(|(_, v)| v).collect()
    };
    let script = "echo \"$LOCKGATE_LABEL\" > label; while [ ! -e done ]; do sleep 0.05; done";
    for (args, env) in [(vec!["--label", "nightly report@web-3"], None), (vec![], Some("from the environment"))] {
        let _ = fs::remove_file(dir.path("label"));
        let _ = fs::remove_file(dir.path("done"));
        let mut cmd = Command::new(LOCKGATE);
        cmd.args(["run", "lab", "--url", &url]).args(&args).args(["--", "sh", "-c", script]);
        cmd.current_dir(d).env_remove("LOCKGATE_URL").env_remove("LOCKGATE_LABEL").stdin(Stdio::null()).stderr(Stdio::piped());
        if let Some(v) = env {
            cmd.env("LOCKGATE_LABEL", v);
        }
        let lg = cmd.spawn().unwrap();
        let want = env.unwrap_or("nightly report@web-3");
        assert_eq!(wait_file(&dir.path("label")), want);
        assert_eq!(stored(&mut conn), vec![want.to_string()]);
        fs::write(dir.path("done"), "").unwrap();
        assert_eq!(finish(lg, Duration::from_secs(10)).0, 0);
    }
    // The default: this host's name and lockgate's own pid (what an operator greps logs for).
    let _ = fs::remove_file(dir.path("done"));
    let _ = fs::remove_file(dir.path("label"));
    let lg = Command::new(LOCKGATE)
        .args(["run", "lab", "--url", &url, "--", "sh", "-c", script])
        .current_dir(d)
        .env_remove("LOCKGATE_URL")
        .env_remove("LOCKGATE_LABEL")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let label = wait_file(&dir.path("label"));
    assert!(label.ends_with(&format!(":{}", lg.id())), "{label}");
    assert_eq!(stored(&mut conn), vec![label]);
    fs::write(dir.path("done"), "").unwrap();
    assert_eq!(finish(lg, Duration::from_secs(10)).0, 0);
    // A control character or more than 256 bytes: refused before connecting, nothing started.
    let long = "x".repeat(257);
    for bad in ["bell\u{7}", long.as_str()] {
        let out = run(d, &["run", "lab", "--url", &url, "--label", bad, "--", "touch", "started"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{err}");
        assert!(err.contains("--label"), "{err}");
    }
    assert!(!dir.path("started").exists());
}

/// `--verbose` prints the library's telemetry events (README "Telemetry") for the lock, with
/// its name and measurements, beside what only lockgate knows (the token it holds).
#[test]
fn verbose_prints_the_core_events() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("verbose");
    let out = run(&dir.0, &["run", "--verbose", "verb", "--url", &url, "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let events: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("lockgate: [")).map(|l| l.split(']').next().unwrap()).collect();
    assert_eq!(events, ["acquire.started", "acquire.granted", "lease.released"], "{err}");
    assert!(err.contains("[acquire.granted] lock granted (\"verb\"): wait="), "{err}");
    assert!(err.contains(" queued=false"), "{err}");
    assert!(err.contains("[lease.released] lock released (\"verb\"): held="), "{err}");
    assert!(err.contains("holding \"verb\": fencing token "), "{err}");
    // Without --verbose: nothing but what goes wrong.
    let out = run(&dir.0, &["run", "verb", "--url", &url, "--", "true"]);
    assert_eq!((out.status.code(), out.stderr.as_slice()), (Some(0), &b""[..]));
}

/// A stderr that takes nothing (a full pipe nobody reads, as behind a paused pager) holds up
/// neither the lock nor the command: lockgate's lines wait for it, while the lease is granted
/// and renewed on the thread that would otherwise block on the first of them.
#[cfg(target_os = "linux")]
#[test]
fn a_stderr_that_takes_nothing_holds_up_no_lock() {
    use std::io::{Read, Write};
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("full-stderr");
    let (mut reader, mut writer) = std::io::pipe().unwrap();
    // Linux's default pipe capacity: full, so lockgate's first write to stderr blocks.
    writer.write_all(&vec![b'.'; 65536]).unwrap();
    let child = Command::new(LOCKGATE)
        .args(["run", "--verbose", "--lease", "1s", "full", "--url", &url, "--", "sh", "-c", "sleep 2.5; echo ran > done"])
        .current_dir(&dir.0)
        .env_remove("LOCKGATE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer.try_clone().unwrap())
        .spawn()
        .unwrap();
    drop(writer);
    // Granted, and renewed past its 1 s lease, with nothing written: the command ran to its end.
    assert_eq!(wait_file(&dir.path("done")), "ran");
    let drained = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = reader.read_to_end(&mut all);
        String::from_utf8_lossy(&all[65536..]).into_owned()
    });
    let (code, _) = finish(child, Duration::from_secs(20));
    let err = drained.join().unwrap();
    assert_eq!(code, 0, "the lease was kept while stderr took nothing: {err}");
    // Nothing lost, in order: the events and lockgate's own lines waited for stderr.
    let at = |needle: &str| err.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {err}"));
    assert!(at("lockgate: [acquire.granted]") < at("lockgate: holding \"full\"") && at("renewed, valid for") < at("lockgate: [lease.released]"), "{err}");
}

/// `lockgate inspect`: the holder (label, fencing token) and the waiters in queue order that
/// library clients left on the server, as a table and as `--json`; an unknown name is free; a
/// bad `--kind` is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_holder_and_the_queue() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("inspect");
    let labelled = |label: &str| {
        let mut o = lockgate_core::native::ClientOptions::new(url.clone());
        o.label = Some(label.to_string());
        o
    };
    let holder = labelled("holder-a").connect().await.unwrap();
    let waiter = labelled("waiter-b").connect().await.unwrap();
    let lease = holder.lock("insp", LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let token = lease.fencing_token().unwrap();
    let queued = waiter.lock("insp", LockOptions::default()).unwrap();
    let waiting = tokio::spawn(async move { queued.acquire(Duration::from_secs(30)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let out = run(&dir.0, &["inspect", "insp", "--url", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("\"insp\" (mutex): held\n"), "{text}");
    assert!(text.contains("holder-a") && text.contains(&token.to_string()), "{text}");
    assert!(text.contains("1 waiting, in queue order:") && text.contains("1. waiter-b"), "{text}");

    let out = run(&dir.0, &["inspect", "insp", "--url", &url, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["name"].as_str(), v["kind"].as_str(), v["locked"].as_bool()), (Some("insp"), Some("mutex"), Some(true)));
    assert_eq!(v["holders"][0]["label"], "holder-a");
    assert_eq!(v["holders"][0]["fencing_token"].as_u64(), Some(token));
    assert_eq!(v["waiters"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["waiters"][0]["label"], "waiter-b");

    lease.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
    let out = run(&dir.0, &["inspect", "insp", "--url", &url, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["locked"].as_bool(), v["holders"].as_array().map(Vec::len)), (Some(false), Some(0)));
    let out = run(&dir.0, &["inspect", "nobody-ever", "--url", &url]);
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).as_ref()), (Some(0), "\"nobody-ever\" (mutex): free\n"));
    let out = run(&dir.0, &["inspect", "insp", "--url", &url, "--kind", "queue"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    holder.close().await;
    waiter.close().await;
}

/// `lockgate break`: removes the holder a library client left (its label and fencing token
/// said), the waiter behind it gets the lock with a larger token, the broken holder's release
/// finds nothing; a stale `--token` breaks nothing (exit 1) and leaves the new holder; `--json`;
/// a free lock is exit 1; a bad name or kind is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_removes_the_holder_and_wakes_the_next() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("break");
    let mut o = lockgate_core::native::ClientOptions::new(url.clone());
    o.label = Some("dead-holder".to_string());
    let holder = o.connect().await.unwrap();
    let waiter = lockgate_core::native::ClientOptions::new(url.clone()).connect().await.unwrap();
    let lease = holder.lock("brk", LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let token = lease.fencing_token().unwrap();
    let queued = waiter.lock("brk", LockOptions::default()).unwrap();
    let waiting = tokio::spawn(async move { queued.acquire(Duration::from_secs(30)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let out = run(&dir.0, &["break", "brk", "--url", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text, format!("broke \"brk\" (mutex): removed holder dead-holder with fencing token {token}\n"));
    let next = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap().unwrap();
    let next_token = next.fencing_token().unwrap();
    assert!(next_token > token);
    assert!(!lease.release().await.unwrap(), "the broken holder's release finds nothing");

    let stale = token.to_string();
    let out = run(&dir.0, &["break", "brk", "--url", &url, "--token", &stale, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["name"].as_str(), v["kind"].as_str(), v["broken"].as_bool()), (Some("brk"), Some("mutex"), Some(false)));
    assert!(next.is_held(), "a stale token leaves the new holder");
    let current = next_token.to_string();
    let out = run(&dir.0, &["break", "brk", "--url", &url, "--token", &current, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["broken"].as_bool(), v["fencing_token"].as_u64(), v["label"].is_null()), (Some(true), Some(next_token), false));
    assert!(!next.release().await.unwrap());

    let out = run(&dir.0, &["break", "brk", "--url", &url]);
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).as_ref()), (Some(1), "nothing broken: \"brk\" (mutex) is free\n"));
    let out = run(&dir.0, &["break", "", "--url", &url]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&dir.0, &["break", "brk", "--url", &url, "--kind", "queue"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&dir.0, &["break", "brk", "--url", &url, "--token", "-3"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    holder.close().await;
    waiter.close().await;
}

/// `lockgate list`: the locks under a prefix that library clients hold or wait on, as a table
/// and as `--json`, read across pages (`--limit` bounds what is printed, the rest is a cursor
/// to continue with); a lock under another prefix is not listed, nothing listed is no error; a
/// zero limit is a usage error, an unlistable backend (memcached) too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_locks_under_a_prefix() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("list");
    let mut o = lockgate_core::native::ClientOptions::new(url.clone());
    o.label = Some("lister-a".to_string());
    let client = o.connect().await.unwrap();
    let mut leases = Vec::new();
    for name in ["lst:1", "lst:2", "lst:3", "other:1"] {
        leases.push(client.lock(name, LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap());
    }
    let sem = client.semaphore("lst:s", 3, LockOptions::default()).unwrap();
    leases.push(sem.acquire(Duration::from_secs(5)).await.unwrap());

    let out = run(&dir.0, &["list", "lst:", "--url", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("NAME"), "{text}");
    for name in ["lst:1", "lst:2", "lst:3", "lst:s"] {
        assert!(text.contains(name), "{text}");
    }
    assert!(!text.contains("other:1") && text.contains("semaphore") && text.contains("lister-a"), "{text}");

    let out = run(&dir.0, &["list", "lst:", "--url", &url, "--json", "--limit", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut seen: Vec<String> = v["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(seen.len(), 2, "{v}");
    assert_eq!((v["entries"][0]["holders"].as_u64(), v["entries"][0]["waiters"].as_u64()), (Some(1), Some(0)));
    let cursor = v["cursor"].as_str().expect("more follow").to_string();
    let out = run(&dir.0, &["list", "lst:", "--url", &url, "--json", "--cursor", &cursor]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    seen.extend(v["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()));
    seen.sort();
    assert_eq!(seen, ["lst:1", "lst:2", "lst:3", "lst:s"], "{v}");
    assert!(v["cursor"].is_null(), "{v}");

    for l in leases {
        l.release().await.unwrap();
    }
    let out = run(&dir.0, &["list", "lst:", "--url", &url, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.code(), v["entries"].as_array().map(Vec::len)), (Some(0), Some(0)));
    let out = run(&dir.0, &["list", "lst:", "--url", &url, "--limit", "0"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&dir.0, &["list", "}x", "--url", &url]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", String::from_utf8_lossy(&out.stderr));
    client.close().await;
}

// ------------------------------------------------------------------------- min / max hold

/// `--min-hold`: the lock stays held (by the server, lockgate gone) until that long after the
/// grant, so a second `run --no-wait` within the interval is busy and one after it runs;
/// `--max-hold`: the command (and its grandchild) is terminated before it, lockgate exits 79
/// saying so, and a library waiter gets the lock with a greater token. Bad holds are usage
/// errors naming the option, `--min-hold` on ZooKeeper too (it cannot keep one), nothing started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_hold_keeps_the_lock_and_max_hold_terminates() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("holds");
    let d = &dir.0;
    let started = Instant::now();
    let out = run(d, &["run", "hold", "--url", &url, "--min-hold", "1500ms", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(d, &["run", "hold", "--url", &url, "--no-wait", "--", "touch", "second"]);
    assert_eq!(out.status.code(), Some(BUSY), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_millis(1500), "the check ran too late to mean anything");
    assert!(!dir.path("second").exists());
    // After the interval the lock is free again (bounded poll).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = run(d, &["run", "hold", "--url", &url, "--no-wait", "--", "touch", "second"]);
        if out.status.code() == Some(0) {
            break;
        }
        assert_eq!(out.status.code(), Some(BUSY), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(Instant::now() < deadline, "the min hold never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(started.elapsed() >= Duration::from_millis(1500), "freed before --min-hold");
    assert!(dir.path("second").exists());

    let script = job(false);
    let lg = spawn(d, &["run", "maxh", "--url", &url, "--lease", "600ms", "--max-hold", "1500ms", "--grace", "200ms", "--", "sh", "-c", &script]);
    let (pid, gpid) = (wait_file(&dir.path("pid")), wait_file(&dir.path("gpid")));
    let token: u64 = wait_file(&dir.path("token")).parse().unwrap();
    let client = Client::connect(&url).await.unwrap();
    let waiter = client.lock("maxh", LockOptions::default()).unwrap();
    let next = waiter.acquire(Duration::from_secs(10)).await.unwrap();
    assert!(dead(&pid) && dead(&gpid), "the command outlived --max-hold");
    assert!(next.fencing_token().unwrap() > token);
    let (code, err) = finish(lg, Duration::from_secs(10));
    assert_eq!(code, LOST, "{err}");
    assert!(err.contains("--max-hold"), "{err}");
    next.release().await.unwrap();
    client.close().await;

    for (args, word) in [
        (vec!["--url", url.as_str(), "--min-hold", "2s", "--max-hold", "1s"], "--min-hold"),
        (vec!["--url", url.as_str(), "--max-hold", "5ms"], "--max-hold"),
        (vec!["--url", "zookeeper://127.0.0.1:1", "--min-hold", "1s"], "--min-hold"),
        (vec!["--url", url.as_str(), "--min-hold", "soon"], "--min-hold"),
    ] {
        let mut all = vec!["run", "bad-hold"];
        all.extend(args);
        all.extend(["--", "touch", "started"]);
        let out = run(d, &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(USAGE), "{all:?}: {err}");
        assert!(err.contains(word), "{all:?}: {err}");
    }
    assert!(!dir.path("started").exists());
}
