//! The one client family over real SQL servers (Debian's PostgreSQL 15 and MariaDB 10.11, from
//! the project's test-server launcher) through the native driver and the SQL transport, the
//! same tests on both dialects: a mutex contended by three clients handed over in FIFO order
//! with growing fencing tokens and no statement sent while the waiters wait (counted by the
//! server: `pg_stat_statements` calls, MariaDB's `Questions`); a read-write lock and a
//! semaphore; an election with observe; a holder whose connections the server kills
//! (`pg_terminate_backend` / `KILL`) keeps its lease on a new connection and its release still
//! wakes the waiter at once; TLS and the login as the URL gives them.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::LockOptions;
use sqlx::{Connection, Executor, Row};
use test_servers::TestServers;

const WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Db {
    Postgres,
    MariaDb,
}

/// A launcher server of `db`'s own (for a test that counts statements or kills sessions);
/// PostgreSQL's with `pg_stat_statements`, which counts every statement the clients send.
fn own_server(db: Db) -> TestServers {
    match db {
        Db::Postgres => TestServers::start(&["postgres", "--", "shared_preload_libraries=pg_stat_statements"]),
        Db::MariaDb => TestServers::start(&["mariadb"]),
    }
}

fn urls(s: &TestServers) -> (String, String) {
    (s.url(), s.info["admin_url"].as_str().expect("admin_url").to_string())
}

/// One launcher server per dialect, shared by the tests that neither count nor kill (each on
/// names of its own).
fn server(db: Db) -> (String, String) {
    static PG: OnceLock<Mutex<TestServers>> = OnceLock::new();
    static MY: OnceLock<Mutex<TestServers>> = OnceLock::new();
    let s = match db {
        Db::Postgres => PG.get_or_init(|| Mutex::new(own_server(db))),
        Db::MariaDb => MY.get_or_init(|| Mutex::new(own_server(db))),
    };
    urls(&s.lock().unwrap())
}

/// A lock name no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("lg-{tag}-{}-{t}", std::process::id())
}

async fn connect(url: &str) -> Client {
    let mut options = ClientOptions::new(url);
    options.response_timeout = Duration::from_secs(2);
    options.connect().await.unwrap_or_else(|e| panic!("{e}"))
}

fn options(lease_secs: u64) -> LockOptions {
    LockOptions { lease: Duration::from_secs(lease_secs), ..LockOptions::default() }
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("SQL grants carry a fencing token (the row's id)")
}

/// The administrator's view of the server: statement counts, killing the test user's sessions.
enum Admin {
    Pg(tokio_postgres::Client),
    My(sqlx::MySqlConnection),
}

impl Admin {
    async fn connect(db: Db, admin_url: &str) -> Admin {
        match db {
            Db::Postgres => {
                let (client, conn) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls).await.expect("admin");
                tokio::spawn(conn);
                client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await.expect("pg_stat_statements");
                Admin::Pg(client)
            }
            Db::MariaDb => Admin::My(sqlx::MySqlConnection::connect(admin_url.replacen("mariadb://", "mysql://", 1).as_str()).await.expect("admin")),
        }
    }

    /// How many statements the server has run so far (its own counters; this query included).
    async fn statements(&mut self) -> i64 {
        match self {
            Admin::Pg(c) => c.query_one("SELECT COALESCE(sum(calls), 0)::bigint FROM pg_stat_statements", &[]).await.unwrap().get(0),
            Admin::My(c) => {
                let row = c.fetch_one("SHOW GLOBAL STATUS LIKE 'Questions'").await.unwrap();
                row.get::<String, _>(1).parse().unwrap()
            }
        }
    }

    /// Ends every session of the launcher's test user (`lockgate`): the clients' connections.
    async fn kill_clients(&mut self) -> usize {
        match self {
            Admin::Pg(c) => {
                let rows = c
                    .query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'lockgate' AND pid <> pg_backend_pid()", &[])
                    .await
                    .unwrap();
                rows.len()
            }
            Admin::My(c) => {
                let ids: Vec<i64> = sqlx::query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'lockgate'")
                    .fetch_all(&mut *c)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<i64, _>(0))
                    .collect();
                for id in &ids {
                    let _ = c.execute(sqlx::AssertSqlSafe(format!("KILL {id}"))).await;
                }
                ids.len()
            }
        }
    }
}

