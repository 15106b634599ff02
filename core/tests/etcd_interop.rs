//! lockgate's etcd mutex and election against etcd's own tools on a real etcd (Debian's etcd
//! 3.4 from the project's launcher), PROTOCOL.md §10 "Interoperability": a lockgate name
//! starting with `/` is the prefix `etcdctl lock NAME` / `etcdctl elect NAME` and Go's
//! `concurrency` package use, so they exclude each other, in arrival order.
//!
//! - `etcdctl lock` holds: a lockgate waiter is granted only once etcdctl lets go, with a larger
//!   token; lockgate holds: `etcdctl lock NAME -- cmd` runs cmd only after lockgate's release;
//! - an etcdctl waiter and a lockgate waiter queued behind one holder are served in the order
//!   they queued, both ways round;
//! - `etcdctl elect` leads: lockgate's observe sees its proposal, lockgate's campaign wins once
//!   it resigns, and `etcdctl elect -l` sees lockgate's leader value;
//! - a Go program holding `concurrency.Mutex` (bench/etcd-go, go.etcd.io/etcd/client/v3 v3.5)
//!   and lockgate exclude each other both ways, and Go workers and lockgate clients looping on
//!   one lock never hold it at once.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use etcd_client as ec;
use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::inspect::Kind;
use lockgate_core::LockOptions;
use test_servers::TestServers;

const WAIT: Duration = Duration::from_secs(10);

/// One etcd for the whole file (every test uses names of its own); the launcher stops it when
/// this process ends and its stdin closes.
fn server() -> &'static (String, String) {
    static SERVER: OnceLock<(String, String)> = OnceLock::new();
    static KEEP: OnceLock<Mutex<TestServers>> = OnceLock::new();
    SERVER.get_or_init(|| {
        let s = TestServers::start(&["etcd"]);
        let info = (s.url(), s.info["endpoints"].as_str().expect("endpoints").to_string());
        let _ = KEEP.set(Mutex::new(s));
        info
    })
}

fn url() -> String {
    server().0.clone()
}

fn endpoints() -> String {
    server().1.clone()
}

/// A `/`-prefixed lock name no other test or run uses (etcdctl's prefix as it is).
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("/lg-interop-{tag}-{}-{t}", std::process::id())
}

async fn connect() -> Client {
    let mut options = ClientOptions::new(url());
    options.session_timeout = Some(Duration::from_secs(5));
    options.connect().await.unwrap_or_else(|e| panic!("{}: {e}", url()))
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("etcd grants carry a token")
}

async fn raw() -> ec::Client {
    let eps: Vec<String> = endpoints().split(',').map(str::to_string).collect();
    ec::Client::connect(eps, None).await.unwrap()
}

/// The keys under `prefix/` with their create revisions, oldest first.
async fn keys(raw: &mut ec::Client, prefix: &str) -> Vec<(String, i64)> {
    let r = raw.get(format!("{prefix}/"), Some(ec::GetOptions::new().with_prefix())).await.unwrap();
    let mut v: Vec<(String, i64)> =
        r.kvs().iter().map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.create_revision())).collect();
    v.sort_by_key(|k| k.1);
    v
}

