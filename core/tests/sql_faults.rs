//! The SQL backend under faults, on one real server per dialect (Debian's PostgreSQL 15 and
//! MariaDB 10.11 from the project's launcher, `test-servers postgres|mariadb`,
//! conformance/README.md "SQL kinds"; the tests of one dialect share its server, one at a time,
//! the two dialects run side by side):
//!
//! - a holder in a process of its own is killed (SIGKILL): nothing releases its row, so the
//!   next waiter is granted when the row expires by the server's clock — within the lease, never
//!   before the holder's own validity ran out — with a larger token, the dead row reaped;
//! - the database is stopped (SIGKILL) and started again on its data while four clients
//!   contend: never two holders at once, tokens keep increasing across the restart (also past
//!   rows deleted before it: the identity / AUTO_INCREMENT is durable), every acquire is granted
//!   or told CONNECTION, nothing hangs or panics;
//! - a holder process frozen (SIGSTOP) past its lease: its own validity ends before the next
//!   grant, and once thawed it knows it lost;
//! - 1,000 waiters with random timeouts and cancellations over four clients leave no row of
//!   theirs once the holder released, and none after close; the patient third is granted
//!   within 20 s and every hand-over after the release is a wake-up (under 500 ms; MariaDB 1.5 s,
//!   the reason at the assertion);
//! - hand-overs are wake-ups, not re-checks: 8 waiters on one client (more than MySQL's 4 wait
//!   connections) and, on PostgreSQL, a predecessor that leaves while the waiter's acquire is
//!   between reading the rows and its reply (a DBA's deferred trigger holds that COMMIT);
//! - a lock or statement timeout a DBA set on the server (PostgreSQL `ALTER ROLE ... SET
//!   lock_timeout / statement_timeout`, MariaDB `SET GLOBAL innodb_lock_wait_timeout /
//!   max_statement_time`) hit while a DBA's transaction holds the table (or the name's anchor
//!   row) ends the acquire at once with TIMEOUT saying it was the server's, leaves no row, and
//!   the client works again once the DBA lets go.
#![cfg(feature = "tokio")]
// Each test holds its server's guard across its awaits on purpose: it keeps the tests of one
// dialect one at a time, and every test has a runtime of its own.
#![allow(clippy::await_holding_lock)]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockgate_core::native::{Client, ClientOptions, Lease, Lock};
use lockgate_core::LockOptions;
use sqlx::{Connection, Executor, Row};
use test_servers::TestServers;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Db {
    Postgres,
    MariaDb,
}

/// The one server of `db` in this file; holding the guard keeps that dialect's tests one at a
/// time (they stop the server and change its settings). The launcher stops it when this
/// process ends.
fn server(db: Db) -> MutexGuard<'static, TestServers> {
    static PG: OnceLock<Mutex<TestServers>> = OnceLock::new();
    static MY: OnceLock<Mutex<TestServers>> = OnceLock::new();
    let s = match db {
        Db::Postgres => PG.get_or_init(|| Mutex::new(TestServers::start(&["postgres"]))),
        Db::MariaDb => MY.get_or_init(|| Mutex::new(TestServers::start(&["mariadb"]))),
    };
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn admin_url(s: &TestServers) -> String {
    s.info["admin_url"].as_str().expect("admin_url").to_string()
}

fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// A lock name no other test or run uses.
fn unique(tag: &str) -> String {
    format!("faults-{tag}-{}-{}", std::process::id(), wall_ns())
}

async fn client(url: &str, response: Duration) -> Client {
    let mut o = ClientOptions::new(url);
    o.response_timeout = response;
    o.connect().await.unwrap_or_else(|e| panic!("connect: {e}"))
}

fn lease_of(ms: u64) -> LockOptions {
    LockOptions { lease: Duration::from_millis(ms), ..LockOptions::default() }
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("SQL grants carry a fencing token (the row's id)")
}

/// The administrator's connection: reads the entry table directly, changes server settings.
enum Admin {
    Pg(tokio_postgres::Client),
    My(sqlx::MySqlConnection),
}

impl Admin {
    async fn connect(s: &TestServers) -> Admin {
        let url = admin_url(s);
        if url.starts_with("postgres") {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("admin");
            tokio::spawn(conn);
            Admin::Pg(client)
        } else {
            Admin::My(sqlx::MySqlConnection::connect(url.replacen("mariadb://", "mysql://", 1).as_str()).await.expect("admin"))
        }
    }