async fn a_mutex_is_handed_over_in_order_without_polling(db: Db) {
    let own = own_server(db);
    let (url, admin_url) = urls(&own);
    let mut admin = Admin::connect(db, &admin_url).await;
    let name = unique("fifo");
    let (a, b, c) = (connect(&url).await, connect(&url).await, connect(&url).await);
    let held = a.lock(&name, options(30)).unwrap().acquire(WAIT).await.unwrap();
    let first = token(&held);
    let lb = b.lock(&name, options(30)).unwrap();
    let wb = tokio::spawn(async move { lb.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lc = c.lock(&name, options(30)).unwrap();
    let wc = tokio::spawn(async move { lc.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Two waiters, 2 s: their re-checks are a third of their 30 s entry lease away, and the
    // holder renews at a third of its 30 s lease: nobody has anything to send.
    let before = admin.statements().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = admin.statements().await - before;
    assert!(sent <= 2, "{sent} statements while two waiters waited (the counting query is one)");
    assert!(!wb.is_finished() && !wc.is_finished());
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let second = wb.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(1), "woken by the release: {:?}", released.elapsed());
    assert!(token(&second) > first, "{} > {first}", token(&second));
    assert!(!wc.is_finished(), "c queued behind b");
    let released = Instant::now();
    assert!(second.release().await.unwrap());
    let third = wc.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(1), "woken by the release: {:?}", released.elapsed());
    assert!(token(&third) > token(&second));
    assert!(third.release().await.unwrap());
    for client in [a, b, c] {
        client.close().await;
    }
}

async fn read_write_lock_and_semaphore(db: Db) {
    let (url, _) = server(db);
    let (a, b) = (connect(&url).await, connect(&url).await);
    let name = unique("rw");
    let (rwa, rwb) = (a.read_write_lock(&name, options(30)).unwrap(), b.read_write_lock(&name, options(30)).unwrap());
    let r1 = rwa.read().acquire(WAIT).await.unwrap();
    let r2 = rwb.read().acquire(WAIT).await.unwrap();
    assert!(rwb.write().try_acquire().await.unwrap().is_none(), "readers hold");
    let w = rwb.write().clone();
    let writer = tokio::spawn(async move { w.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished());
    let later = a.read_write_lock(&name, options(30)).unwrap();
    assert!(later.read().try_acquire().await.unwrap().is_none(), "a queued writer blocks later readers");
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let wl = writer.await.unwrap().unwrap();
    assert!(token(&wl) > token(&r2));
    wl.release().await.unwrap();

    let name = unique("sem");
    let (sa, sb) = (a.semaphore(&name, 2, options(30)).unwrap(), b.semaphore(&name, 2, options(30)).unwrap());
    let p1 = sa.acquire(WAIT).await.unwrap();
    let p2 = sb.acquire(WAIT).await.unwrap();
    let sc = a.semaphore(&name, 2, options(30)).unwrap();
    assert!(sc.try_acquire().await.unwrap().is_none(), "two permits taken");
    let third = tokio::spawn(async move { sc.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished());
    let released = Instant::now();
    p1.release().await.unwrap();
    let p3 = third.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(1), "{:?}", released.elapsed());
    p2.release().await.unwrap();
    p3.release().await.unwrap();
    a.close().await;
    b.close().await;
}

async fn election_with_observe(db: Db) {
    let (url, _) = server(db);
    let (a, b) = (connect(&url).await, connect(&url).await);
    let name = unique("elect");
    let (ea, eb) = (a.election(&name, options(30)).unwrap(), b.election(&name, options(30)).unwrap());
    assert!(eb.observe().await.unwrap().is_none(), "no leader yet");
    let leader = ea.campaign("node-a", Some(WAIT)).await.unwrap();
    let seen = eb.observe().await.unwrap().expect("a leader");
    assert_eq!((seen.value.as_str(), seen.term), ("node-a", token(&leader)));
    assert!(eb.try_campaign("node-b").await.unwrap().is_none());
    let e = eb.clone();
    let next = tokio::spawn(async move { e.campaign("node-b", Some(WAIT)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    leader.release().await.unwrap();
    let second = next.await.unwrap().unwrap();
    let seen = ea.observe().await.unwrap().expect("b leads");
    assert_eq!(seen.value, "node-b");
    assert!(seen.term > token(&leader));
    second.release().await.unwrap();
    a.close().await;
    b.close().await;
}

async fn a_holder_keeps_its_lease_when_the_server_kills_its_connections(db: Db) {
    let own = own_server(db);
    let (url, admin_url) = urls(&own);
    let mut admin = Admin::connect(db, &admin_url).await;
    let name = unique("killed");
    let (a, b) = (connect(&url).await, connect(&url).await);
    let held = a.lock(&name, options(6)).unwrap().acquire(WAIT).await.unwrap();
    let lb = b.lock(&name, options(6)).unwrap();
    let waiter = tokio::spawn(async move { lb.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(admin.kill_clients().await >= 2, "the clients' connections");
    // The lease is the row's: the holder renews it on a new connection (at a third of its 6 s
    // lease) and the waiter, whatever woke it, finds the row alive.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(held.is_held(), "{:?}", held.lost_reason());
    assert!(!waiter.is_finished(), "still held");
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(2), "{:?}", released.elapsed());
    assert!(token(&next) > token(&held));
    next.release().await.unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_mutex_fifo_without_polling() {
    a_mutex_is_handed_over_in_order_without_polling(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_mutex_fifo_without_polling() {
    a_mutex_is_handed_over_in_order_without_polling(Db::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_read_write_and_semaphore() {
    read_write_lock_and_semaphore(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_read_write_and_semaphore() {
    read_write_lock_and_semaphore(Db::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_election() {
    election_with_observe(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_election() {
    election_with_observe(Db::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connections_killed_by_the_server() {
    a_holder_keeps_its_lease_when_the_server_kills_its_connections(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_connections_killed_by_the_server() {
    a_holder_keeps_its_lease_when_the_server_kills_its_connections(Db::MariaDb).await;
}

/// The URL's TLS settings reach the transport: `sslmode=verify-full` / `ssl-mode=VERIFY_IDENTITY`
/// with the launcher's CA as the URL's CA file (`sslrootcert` / `ssl-ca`) locks over TLS; the
/// same URL without the CA is a `CONNECTION` error about the TLS handshake that never shows the
/// password; a wrong password is `AUTHENTICATION`, not shown either.
async fn tls_and_login_from_the_url(db: Db) {
    let (kind, mode, ca_key) = match db {
        Db::Postgres => ("postgres", "sslmode=verify-full", "sslrootcert"),
        Db::MariaDb => ("mariadb", "ssl-mode=VERIFY_IDENTITY", "ssl-ca"),
    };
    let own = TestServers::start(&[kind, "--tls"]);
    let (url, password) = (own.url(), own.info["password"].as_str().unwrap().to_string());
    let ca_file = own.info["ca_file"].as_str().expect("ca_file").to_string();
    let client = connect(&format!("{url}?{mode}&{ca_key}={ca_file}")).await;
    let shown = format!("{client:?} {} {:?}", client.url(), client.server_urls());
    assert!(!shown.contains(&password) && shown.contains(&own.port(0).to_string()), "{shown}");
    let name = unique("tls");
    let lease = client.lock(&name, options(30)).unwrap().acquire(WAIT).await.unwrap();
    assert!(lease.release().await.unwrap());
    client.close().await;

    let e = ClientOptions::new(format!("{url}?{mode}")).connect().await.expect_err("the launcher's CA is no system root");
    assert_eq!(e.kind(), lockgate_core::ErrorKind::Connection, "{e}");
    assert!(e.message().contains("TLS") && !e.message().contains(&password), "{e}");

    let wrong = url.replacen(&password, "Wrong-pw-77", 1);
    assert_ne!(wrong, url);
    let e = ClientOptions::new(wrong).connect().await.expect_err("a wrong password");
    assert_eq!(e.kind(), lockgate_core::ErrorKind::Authentication, "{e}");
    assert!(!format!("{e} {e:?}").contains("Wrong-pw-77"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_and_login_from_the_url() {
    tls_and_login_from_the_url(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_tls_and_login_from_the_url() {
    tls_and_login_from_the_url(Db::MariaDb).await;
}