/// Waits until `prefix/` has `n` keys (a waiter has queued); panics after 5 s.
async fn until_keys(raw: &mut ec::Client, prefix: &str, n: usize) -> Vec<(String, i64)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let k = keys(raw, prefix).await;
        if k.len() == n {
            return k;
        }
        assert!(Instant::now() < deadline, "{prefix}: expected {n} keys, found {k:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A process this test started: its stdout lines as they come (with when), stopped by its pid.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    /// `etcdctl --endpoints <the launcher's endpoints> <args>` (API v3).
    fn etcdctl(args: &[&str]) -> Proc {
        let mut cmd = Command::new("etcdctl");
        cmd.arg("--endpoints").arg(endpoints()).args(args).env("ETCDCTL_API", "3");
        Proc::spawn(cmd)
    }

    /// The next stdout line within `limit`, or `None`.
    fn line(&self, limit: Duration) -> Option<(Instant, String)> {
        tokio::task::block_in_place(|| self.lines.recv_timeout(limit).ok())
    }

    fn expect_line(&self, what: &str) -> (Instant, String) {
        self.line(WAIT).unwrap_or_else(|| panic!("no output from {what} within {WAIT:?}"))
    }

    /// Sends a signal to this process (by its pid).
    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap().success();
        assert!(ok, "kill -{sig} {}", self.child.id());
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits up to `WAIT` for the process to end.
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "pid {} still running after {WAIT:?}", self.child.id());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Closes its stdin (how `etcd-go hold` is told to let go).
    fn close_stdin(&mut self) {
        self.child.stdin = None;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcdctl_holder_excludes_lockgate_until_it_releases() {
    let name = unique("etcdctl-holds");
    let mut raw = raw().await;
    let c = connect().await;
    let lock = c.lock(&name, LockOptions::default()).unwrap();

    // etcdctl lock without a command prints its key once it holds, and holds until SIGTERM.
    let mut holder = Proc::etcdctl(&["lock", &name]);
    let (_, key) = holder.expect_line("etcdctl lock");
    assert!(key.starts_with(&format!("{name}/")), "etcdctl's key {key:?} is under {name}/");
    let theirs = keys(&mut raw, &name).await;
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert!(lock.try_acquire().await.unwrap().is_none(), "etcdctl holds");
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move {
            let l = lock.acquire(WAIT).await;
            (Instant::now(), l)
        }
    });
    until_keys(&mut raw, &name, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "lockgate waits while etcdctl holds");
    // Inspect shows etcdctl's key as the holder, with no label (etcdctl writes an empty value),
    // and lockgate's waiter behind it with this client's label (PROTOCOL.md §14).
    let s = lock.inspect().await.unwrap();
    assert_eq!(s.holders.len(), 1, "{s:?}");
    assert_eq!((s.holders[0].label.as_deref(), s.holders[0].fencing_token), (None, Some(theirs[0].1 as u64)));
    assert_eq!(s.waiters.len(), 1, "{s:?}");
    assert!(s.waiters[0].label.is_some(), "{s:?}");
    // Listing under the key prefix shows etcdctl's lock once, as a mutex with its holder and
    // lockgate's waiter, and no label (PROTOCOL.md §16).
    let page = c.list(&name, None, None).await.unwrap();
    let listed: Vec<_> = page.entries.iter().map(|e| (e.name.as_str(), e.kind, e.holders, e.waiters, e.label.as_deref())).collect();
    assert_eq!(listed, [(name.as_str(), Kind::Mutex, 1, 1, None)], "{page:?}");
    let released = Instant::now();
    holder.signal("TERM");
    assert!(holder.wait().success(), "etcdctl unlocks on SIGTERM");
    let (granted, lease) = waiting.await.unwrap();
    let lease = lease.unwrap();
    assert!(granted >= released, "granted before etcdctl let go");
    assert!(token(&lease) > theirs[0].1 as u64, "{} > etcdctl's {}", token(&lease), theirs[0].1);
    assert!(lease.release().await.unwrap());
    assert!(keys(&mut raw, &name).await.is_empty());
    c.close().await;
}