    async fn exec(&mut self, sql: &str) {
        match self {
            Admin::Pg(c) => c.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}")),
            Admin::My(c) => {
                c.execute(sqlx::AssertSqlSafe(sql.to_string())).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
    }

    /// The rows of lock `name` (any kind) but MySQL's per-name anchor row (owner ''), which
    /// is the name's serialization point and stays: (id, owner), by id.
    async fn rows(&mut self, name: &str) -> Vec<(i64, String)> {
        let pattern = format!("%/{name}");
        match self {
            Admin::Pg(c) => c
                .query("SELECT id, owner FROM lockgate_entry WHERE lock_key LIKE $1 ORDER BY id", &[&pattern])
                .await
                .expect("read the entry table")
                .iter()
                .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
                .collect(),
            Admin::My(c) => sqlx::query("SELECT id, owner FROM lockgate.lockgate_entry WHERE lock_key LIKE ? AND owner <> '' ORDER BY id")
                .bind(pattern)
                .fetch_all(&mut *c)
                .await
                .expect("read the entry table")
                .iter()
                .map(|r| (r.get::<i64, _>(0), r.get::<String, _>(1)))
                .collect(),
        }
    }

    /// Waits up to `limit` until lock `name` has `n` rows; panics with what is there.
    async fn expect_rows(&mut self, name: &str, n: usize, limit: Duration) -> Vec<(i64, String)> {
        let deadline = Instant::now() + limit;
        loop {
            let rows = self.rows(name).await;
            if rows.len() == n {
                return rows;
            }
            assert!(Instant::now() < deadline, "{name}: {} row(s) after {limit:?}, expected {n}: {rows:?}", rows.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One holding as its holder saw it: token, when its acquire began, its grant, and the last
/// instant it still knew it held.
#[derive(Clone, Debug)]
struct Holding {
    token: u64,
    asked: Instant,
    granted: Instant,
    until: Instant,
}

/// The critical section every holder enters: who is inside (a token, 0 = nobody), and how
/// often a holder that still held saw someone else inside.
#[derive(Default)]
struct Section {
    inside: AtomicU64,
    overlaps: AtomicUsize,
}

impl Section {
    /// Holds `lease` for `hold` inside the section, checking every few ms that nobody else
    /// entered while it still holds; releases; returns the last instant it knew it held.
    async fn hold(&self, lease: Lease, hold: Duration) -> Instant {
        let token = token(&lease);
        self.inside.store(token, Ordering::SeqCst);
        let end = Instant::now() + hold;
        let mut known = Instant::now();
        while Instant::now() < end {
            // Who is inside first, then whether we still hold: another token inside while we
            // still hold afterwards is two holders at once.
            let now_inside = self.inside.load(Ordering::SeqCst);
            if !lease.is_held() {
                break;
            }
            known = Instant::now();
            if now_inside != token {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let _ = self.inside.compare_exchange(token, 0, Ordering::SeqCst, Ordering::SeqCst);
        let _ = lease.release().await;
        known
    }
}

/// Never two holdings at once, and tokens strictly increase in grant order.
fn check_exclusive(mut holdings: Vec<Holding>) {
    holdings.sort_by_key(|h| h.granted);
    for w in holdings.windows(2) {
        assert!(w[1].granted >= w[0].until, "two holders at once: {:?} and {:?}", w[0], w[1]);
        assert!(w[1].token > w[0].token, "the token did not increase: {:?} then {:?}", w[0], w[1]);
    }
}

// ---------------------------------------------------------------------------------------------
// The holder process: a holder the test can kill or freeze.

/// The lease of the holder process (renewed at a third of it while it runs).
const HOLDER_LEASE_MS: u64 = 2000;

/// The holder process of the kill and freeze tests: this test binary run again with
/// `LG_SQL_HOLDER=<url> <name>`. It acquires mutex `name` with a 2 s renewed lease and prints,
/// every 5 ms while it holds, `HOLDER held <token> <now ns> <valid until ns>` (wall clock);
/// then `HOLDER lost <now ns>` and `HOLDER released <was held>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper process: the kill and freeze tests run it"]
async fn holder_process() {
    let spec = std::env::var("LG_SQL_HOLDER").expect("run by the kill and freeze tests");
    let (url, name) = spec.split_once(' ').unwrap();
    let c = client(url, Duration::from_millis(800)).await;
    let lease = c.lock(name, lease_of(HOLDER_LEASE_MS)).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let token = token(&lease);
    loop {
        let now = wall_ns();
        let left = lease.remaining();
        if !lease.is_held() {
            break;
        }
        let left = left.expect("a held lease has a validity").as_nanos();
        println!("HOLDER held {token} {now} {}", now + left);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("HOLDER lost {}", wall_ns());
    let _ = tokio::time::timeout(Duration::from_secs(3), lease.lost()).await.expect("the loss is signalled");
    println!("HOLDER released {}", lease.release().await.unwrap_or(true));
    c.close().await;
}

/// A running holder process and what it says.
struct HolderProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// The `held` line `start` read for the token, handed out again by the first `said`: under
    /// load the holder may be killed before it says another.
    first: std::cell::Cell<Option<String>>,
}

impl HolderProcess {
    /// Starts the holder process on `url`'s mutex `name` and waits until it holds: its token.
    fn start(url: &str, name: &str) -> (HolderProcess, u64) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "holder_process", "--ignored", "--nocapture", "--test-threads", "1"])
            .env("LG_SQL_HOLDER", format!("{url} {name}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel::<String>();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("HOLDER ") {
                    let _ = tx.send(rest.to_string());
                }
            }
        });
        let first = tokio::task::block_in_place(|| lines.recv_timeout(Duration::from_secs(15))).expect("the holder process holds");
        let token = first.split(' ').nth(1).unwrap().parse().unwrap();
        (HolderProcess { child, lines, first: std::cell::Cell::new(Some(first)) }, token)
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").arg(sig).arg(&pid).status().unwrap().success(), "kill {sig} {pid}");
    }

    /// Every line said so far (and, with `until_done`, until it says `released`).
    fn said(&self, until_done: bool) -> Vec<String> {
        let mut said: Vec<String> = self.first.take().into_iter().collect();
        loop {
            let next = if until_done {
                tokio::task::block_in_place(|| self.lines.recv_timeout(Duration::from_secs(5))).ok()
            } else {
                self.lines.try_recv().ok()
            };
            let Some(line) = next else { break };
            let done = line.starts_with("released");
            said.push(line);
            if done && until_done {
                break;
            }
        }
        said
    }
}

/// The latest validity end (wall ns) the holder reported, checking that each `held` line was
/// said, and valid until, before `grant_ns`.
fn last_validity(said: &[String], grant_ns: u128) -> u128 {
    let mut last = 0u128;
    for line in said {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "held" {
            let (now, until): (u128, u128) = (f[2].parse().unwrap(), f[3].parse().unwrap());
            assert!(now < grant_ns, "the holder still held {} ms after the next grant", (now - grant_ns) / 1_000_000);
            assert!(until < grant_ns, "the holder's validity ran until {} ms after the next grant", (until - grant_ns) / 1_000_000);
            last = last.max(until);
        }
    }
    last
}

async fn a_killed_holder_is_succeeded_when_its_row_expires(db: Db) {
    let servers = server(db);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = unique("killed-holder");
    let (holder, holder_token) = HolderProcess::start(&url, &name);
    let waiter = client(&url, Duration::from_millis(800)).await;
    let lock = waiter.lock(&name, lease_of(5000)).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire(Duration::from_secs(10)).await.map(|l| (wall_ns(), l)) });
    // Queued: the waiter's row is in the table behind the holder's.
    let queued = admin.expect_rows(&name, 2, Duration::from_secs(5)).await;
    assert_eq!(queued[0].0 as u64, holder_token, "the holder's row comes first: {queued:?}");
    holder.signal("-KILL");
    let killed_ns = wall_ns();
    let killed = Instant::now();
    let (grant_ns, lease) = tokio::time::timeout(Duration::from_secs(8), waiting)
        .await
        .expect("the waiter is granted once the killed holder's row expires")
        .unwrap()
        .unwrap();
    let waited = killed.elapsed();
    // Everything it said before it died (its pipe is read to the end).
    let said = holder.said(true);
    let mut child = holder.child;
    assert!(!child.wait().unwrap().success(), "the holder process was killed");
    // Nothing released the row: the grant waited for its expiry on the server's clock, which
    // the holder had renewed at most a lease before the kill.
    let last_valid = last_validity(&said, grant_ns);
    assert!(last_valid > 0, "the holder said it held: {said:?}");
    let lease_ns = u128::from(HOLDER_LEASE_MS) * 1_000_000;
    assert!(grant_ns - killed_ns < lease_ns + 1_000_000_000, "granted {waited:?} after the kill: not within the {HOLDER_LEASE_MS} ms lease");
    assert!(waited >= Duration::from_millis(HOLDER_LEASE_MS / 3), "granted {waited:?} after the kill: a renewed row lives at least 2/3 of its lease");
    assert!(token(&lease) > holder_token, "{} > {holder_token}", token(&lease));
    // The dead holder's row is gone (reaped by the waiter's re-check); the waiter's is left.
    let rows = admin.rows(&name).await;
    assert_eq!(rows.iter().map(|r| r.0 as u64).collect::<Vec<_>>(), vec![token(&lease)], "only the new holder's row");
    eprintln!(
        "{db:?} killed holder: granted {waited:?} after the kill, {} ms after the holder's last known validity end",
        (grant_ns - last_valid) / 1_000_000
    );
    assert!(lease.release().await.unwrap());
    waiter.close().await;
    admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
}

