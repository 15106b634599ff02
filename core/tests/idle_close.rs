//! Servers that close idle connections (Redis `timeout`, MariaDB `wait_timeout`, PostgreSQL
//! `idle_session_timeout`, memcached `idle_timeout`), through the native driver every binding
//! but Node's uses: a client left idle past that acquires and releases as before, nothing
//! surfacing to its caller. A connection of the test's own, idle as long, shows that the server
//! did close what was idle. (Node's transports: `bindings-node/test/idle-close.test.js`.)
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::Read;
use std::time::Duration;

use lockgate_core::native::ClientOptions;
use lockgate_core::LockOptions;
use sqlx::Connection;
use test_servers::TestServers;

/// The servers' idle limit.
const IDLE: Duration = Duration::from_secs(2);

/// A plain TCP connection to `port` that says nothing: closed by the server once idle.
struct Silent(std::net::TcpStream);

impl Silent {
    fn open(port: u16) -> Silent {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        Silent(s)
    }

    /// Whether the server has closed it (end of stream, or reset).
    fn closed(mut self) -> bool {
        let mut buf = [0u8; 64];
        match tokio::task::block_in_place(|| self.0.read(&mut buf)) {
            Ok(0) => true,
            Ok(_) => false,
            // Nothing within the read timeout: still open.
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    }
}

/// Takes and releases the lock, sleeps past the servers' idle limit while `closed_meanwhile`
/// checks that an idle connection of the test's own was closed, then takes and releases it
/// three times more.
async fn acquire_after_idle(url: &str, max_lease: Option<Duration>, lease: LockOptions, closed_meanwhile: impl std::future::Future<Output = bool>) {
    let mut o = ClientOptions::new(url);
    o.max_lease = max_lease;
    let client = o.connect().await.unwrap();
    let lock = client.lock("idle-closed", lease).unwrap();
    // memcached: a server up less than max_lease grants nothing (PROTOCOL.md §13).
    assert!(lock.acquire(Duration::from_secs(15)).await.unwrap().release().await.unwrap());
    assert!(closed_meanwhile.await, "the server closed an idle connection");
    for _ in 0..3 {
        let lease = lock.acquire(Duration::from_secs(5)).await.expect("granted after the server closed idle connections");
        assert!(lease.release().await.unwrap());
    }
    client.close().await;
}

async fn idle() {
    tokio::time::sleep(IDLE + Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_closing_idle_connections_costs_nothing() {
    let servers = TestServers::start(&["single", "--", "--timeout", &IDLE.as_secs().to_string()]);
    let probe = Silent::open(servers.port(0));
    acquire_after_idle(&servers.url(), None, LockOptions::default(), async move {
        idle().await;
        probe.closed()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_closing_idle_connections_costs_nothing() {
    let servers = TestServers::start(&["memcached", "--", "-o", &format!("idle_timeout={}", IDLE.as_secs())]);
    let probe = Silent::open(servers.port(0));
    let lease = LockOptions::renewed_lease(Duration::from_secs(5));
    acquire_after_idle(&servers.url(), Some(Duration::from_secs(5)), lease, async move {
        idle().await;
        probe.closed()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_closing_idle_connections_costs_nothing() {
    let servers = TestServers::start(&["postgres", "--", &format!("idle_session_timeout={}", IDLE.as_millis())]);
    let admin = servers.info["admin_url"].as_str().expect("admin_url").to_string();
    let (probe, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.unwrap();
    let connection = tokio::spawn(conn);
    acquire_after_idle(&servers.url(), None, LockOptions::default(), async move {
        idle().await;
        probe.is_closed() && connection.is_finished()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_closing_idle_connections_costs_nothing() {
    let servers = TestServers::start(&["mariadb", "--", &format!("wait_timeout={}", IDLE.as_secs())]);
    let admin = servers.info["admin_url"].as_str().expect("admin_url").replacen("mariadb://", "mysql://", 1);
    let mut probe = sqlx::MySqlConnection::connect(&admin).await.unwrap();
    acquire_after_idle(&servers.url(), None, LockOptions::default(), async move {
        idle().await;
        probe.ping().await.is_err()
    })
    .await;
}