/// Breaking an `etcdctl lock` holder (PROTOCOL.md §15): lockgate deletes etcdctl's key by its
/// name and create revision, says what it removed (no label: etcdctl writes an empty value; its
/// revision as the fencing token), and lockgate's waiter behind it gets the lock with a larger
/// token; a stale revision breaks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaking_an_etcdctl_holder_lets_the_lockgate_waiter_in() {
    let name = unique("etcdctl-broken");
    let mut raw = raw().await;
    let c = connect().await;
    let ops = connect().await;
    let lock = c.lock(&name, LockOptions::default()).unwrap();
    let mut holder = Proc::etcdctl(&["lock", &name]);
    holder.expect_line("etcdctl lock");
    let theirs = keys(&mut raw, &name).await;
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(WAIT).await }
    });
    until_keys(&mut raw, &name, 2).await;
    let rev = theirs[0].1 as u64;
    assert_eq!(ops.break_lock(&name, Kind::Mutex, Some(rev - 1)).await.unwrap(), None, "a stale revision breaks nothing");
    let broken = ops.break_lock(&name, Kind::Mutex, Some(rev)).await.unwrap().expect("etcdctl's key broken");
    assert_eq!((broken.label, broken.fencing_token), (None, Some(rev)));
    let lease = tokio::time::timeout(WAIT, waiting).await.expect("the waiter is woken").unwrap().unwrap();
    assert!(token(&lease) > rev, "{} > etcdctl's {rev}", token(&lease));
    // etcdctl's own unlock deletes only its own (gone) key: lockgate's holder keeps the lock.
    holder.signal("TERM");
    holder.wait();
    assert!(lease.is_held());
    assert!(lease.release().await.unwrap());
    assert!(keys(&mut raw, &name).await.is_empty());
    c.close().await;
    ops.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_lock_runs_its_command_only_after_lockgate_releases() {
    let name = unique("lockgate-holds");
    let mut raw = raw().await;
    let c = connect().await;
    let lease = c.lock(&name, LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();

    // The command runs once etcdctl holds; it prints the revision etcdctl was granted at.
    let mut waiter = Proc::etcdctl(&["lock", &name, "--", "sh", "-c", "echo got $ETCD_LOCK_REV"]);
    until_keys(&mut raw, &name, 2).await;
    assert!(waiter.line(Duration::from_millis(400)).is_none(), "etcdctl ran its command while lockgate held");
    assert!(waiter.running());
    let released = Instant::now();
    assert!(lease.release().await.unwrap());
    let (ran, line) = waiter.expect_line("etcdctl lock's command");
    assert!(ran >= released);
    let rev: u64 = line.strip_prefix("got ").and_then(|r| r.trim().parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
    assert!(rev > token(&lease), "etcdctl's revision {rev} > lockgate's token {}", token(&lease));
    assert!(waiter.wait().success());
    assert!(keys(&mut raw, &name).await.is_empty(), "etcdctl unlocked after its command");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_and_lockgate_waiters_are_served_in_arrival_order() {
    let name = unique("order");
    let mut raw = raw().await;
    let (a, b) = (connect().await, connect().await);
    let (la, lb) = (a.lock(&name, LockOptions::default()).unwrap(), b.lock(&name, LockOptions::default()).unwrap());
    // The command holds for 0.6 s, then etcdctl unlocks.
    let cmd = ["lock", &name, "--", "sh", "-c", "echo got; sleep 0.6"];

    // 1. etcdctl queues first, lockgate second: etcdctl is served first.
    let held = la.acquire(WAIT).await.unwrap();
    let mut first = Proc::etcdctl(&cmd);
    until_keys(&mut raw, &name, 2).await;
    let second = tokio::spawn({
        let lb = lb.clone();
        async move { lb.acquire(WAIT).await.map(|l| (Instant::now(), l)) }
    });
    until_keys(&mut raw, &name, 3).await;
    assert!(held.release().await.unwrap());
    let (got, _) = first.expect_line("the first waiter (etcdctl)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "lockgate, queued second, was granted while etcdctl held");
    assert!(first.wait().success());
    let (granted, lease) = second.await.unwrap().unwrap();
    // etcdctl unlocks after its command's 0.6 s sleep, which starts after the line we got.
    assert!(granted >= got + Duration::from_millis(450), "lockgate granted {:?} after etcdctl's command started", granted - got);
    assert!(lease.release().await.unwrap());

    // 2. lockgate queues first, etcdctl second: lockgate is served first.
    let held = la.acquire(WAIT).await.unwrap();
    let first = tokio::spawn(async move { lb.acquire(WAIT).await.map(|l| (Instant::now(), l)) });
    until_keys(&mut raw, &name, 2).await;
    let mut second = Proc::etcdctl(&cmd);
    until_keys(&mut raw, &name, 3).await;
    assert!(held.release().await.unwrap());
    let (granted, lease) = first.await.unwrap().unwrap();
    assert!(second.line(Duration::from_millis(400)).is_none(), "etcdctl, queued second, ran while lockgate held");
    assert!(lease.is_held());
    let released = Instant::now();
    assert!(lease.release().await.unwrap());
    let (ran, _) = second.expect_line("the second waiter (etcdctl)");
    assert!(ran >= released && ran > granted);
    assert!(second.wait().success());
    assert!(keys(&mut raw, &name).await.is_empty());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_elect_and_lockgate_elections_see_each_others_leaders() {
    let name = unique("elect");
    let mut raw = raw().await;
    let c = connect().await;
    let election = c.election(&name, LockOptions::default()).unwrap();

    // etcdctl campaigns and leads: it prints its key and proposal, then holds until SIGTERM.
    let mut leader = Proc::etcdctl(&["elect", &name, "etcdctl-proposal"]);
    let (_, key) = leader.expect_line("etcdctl elect");
    let (_, value) = leader.expect_line("etcdctl elect");
    assert!(key.starts_with(&format!("{name}/")), "{key:?}");
    assert_eq!(value, "etcdctl-proposal");
    let theirs = keys(&mut raw, &name).await;
    let seen = election.observe().await.unwrap().expect("etcdctl leads");
    assert_eq!(seen.value, "etcdctl-proposal", "lockgate observes etcdctl's leader value");
    assert_eq!(seen.term, theirs[0].1 as u64, "the term is the leader key's create revision");

    // lockgate campaigns behind it and wins once etcdctl resigns.
    let campaign = tokio::spawn({
        let election = election.clone();
        async move { election.campaign("lockgate-leader", Some(WAIT)).await }
    });
    until_keys(&mut raw, &name, 2).await;
    let mut observer = Proc::etcdctl(&["elect", "-l", &name]);
    let (_, k) = observer.expect_line("etcdctl elect -l");
    let (_, v) = observer.expect_line("etcdctl elect -l");
    assert_eq!((k.as_str(), v.as_str()), (key.as_str(), "etcdctl-proposal"), "etcdctl elect -l sees etcdctl's leader");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!campaign.is_finished(), "lockgate leads while etcdctl does");
    leader.signal("TERM");
    assert!(leader.wait().success(), "etcdctl elect resigns on SIGTERM");
    let leadership = campaign.await.unwrap().unwrap();
    assert!(token(&leadership) > seen.term, "a later term");

    // etcdctl elect -l observes lockgate's leader; lockgate's own observe agrees.
    let (_, k) = observer.expect_line("etcdctl elect -l, after the change");
    let (_, v) = observer.expect_line("etcdctl elect -l, after the change");
    assert!(k.starts_with(&format!("{name}/")) && k != key, "{k:?}");
    assert_eq!(v, "lockgate-leader", "etcdctl elect -l sees lockgate's leader value");
    let now = election.observe().await.unwrap().expect("lockgate leads");
    assert_eq!((now.value.as_str(), now.term), ("lockgate-leader", token(&leadership)));
    observer.signal("TERM");
    observer.wait();
    assert!(leadership.release().await.unwrap());
    assert!(election.observe().await.unwrap().is_none(), "resigned: no leader");
    assert!(keys(&mut raw, &name).await.is_empty());
    c.close().await;
}

/// bench/etcd-go built (once per run) with the Go toolchain; its module comes from the Go
/// module proxy (go.etcd.io/etcd/client/v3 v3.5, which speaks to 3.4 servers).
fn etcd_go() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let bin = root.join("target/etcd-go/etcd-go");
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(".")
            .current_dir(root.join("bench/etcd-go"))
            .output()
            .expect("the Go toolchain (go) builds bench/etcd-go");
        assert!(out.status.success(), "go build bench/etcd-go: {}", String::from_utf8_lossy(&out.stderr));
        bin
    })
    .clone()
}

fn go_hold(name: &str) -> Proc {
    let mut cmd = Command::new(etcd_go());
    cmd.args(["hold", "--endpoints", &endpoints(), "--name", name, "--ttl", "5"]);
    Proc::spawn(cmd)
}

/// `held <key> <create revision>` as `etcd-go hold` prints it: the revision.
fn held_revision(line: &str, name: &str) -> u64 {
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(parts.len() == 3 && parts[0] == "held" && parts[1].starts_with(&format!("{name}/")), "{line:?}");
    parts[2].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gos_concurrency_mutex_and_lockgate_exclude_each_other() {
    let name = unique("go");
    let bin = tokio::task::spawn_blocking(etcd_go).await.unwrap();
    assert!(bin.exists());
    let mut raw = raw().await;
    let c = connect().await;
    let lock = c.lock(&name, LockOptions::default()).unwrap();

    // Go holds: lockgate waits until the Go program unlocks.
    let mut go = go_hold(&name);
    let (_, line) = go.expect_line("etcd-go hold");
    let theirs = held_revision(&line, &name);
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(WAIT).await.map(|l| (Instant::now(), l)) }
    });
    until_keys(&mut raw, &name, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "lockgate waits while Go's concurrency.Mutex holds");
    // Told to let go now: lockgate's grant can only come after this.
    let letting_go = Instant::now();
    go.close_stdin();
    assert_eq!(go.expect_line("etcd-go release").1, "released");
    let (granted, lease) = waiting.await.unwrap().unwrap();
    assert!(granted >= letting_go, "granted before Go's Unlock");
    assert!(token(&lease) > theirs);
    assert!(go.wait().success());

    // lockgate holds: Go's Lock waits until lockgate releases.
    let mut go = go_hold(&name);
    until_keys(&mut raw, &name, 2).await;
    assert!(go.line(Duration::from_millis(400)).is_none(), "Go's Lock returned while lockgate held");
    let released = Instant::now();
    assert!(lease.release().await.unwrap());
    let (at, line) = go.expect_line("etcd-go hold");
    assert!(at >= released);
    assert!(held_revision(&line, &name) > token(&lease));
    go.close_stdin();
    assert_eq!(go.expect_line("etcd-go release").1, "released");
    assert!(go.wait().success());
    assert!(keys(&mut raw, &name).await.is_empty());
    c.close().await;
}