async fn a_frozen_holder_knows_it_lost_before_the_next_grant(db: Db) {
    let servers = server(db);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = unique("frozen-holder");
    let (holder, holder_token) = HolderProcess::start(&url, &name);
    let waiter = client(&url, Duration::from_millis(800)).await;
    let lock = waiter.lock(&name, lease_of(5000)).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire(Duration::from_secs(10)).await.map(|l| (wall_ns(), l)) });
    admin.expect_rows(&name, 2, Duration::from_secs(5)).await;
    holder.signal("-STOP");
    let frozen = Instant::now();
    let granted = tokio::time::timeout(Duration::from_secs(8), waiting).await;
    let waited = frozen.elapsed();
    holder.signal("-CONT");
    let (grant_ns, lease) = granted.expect("the waiter is granted once the frozen holder's row expires").unwrap().unwrap();
    assert!(waited >= Duration::from_millis(HOLDER_LEASE_MS / 3), "granted {waited:?} after the freeze: by a release?");
    assert!(token(&lease) > holder_token, "the next token is larger");
    // Everything the holder said: while it knew it held, both now and its validity end came
    // before the next grant; once thawed its first word is the loss.
    let said = holder.said(true);
    let mut child = holder.child;
    assert!(child.wait().unwrap().success(), "the holder process: {said:?}");
    let last_valid = last_validity(&said, grant_ns);
    let lost_at: u128 = said.iter().find_map(|l| l.strip_prefix("lost ")).expect("the holder says it lost").parse().unwrap();
    let first_lost = said.iter().position(|l| l.starts_with("lost")).unwrap();
    assert!(said[first_lost..].iter().all(|l| !l.starts_with("held")), "held again after the loss: {said:?}");
    assert!(said.iter().any(|l| l == "released false"), "its release reports it was not held: {said:?}");
    assert!(last_valid < grant_ns);
    eprintln!(
        "{db:?} frozen holder: its validity ended {} ms before the next grant ({waited:?} after the freeze); it said 'lost' {} ms after the grant, once thawed",
        (grant_ns - last_valid) / 1_000_000,
        lost_at.saturating_sub(grant_ns) / 1_000_000
    );
    assert!(lease.release().await.unwrap());
    waiter.close().await;
    admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
}

