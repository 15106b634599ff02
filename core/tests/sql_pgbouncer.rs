//! The PostgreSQL backend behind a real PgBouncer (Debian's 1.18, from the project's test-server
//! launcher: `test-servers postgres --pgbouncer MODE`), as PROTOCOL.md §11 says it behaves: in
//! transaction mode a notification never reaches the `LISTEN`ing connection, so the session
//! open's notification to itself is missed and acquiring fails with `UNSUPPORTED` naming
//! PgBouncer, leaving no row; in session mode locks work as on a direct connection, a waiter
//! woken by the holder's release through `LISTEN`/`NOTIFY`, fencing tokens growing.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::time::{Duration, Instant};

use lockgate_core::native::{Client, Lease};
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;

const WAIT: Duration = Duration::from_secs(10);

/// A `postgres --pgbouncer MODE` launcher's URLs: (through the pooler, the administrator's
/// straight to the server).
fn pooled(servers: &TestServers) -> (String, String) {
    let url = |key: &str| servers.info[key].as_str().unwrap_or_else(|| panic!("no {key} in {}", servers.info)).to_string();
    (url("pgbouncer_url"), url("admin_url"))
}

/// A lock name no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("lg-{tag}-{}-{t}", std::process::id())
}

fn options(lease_secs: u64) -> LockOptions {
    LockOptions { lease: Duration::from_secs(lease_secs), ..LockOptions::default() }
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("SQL grants carry a fencing token (the row's id)")
}

async fn connect(url: &str) -> Client {
    Client::connect(url).await.unwrap_or_else(|e| panic!("connecting through PgBouncer: {e}"))
}

/// The rows of lockgate's table, through the server itself (not the pooler); `None` if the
/// table does not exist.
async fn rows(admin_url: &str) -> Option<i64> {
    let (admin, conn) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls).await.expect("admin");
    tokio::spawn(conn);
    let exists: bool = admin.query_one("SELECT to_regclass('public.lockgate_entry') IS NOT NULL", &[]).await.unwrap().get(0);
    if !exists {
        return None;
    }
    Some(admin.query_one("SELECT count(*) FROM public.lockgate_entry", &[]).await.unwrap().get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_mode_is_refused_as_unsupported() {
    let servers = TestServers::start(&["postgres", "--pgbouncer", "transaction"]);
    assert_eq!(servers.info["pgbouncer_mode"], "transaction");
    let (url, admin_url) = pooled(&servers);
    let client = connect(&url).await;
    let started = Instant::now();
    let e = client.lock(&unique("tx"), options(30)).unwrap().acquire(WAIT).await.expect_err("acquired behind a transaction-mode pool");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.message().contains("PgBouncer"), "{e}");
    // The refusal is the open's 5 s wait for the notification, not the acquire's own deadline.
    assert!(started.elapsed() < WAIT - Duration::from_secs(2), "refused after {:?}", started.elapsed());
    // The open got as far as the table (created through the pooler) and no further: no row.
    assert_eq!(rows(&admin_url).await, Some(0), "rows left behind");
    client.close().await;
    assert_eq!(rows(&admin_url).await, Some(0), "rows left behind after the close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_mode_locks_and_wakes_waiters() {
    let servers = TestServers::start(&["postgres", "--pgbouncer", "session"]);
    assert_eq!(servers.info["pgbouncer_mode"], "session");
    let (url, admin_url) = pooled(&servers);
    let (a, b) = (connect(&url).await, connect(&url).await);
    let name = unique("session");
    let (la, lb) = (a.lock(&name, options(30)).unwrap(), b.lock(&name, options(30)).unwrap());
    let first = la.acquire(WAIT).await.unwrap();
    assert!(lb.try_acquire().await.unwrap().is_none(), "a holds it");
    let waiting = lb.clone();
    let waiter = tokio::spawn(async move { waiting.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b waits while a holds");
    assert_eq!(rows(&admin_url).await, Some(2), "a's row and b's waiting row");
    let released = Instant::now();
    assert!(first.release().await.unwrap());
    let second = waiter.await.unwrap().unwrap();
    // b's own re-check is a third of its 30 s entry lease away: only the release's
    // notification, through the pooler to b's listening connection, wakes it this soon.
    assert!(released.elapsed() < Duration::from_secs(1), "woken by the release: {:?}", released.elapsed());
    assert!(token(&second) > token(&first), "{} > {}", token(&second), token(&first));
    assert!(second.release().await.unwrap());
    let third = la.acquire(WAIT).await.unwrap();
    assert!(token(&third) > token(&second), "{} > {}", token(&third), token(&second));
    assert!(third.release().await.unwrap());
    a.close().await;
    b.close().await;
    assert_eq!(rows(&admin_url).await, Some(0), "rows left behind");
}