fn wall_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_and_lockgate_workers_contending_on_one_lock_never_hold_at_once() {
    let name = unique("mixed");
    let bin = tokio::task::spawn_blocking(etcd_go).await.unwrap();
    let mut raw = raw().await;
    // Two Go workers and two lockgate clients loop acquire → hold ~2 ms → release for 1.5 s,
    // from one wall-clock start; every holding is (acquired, release started) in wall ns.
    let start = wall_ns() + 700_000_000;
    let end = start + 1_500_000_000;
    let mut gos = Vec::new();
    for _ in 0..2 {
        let mut cmd = Command::new(&bin);
        cmd.args(["worker", "--endpoints", &endpoints(), "--name", &name, "--hold-us", "2000"]);
        cmd.args(["--start-ns", &start.to_string(), "--duration-ms", "1500"]);
        gos.push(Proc::spawn(cmd));
    }
    let mut ours = Vec::new();
    for _ in 0..2 {
        let name = name.clone();
        ours.push(tokio::spawn(async move {
            let c = connect().await;
            let lock = c.lock(&name, LockOptions::default()).unwrap();
            tokio::time::sleep(Duration::from_nanos(start.saturating_sub(wall_ns()) as u64)).await;
            let mut held = Vec::new();
            while wall_ns() < end {
                let lease = lock.acquire(WAIT).await.unwrap();
                let acquired = wall_ns();
                tokio::time::sleep(Duration::from_millis(2)).await;
                held.push((acquired, wall_ns(), "lockgate"));
                assert!(lease.release().await.unwrap(), "held until released");
            }
            c.close().await;
            held
        }));
    }
    let mut holdings = Vec::new();
    for t in ours {
        holdings.extend(t.await.unwrap());
    }
    let lockgate = holdings.len();
    for mut go in gos {
        assert!(go.wait().success(), "etcd-go worker");
        while let Some((_, line)) = go.line(Duration::from_millis(100)) {
            let v: Vec<u128> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            holdings.push((v[3], v[4], "go"));
        }
    }
    let go = holdings.len() - lockgate;
    assert!(lockgate > 0 && go > 0, "both sides held: lockgate {lockgate}, Go {go}");
    holdings.sort();
    for w in holdings.windows(2) {
        assert!(w[1].0 >= w[0].1, "two holders at once: {:?} then {:?}", w[0], w[1]);
    }
    eprintln!("mixed contention: {lockgate} lockgate and {go} Go holdings, none overlapping");
    assert!(keys(&mut raw, &name).await.is_empty());
}