async fn a_database_restart_under_contention_keeps_tokens_growing(db: Db) {
    let mut servers = server(db);
    let url = servers.url();
    let name = unique("restart");
    let section = Arc::new(Section::default());
    let holdings = Arc::new(Mutex::new(Vec::new()));
    let told = Arc::new(AtomicUsize::new(0));
    let stop_at = Instant::now() + Duration::from_secs(4);
    let mut workers = Vec::new();
    for who in 0..4 {
        let (url, name, section, holdings, told) = (url.clone(), name.clone(), section.clone(), holdings.clone(), told.clone());
        workers.push(tokio::spawn(async move {
            let c = client(&url, Duration::from_millis(800)).await;
            let lock = c.lock(&name, lease_of(3000)).unwrap();
            while Instant::now() < stop_at {
                let asked = Instant::now();
                match lock.acquire(Duration::from_secs(8)).await {
                    Ok(lease) => {
                        let token = token(&lease);
                        let granted = Instant::now();
                        let until = section.hold(lease, Duration::from_millis(10)).await;
                        holdings.lock().unwrap().push(Holding { token, asked, granted, until });
                    }
                    Err(e) => {
                        assert_eq!(e.code(), "CONNECTION", "worker {who}: a restart is a retryable CONNECTION error, got {e}");
                        assert!(e.retryable());
                        told.fetch_add(1, Ordering::Relaxed);
                        // The caller's retry, as an application would: not at once.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            c.close().await;
        }));
    }
    // Contention first, then the crash.
    let deadline = Instant::now() + Duration::from_secs(10);
    while holdings.lock().unwrap().len() < 8 {
        assert!(Instant::now() < deadline, "the workers never contended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    servers.command("stop 0");
    let stopped = Instant::now();
    let before = holdings.lock().unwrap().iter().map(|h| h.token).max().unwrap();
    // The database stays down a second: acquires, renewals and releases fail meanwhile.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    servers.command("start 0");
    let started = Instant::now();
    for w in workers {
        tokio::time::timeout(Duration::from_secs(30), w).await.expect("every worker ends (granted or told), none hangs").unwrap();
    }
    let holdings = holdings.lock().unwrap().clone();
    let after: Vec<&Holding> = holdings.iter().filter(|h| h.granted > started).collect();
    eprintln!(
        "{db:?} restart: {} holdings, {} after the restart (first {:?} after the start), {} acquires told CONNECTION",
        holdings.len(),
        after.len(),
        after.iter().map(|h| h.granted - started).min(),
        told.load(Ordering::Relaxed)
    );
    assert!(!after.is_empty(), "nobody held after the restart");
    assert!(after.iter().all(|h| h.token > before), "a token after the restart not above {before}: {after:?}");
    // A grant the database committed just before it was killed can reach its caller after
    // `stopped` was taken; an acquire begun after the stop cannot be granted before the start.
    let while_down: Vec<&Holding> = holdings.iter().filter(|h| h.asked > stopped && h.granted < started).collect();
    assert!(while_down.is_empty(), "granted while the database was down: {while_down:?}");
    assert_eq!(section.overlaps.load(Ordering::SeqCst), 0, "a holder saw another inside the critical section while it still held");
    check_exclusive(holdings);
    let mut admin = Admin::connect(&servers).await;
    admin.expect_rows(&name, 0, Duration::from_secs(5)).await;

    // The identity survives the deletion of the newest rows and a crash: the next token of a
    // name whose rows are all gone is still larger.
    let name = unique("restart-deleted");
    let c = client(&url, Duration::from_millis(800)).await;
    let first = c.lock(&name, lease_of(3000)).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let t1 = token(&first);
    assert!(first.release().await.unwrap());
    c.close().await;
    admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
    drop(admin);
    servers.command("restart 0");
    let c = client(&url, Duration::from_millis(800)).await;
    let second = c.lock(&name, lease_of(3000)).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    assert!(token(&second) > t1, "the token after a restart over deleted rows: {} > {t1}", token(&second));
    assert!(second.release().await.unwrap());
    c.close().await;
}

/// How long the thousand-waiters test's patient waiters wait.
const LONG: Duration = Duration::from_secs(20);
/// A hand-over this slow was not a wake-up by the predecessor's release.
const SLOW_HANDOFF: Duration = Duration::from_millis(500);

async fn a_thousand_waiters_with_random_cancels_leave_no_rows(db: Db) {
    let servers = server(db);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = unique("thousand");
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..4 {
        clients.push(client(&url, Duration::from_secs(5)).await);
    }
    let options = LockOptions { entry_ttl: Duration::from_secs(6), ..lease_of(10_000) };
    let holder = clients[0].lock(&name, options.clone()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let section = Arc::new(Section::default());
    let holdings = Arc::new(Mutex::new(Vec::new()));
    let (granted, timed_out, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let starved = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..1000usize {
        let lock: Lock = clients[i % clients.len()].lock(&name, options.clone()).unwrap();
        let r = next();
        let (section, holdings, granted, timed_out, cancelled) = (section.clone(), holdings.clone(), granted.clone(), timed_out.clone(), cancelled.clone());
        let starved = starved.clone();
        tasks.push(tokio::spawn(async move {
            // A third give up by their own timeout, a third are cancelled (the future dropped)
            // at a random moment, a third wait until granted (LONG is far more than a third of
            // a thousand hand-overs take when each is woken by its predecessor's release).
            let wait = Duration::from_millis(50 + r % 1500);
            let asked = Instant::now();
            let fut = lock.acquire(if r % 3 == 0 { wait } else { LONG });
            let res = if r % 3 == 1 {
                match tokio::time::timeout(wait, fut).await {
                    Ok(res) => res,
                    Err(_) => {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            } else {
                fut.await
            };
            match res {
                Ok(lease) => {
                    let token = token(&lease);
                    let at = Instant::now();
                    let until = section.hold(lease, Duration::ZERO).await;
                    holdings.lock().unwrap().push(Holding { token, asked, granted: at, until });
                    granted.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    assert_eq!(e.code(), "TIMEOUT", "waiter {i}: {e}");
                    timed_out.fetch_add(1, Ordering::Relaxed);
                    if r % 3 == 2 {
                        starved.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // Everyone queues behind the holder; the cancels and timeouts happen meanwhile.
    let queued_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let during = admin.rows(&name).await.len();
    // The release comes once every waiter still waiting has its row and every one that gave up
    // has none: 1,000 acquire transactions of one name take turns on its serialization lock
    // (seconds in all), each client's batches one after another on its one statement
    // connection, and a release or a wake-up's re-check sent while that queue drains waits its
    // turn behind it (measured: the release itself took 0.9 to 2 s, and the second grant came
    // 0.6 to 1.1 s after the first) — a wait for the connection, not a missed wake-up. The
    // hand-overs measured below are the queue's, not the inserts'.
    let settle = Instant::now() + Duration::from_secs(15);
    loop {
        let waiting = tasks.iter().filter(|t| !t.is_finished()).count();
        let rows = admin.rows(&name).await.len();
        if rows == waiting + 1 {
            break;
        }
        assert!(Instant::now() < settle, "{rows} rows for {waiting} waiters and the holder after 15 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let released = Instant::now();
    holder.release().await.unwrap();
    // The release's own round trip: it queues behind the holder's client's other batches.
    let release_took = released.elapsed();
    for t in tasks {
        tokio::time::timeout(LONG + Duration::from_secs(10), t).await.expect("every waiter ends").unwrap();
    }
    let (g, t, c) = (granted.load(Ordering::Relaxed), timed_out.load(Ordering::Relaxed), cancelled.load(Ordering::Relaxed));
    eprintln!(
        "{db:?} 1000 waiters: {during} rows while queued, {g} granted, {t} timed out, {c} cancelled; all ended {:?} after the release ({:?} in all)",
        released.elapsed(),
        queued_at.elapsed()
    );
    let mut grants: Vec<Instant> = holdings.lock().unwrap().iter().map(|h| h.granted).collect();
    grants.sort();
    let mut gaps: Vec<Duration> = grants.windows(2).map(|w| w[1] - w[0]).collect();
    // When the slow ones ended, after the release, and which grant they were (for a failure's
    // diagnosis).
    let slow_at: Vec<(usize, Duration, Duration)> = grants
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] - w[0] >= SLOW_HANDOFF)
        .map(|(i, w)| (i + 1, w[1].saturating_duration_since(released), w[1] - w[0]))
        .collect();
    eprintln!(
        "{db:?} 1000 waiters: the release took {release_took:?}, the first grant came {:?} after it",
        grants.first().map(|g| g.saturating_duration_since(released))
    );
    if !slow_at.is_empty() {
        eprintln!("{db:?} 1000 waiters: slow hand-overs (grant number, ended after the release, took): {slow_at:?}");
    }
    gaps.sort();
    // MariaDB's bound is 1.5 s, and why (measured with the PostgreSQL run beside it, as the
    // suite runs them): the hand-overs are wake-ups (p50 2.5 to 3 ms, p90 4.4 to 5.3 ms), but
    // in the first seconds after the release a few take 0.66 to 0.99 s, and the holder's
    // release itself takes 1.2 s there — with at most 4 of the client's routine re-checks
    // queued ahead of it on its connection, so the time is spent in the server: 334 waiters'
    // rows are each refreshed every 2 s (a third of the 6 s entry lease) by a re-check whose
    // reap DELETE and expiry UPDATE scan the name's rows under REPEATABLE READ, and our guess
    // (not proven) is that the release's and the woken waiter's statements wait on those row
    // locks. PostgreSQL keeps 500 ms (its longest: 8 to 80 ms). A missed wake-up still shows:
    // it waits for the 2 s re-check, and the p90 bound below catches any systematic miss.
    let slow_handoff = if db == Db::MariaDb { Duration::from_millis(1500) } else { SLOW_HANDOFF };
    let slow = gaps.iter().filter(|g| **g >= slow_handoff).count();
    if !gaps.is_empty() {
        eprintln!(
            "{db:?} 1000 waiters: hand-overs p50 {:?} p90 {:?} max {:?}, {slow} of {} took {slow_handoff:?} or more",
            gaps[gaps.len() / 2],
            gaps[gaps.len() * 9 / 10],
            gaps[gaps.len() - 1],
            gaps.len()
        );
    }
    assert_eq!(g + t + c, 1000);
    assert!(g > 0 && t > 0 && c > 0, "{g} granted, {t} timed out, {c} cancelled");
    assert_eq!(section.overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    check_exclusive(holdings.lock().unwrap().clone());
    // No row is left once everyone ended (a cancelled waiter's delete may still be on its way).
    admin.expect_rows(&name, 0, Duration::from_secs(5)).await;
    for c in clients {
        c.close().await;
    }
    admin.expect_rows(&name, 0, Duration::from_secs(1)).await;
    let starved = starved.load(Ordering::Relaxed);
    assert_eq!(starved, 0, "{starved} waiter(s) that waited {LONG:?} were never granted ({g} were)");
    // Once the holder released, every remaining waiter is woken by its predecessor's release;
    // a hand-over as slow as the waiters' capped re-check (a third of their 6 s entry lease)
    // means a waiter missed its wake-up and was found by its timer.
    assert_eq!(slow, 0, "{slow} hand-over(s) took {slow_handoff:?} or more (longest {:?})", gaps.last());
    // And they are wake-ups throughout, not the odd one: a waiter found by its re-check would
    // take up to 2 s.
    assert!(gaps.is_empty() || gaps[gaps.len() * 9 / 10] < Duration::from_millis(100), "hand-overs p90 {:?}", gaps[gaps.len() * 9 / 10]);
    assert!(during > 1, "the waiters had rows while they waited");
}

/// More waiters on one client than it has wait connections (MySQL: 4 doorbell waits at once)
/// are still handed the lock one after another by their predecessors' releases, each within
/// [`SLOW_HANDOFF`], not by their capped re-checks (a third of their 6 s entry lease).
async fn a_long_queue_on_one_client_is_handed_over_by_releases(db: Db) {
    let servers = server(db);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = unique("long-queue");
    let (a, b) = (client(&url, Duration::from_secs(2)).await, client(&url, Duration::from_secs(2)).await);
    let options = LockOptions { entry_ttl: Duration::from_secs(6), ..lease_of(10_000) };
    let held = a.lock(&name, options.clone()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    const WAITERS: usize = 8;
    let mut waiting = Vec::new();
    for i in 0..WAITERS {
        let lock = b.lock(&name, options.clone()).unwrap();
        waiting.push(tokio::spawn(async move {
            let lease = lock.acquire(Duration::from_secs(30)).await.unwrap_or_else(|e| panic!("waiter {i}: {e}"));
            let at = Instant::now();
            let t = token(&lease);
            assert!(lease.release().await.unwrap());
            (at, t)
        }));
        // Queued in this order: its row is there before the next one asks.
        admin.expect_rows(&name, i + 2, Duration::from_secs(5)).await;
    }
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let mut grants = Vec::new();
    for w in waiting {
        grants.push(tokio::time::timeout(Duration::from_secs(40), w).await.expect("every waiter is granted").unwrap());
    }
    let mut last = (released, token(&held));
    let mut gaps = Vec::new();
    for (at, t) in &grants {
        assert!(*t > last.1, "FIFO: token {t} after {}", last.1);
        gaps.push(*at - last.0);
        last = (*at, *t);
    }
    eprintln!("{db:?} {WAITERS} waiters on one client: hand-overs {gaps:?}");
    assert!(gaps.iter().all(|g| *g < SLOW_HANDOFF), "a hand-over took {SLOW_HANDOFF:?} or more: {gaps:?}");
    a.close().await;
    b.close().await;
    admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
}

/// PostgreSQL: a waiter's predecessor leaves (its waiter cancelled: row deleted, notification
/// sent) after the waiter's acquire read the rows but before the client has the reply: the
/// waiter must still be woken by the holder's release, not by its capped re-check (2 s here).
/// The window is made wide and certain by a DBA's deferred trigger that sleeps a second in
/// the COMMIT of an insert of this name (the waiter's first batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notification_during_an_acquire_postgres() {
    let servers = server(Db::Postgres);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = unique("notify-race");
    let (a, b, c) = (client(&url, Duration::from_secs(3)).await, client(&url, Duration::from_secs(3)).await, client(&url, Duration::from_secs(3)).await);
    let options = LockOptions { entry_ttl: Duration::from_secs(6), ..lease_of(10_000) };
    let held = a.lock(&name, options.clone()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let lb = b.lock(&name, options.clone()).unwrap();
    let predecessor = tokio::spawn(async move { lb.acquire(Duration::from_secs(30)).await });
    admin.expect_rows(&name, 2, Duration::from_secs(5)).await;
    admin
        .exec(&format!(
            "CREATE OR REPLACE FUNCTION lg_test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$; \
             CREATE CONSTRAINT TRIGGER lg_test_slow_commit AFTER INSERT ON lockgate_entry DEFERRABLE INITIALLY DEFERRED \
             FOR EACH ROW WHEN (NEW.lock_key = 'mutex/{name}') EXECUTE FUNCTION lg_test_slow_commit()"
        ))
        .await;
    let lc = c.lock(&name, options.clone()).unwrap();
    let waiter = tokio::spawn(async move { lc.acquire(Duration::from_secs(30)).await.map(|l| (Instant::now(), l)) });
    // The waiter's batch has read the rows (holder, predecessor) and sleeps in its COMMIT.
    let watch = Admin::connect(&servers).await;
    let sleeping = || async {
        let Admin::Pg(pg) = &watch else { unreachable!() };
        pg.query_one("SELECT count(*) FROM pg_stat_activity WHERE usename = 'lockgate' AND wait_event = 'PgSleep'", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while sleeping().await == 0 {
        assert!(Instant::now() < deadline, "the waiter's COMMIT never slept");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The predecessor gives up meanwhile: its row goes, its notification goes out.
    predecessor.abort();
    let cancelled = Instant::now();
    loop {
        let rows = admin.rows(&name).await;
        if rows.len() == 1 {
            break;
        }
        assert!(cancelled.elapsed() < Duration::from_secs(3), "the cancelled predecessor's row stays: {rows:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let still_sleeping = sleeping().await > 0;
    while sleeping().await > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    admin.exec("DROP TRIGGER lg_test_slow_commit ON lockgate_entry; DROP FUNCTION lg_test_slow_commit()").await;
    assert!(still_sleeping, "the predecessor left only after the waiter's batch ended: no race made");
    // The waiter's reply is in (its row committed): the holder releases.
    admin.expect_rows(&name, 2, Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let (at, lease) = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("the waiter is granted").unwrap().unwrap();
    let took = at - released;
    eprintln!("Postgres waiter whose predecessor left during its acquire: granted {took:?} after the release");
    assert!(took < SLOW_HANDOFF, "granted {took:?} after the holder's release: the wake-up was missed");
    assert!(token(&lease) > token(&held));
    assert!(lease.release().await.unwrap());
    for cl in [a, b, c] {
        cl.close().await;
    }
    admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
}

/// A timeout a DBA sets on the server, and how it is undone.
struct DbaTimeout {
    /// The setting, before the client connects.
    set: &'static str,
    /// Undoing it.
    reset: &'static str,
}

async fn a_timeout_set_by_a_dba_is_a_typed_error(db: Db) {
    let servers = server(db);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let cases = match db {
        Db::Postgres => [
            DbaTimeout { set: "ALTER ROLE lockgate SET lock_timeout = '300ms'", reset: "ALTER ROLE lockgate RESET lock_timeout" },
            DbaTimeout { set: "ALTER ROLE lockgate SET statement_timeout = '300ms'", reset: "ALTER ROLE lockgate RESET statement_timeout" },
        ],
        Db::MariaDb => [
            DbaTimeout { set: "SET GLOBAL innodb_lock_wait_timeout = 1", reset: "SET GLOBAL innodb_lock_wait_timeout = DEFAULT" },
            DbaTimeout { set: "SET GLOBAL max_statement_time = 0.3", reset: "SET GLOBAL max_statement_time = DEFAULT" },
        ],
    };
    for case in cases {
        let name = unique("dba-timeout");
        // A role's or global setting applies to sessions opened after it.
        admin.exec(case.set).await;
        let c = client(&url, Duration::from_secs(5)).await;
        let lock = c.lock(&name, lease_of(5000)).unwrap();
        // The client's session is open (its table there) before the DBA takes it.
        let warm = c.lock(&unique("dba-warm"), lease_of(5000)).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
        assert!(warm.release().await.unwrap());
        // The DBA's own transaction holds what the acquire must take: PostgreSQL's table (a
        // migration's lock; reads go on), MariaDB's anchor row of the name.
        let mut dba = Admin::connect(&servers).await;
        match db {
            Db::Postgres => dba.exec("BEGIN; LOCK TABLE lockgate_entry IN EXCLUSIVE MODE").await,
            Db::MariaDb => {
                dba.exec("BEGIN").await;
                dba.exec(&format!(
                    "INSERT INTO lockgate.lockgate_entry (lock_key, owner, kind, permits, value, expires_ms) \
                     VALUES ('mutex/{name}', '', 'anchor', 0, NULL, 0) ON DUPLICATE KEY UPDATE expires_ms = 0"
                ))
                .await;
            }
        }
        let started = Instant::now();
        let res = tokio::time::timeout(Duration::from_secs(15), lock.acquire(Duration::from_secs(10))).await;
        let took = started.elapsed();
        // Undo before judging, so a failure here leaves the server as the other tests need it.
        dba.exec("ROLLBACK").await;
        drop(dba);
        admin.exec(case.reset).await;
        let res = res.unwrap_or_else(|_| panic!("{}: the acquire hung", case.set));
        let err = match res {
            Ok(lease) => panic!("{}: granted {:?} while the DBA held the name", case.set, lease.fencing_token()),
            Err(e) => e,
        };
        eprintln!("{db:?} {}: {} after {took:?}: {err}", case.set, err.code());
        assert_eq!(err.code(), "TIMEOUT", "{}: {err}", case.set);
        assert!(err.to_string().contains("timeout set on the server"), "{}: the message says whose timeout: {err}", case.set);
        // Ended at once by the server's timeout, not by the caller's 10 s wait running out.
        assert!(took < Duration::from_secs(5), "{}: the acquire ended after {took:?}", case.set);
        admin.expect_rows(&name, 0, Duration::from_secs(3)).await;
        // The DBA let go: the same client acquires.
        let lease = lock.acquire(Duration::from_secs(5)).await.unwrap_or_else(|e| panic!("{}: after the DBA let go: {e}", case.set));
        assert!(lease.release().await.unwrap());
        c.close().await;
    }
}

// The two dialects' tests of one fault are named next to each other, so the test harness
// (which starts tests in name order) runs them side by side on their two servers.
macro_rules! both {
    ($test:ident, $my:ident, $pg:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $my() {
            $test(Db::MariaDb).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $pg() {
            $test(Db::Postgres).await;
        }
    };
}

both!(a_killed_holder_is_succeeded_when_its_row_expires, killed_holder_mariadb, killed_holder_postgres);
both!(a_frozen_holder_knows_it_lost_before_the_next_grant, frozen_holder_mariadb, frozen_holder_postgres);
both!(a_database_restart_under_contention_keeps_tokens_growing, restart_under_load_mariadb, restart_under_load_postgres);
both!(a_thousand_waiters_with_random_cancels_leave_no_rows, thousand_waiters_mariadb, thousand_waiters_postgres);
both!(a_timeout_set_by_a_dba_is_a_typed_error, dba_timeout_mariadb, dba_timeout_postgres);
both!(a_long_queue_on_one_client_is_handed_over_by_releases, long_queue_mariadb, long_queue_postgres);