/// Issue 23, item 2: a slash-less `etcdctl lock NAME` (etcd's documentation's `mutex1`, Go's
/// `"my-lock"`) is shared through lockgate's name `etcd:NAME`, the prefix exactly (a plain
/// `NAME` lives under `/lockgate/mutex/`). An etcdctl holder excludes lockgate until it lets go
/// (then lockgate is granted with a larger token), and etcdctl's command runs only after
/// lockgate's release, with a larger revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slashless_etcdctl_lock_is_shared_through_the_etcd_name_form() {
    let prefix = unique("slashless").trim_start_matches('/').to_string();
    let name = format!("etcd:{prefix}");
    let mut raw = raw().await;
    let c = connect().await;
    let lock = c.lock(&name, LockOptions::default()).unwrap();

    let mut holder = Proc::etcdctl(&["lock", &prefix]);
    let (_, key) = holder.expect_line("etcdctl lock");
    assert!(key.starts_with(&format!("{prefix}/")), "etcdctl's key {key:?} is under {prefix}/");
    let theirs = keys(&mut raw, &prefix).await;
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert!(lock.try_acquire().await.unwrap().is_none(), "etcdctl holds");
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move {
            let l = lock.acquire(WAIT).await;
            (Instant::now(), l)
        }
    });
    // lockgate queues under etcdctl's own prefix, nowhere else.
    let both = until_keys(&mut raw, &prefix, 2).await;
    assert!(both.iter().all(|(k, _)| k.starts_with(&format!("{prefix}/"))), "{both:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "lockgate waits while etcdctl holds");
    let released = Instant::now();
    holder.signal("TERM");
    assert!(holder.wait().success(), "etcdctl unlocks on SIGTERM");
    let (granted, lease) = waiting.await.unwrap();
    let lease = lease.unwrap();
    assert!(granted >= released, "granted before etcdctl let go");
    assert!(token(&lease) > theirs[0].1 as u64, "{} > etcdctl's {}", token(&lease), theirs[0].1);

    // lockgate holds: etcdctl's command waits for its release.
    let mut waiter = Proc::etcdctl(&["lock", &prefix, "--", "sh", "-c", "echo got $ETCD_LOCK_REV"]);
    until_keys(&mut raw, &prefix, 2).await;
    assert!(waiter.line(Duration::from_millis(400)).is_none(), "etcdctl ran its command while lockgate held");
    let released = Instant::now();
    assert!(lease.release().await.unwrap());
    let (ran, line) = waiter.expect_line("etcdctl lock's command");
    assert!(ran >= released);
    let rev: u64 = line.strip_prefix("got ").and_then(|r| r.trim().parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
    assert!(rev > token(&lease), "etcdctl's revision {rev} > lockgate's token {}", token(&lease));
    assert!(waiter.wait().success());
    assert!(keys(&mut raw, &prefix).await.is_empty());
    // The plain name is another lock: under /lockgate/mutex/, not etcdctl's prefix.
    let plain = c.lock(&prefix, LockOptions::default()).unwrap().try_acquire().await.unwrap().expect("free");
    assert!(keys(&mut raw, &prefix).await.is_empty(), "a plain name wrote under etcdctl's prefix");
    assert_eq!(keys(&mut raw, &format!("/lockgate/mutex/{prefix}")).await.len(), 1);
    assert!(plain.release().await.unwrap());
    c.close().await;
}
