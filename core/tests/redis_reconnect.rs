//! Connections under faults, against real servers started by the test (issue 13, items 6, 8
//! and 10):
//! - a connection that goes silent (a proxy stops forwarding on open sockets, new ones pass)
//!   is replaced: the same client recovers within a few seconds, waiters are woken again, and
//!   a lease held across the silence is either still held on the server or reported lost;
//! - `connect_timeout` bounds the whole connect, for a client and for Redlock;
//! - a reconnect that the server refuses for its credentials surfaces as `AUTHENTICATION`.
#![cfg(feature = "tokio")]

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use lockgate_core::connect::redlock_url;
use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::{ErrorKind, LockOptions};
use redis::Commands;
use support::proxy::SilentProxy;
use support::RedisServer;

const RESPONSE_TIMEOUT: Duration = Duration::from_millis(1000);

fn through(proxy: &SilentProxy) -> ClientOptions {
    let mut o = ClientOptions::new(proxy.url());
    o.response_timeout = RESPONSE_TIMEOUT;
    o.connect_timeout = Duration::from_secs(1);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_replaced() {
    let server = RedisServer::start();
    let proxy = SilentProxy::start(server.port).await;
    let client = through(&proxy).connect().await.unwrap();
    let direct = Client::connect(&server.url()).await.unwrap();

    // Before: a lease renewed every second across the silence, and a waiter queued behind a
    // holder that is not behind the proxy.
    let kept = client.lock("kept", LockOptions::renewed_lease(Duration::from_secs(3))).unwrap();
    let kept = kept.acquire(Duration::from_secs(5)).await.unwrap();
    let blocker = direct.lock("queued", LockOptions::default()).unwrap();
    let blocked = blocker.acquire(Duration::from_secs(5)).await.unwrap();
    let waiter = tokio::spawn({
        let lock = client.lock("queued", LockOptions::default()).unwrap();
        async move { lock.acquire(Duration::from_secs(30)).await }
    });
    let mut raw = server.raw();
    while raw.zcard::<_, usize>("lockgate:{queued}:queue").unwrap() < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    proxy.silence();
    let silent_at = Instant::now();
    // The first call after the silence waits out one response timeout, then the connection
    // is replaced and the acquire's retry goes through on the new one.
    let other = client.lock("other", LockOptions::default()).unwrap();
    let lease = other.acquire(Duration::from_secs(8)).await.expect("recovered after the silence");
    let recovered = silent_at.elapsed();
    assert!(recovered < Duration::from_secs(3), "recovered after {recovered:?}");
    assert!(lease.release().await.unwrap());
    // And keeps working: more locks, one after another.
    for i in 0..5 {
        let l = client.lock(&format!("after-{i}"), LockOptions::default()).unwrap();
        let lease = l.acquire(Duration::from_secs(2)).await.unwrap();
        assert!(lease.release().await.unwrap());
    }

    // The waiter's notifications came over the old connection: it subscribes again on the new
    // one and is woken by the release.
    let released_at = Instant::now();
    assert!(blocked.release().await.unwrap());
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("waiter woken").unwrap();
    let woken = woken.expect("the waiter got the lock");
    assert!(released_at.elapsed() < Duration::from_secs(3), "woken after {:?}", released_at.elapsed());
    assert!(woken.release().await.unwrap());

    // The lease held across the silence is honest: held on the server if it says held.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if kept.is_held() {
        let pttl: i64 = raw.pttl("lockgate:{kept}").unwrap();
        assert!(pttl > 0, "a lease that says held is held on the server (pttl {pttl})");
        assert!(kept.release().await.unwrap(), "and its release finds it");
    } else {
        let why = kept.lost_reason().expect("a lease that is not held says why");
        assert!(matches!(why.kind(), ErrorKind::Connection | ErrorKind::NotHeld | ErrorKind::Timeout), "{why}");
    }
    client.close().await;
}

// A short silence (below the lease's validity) does not lose a renewed lease: the renewal that
// timed out is retried on the new connection in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_survives_a_short_silence() {
    let server = RedisServer::start();
    let proxy = SilentProxy::start(server.port).await;
    let mut o = through(&proxy);
    o.response_timeout = Duration::from_millis(500);
    let client = o.connect().await.unwrap();
    let lock = client.lock("short", LockOptions::renewed_lease(Duration::from_secs(6))).unwrap();
    let lease = lock.acquire(Duration::from_secs(5)).await.unwrap();
    proxy.silence();
    // Renewals run every 2 s; the one that meets the silent connection times out after 0.5 s,
    // the connection is replaced and the renewal retried well inside the 6 s validity.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(lease.is_held(), "lost: {:?}", lease.lost_reason());
    let remaining = lease.remaining().unwrap();
    assert!(remaining > Duration::from_secs(2), "renewed since the silence: {remaining:?} left");
    let pttl: i64 = server.raw().pttl("lockgate:{short}").unwrap();
    assert!(pttl > 2000, "renewed on the server: pttl {pttl}");
    assert!(lease.release().await.unwrap());
}

/// A loopback port that accepts connections and never answers (held open until the test ends).
fn black_hole() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().take(64) {
            match s {
                Ok(s) => held.push(s),
                Err(_) => return,
            }
        }
    });
    (port, t)
}

/// A loopback port with nothing listening.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn connect_timeout_bounds_the_whole_connect() {
    let (silent, _t) = black_hole();
    for (timeout, bound) in [(Duration::from_secs(1), Duration::from_millis(1800)), (Duration::from_secs(5), Duration::from_millis(6500))] {
        let mut o = ClientOptions::new(format!("redis://127.0.0.1:{silent}"));
        if timeout != Duration::from_secs(5) {
            o.connect_timeout = timeout;
        }
        let started = Instant::now();
        let e = o.connect().await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
        assert!(e.retryable());
        assert!(took >= timeout.mul_f32(0.9) && took < bound, "connect_timeout {timeout:?} took {took:?}");

        if timeout == Duration::from_secs(5) {
            continue; // the default is the same code with another number; Redlock once is enough
        }
        let masters = [format!("redis://127.0.0.1:{silent}"), format!("redis://127.0.0.1:{}", closed_port())];
        let mut r = ClientOptions::new(redlock_url(&masters).unwrap());
        r.connect_timeout = timeout;
        let started = Instant::now();
        let e = r.connect().await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
        assert!(took < bound, "Redlock connect_timeout {timeout:?} took {took:?}");
    }
    // Nothing listening: refused at once, retried briefly, well inside the bound.
    let mut o = ClientOptions::new(format!("redis://127.0.0.1:{}", closed_port()));
    o.connect_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let e = o.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(started.elapsed() < Duration::from_millis(1800), "{:?}", started.elapsed());
}

// The password changes while the client is connected; its next connection is refused: the
// error says AUTHENTICATION (not a timeout), and never shows the password.
#[tokio::test]
async fn a_refused_reconnect_is_authentication() {
    let server = RedisServer::start_with_acl(&[
        "user app on >first-pw ~* &* +@all",
        "user admin on >admin-pw ~* &* +@all",
        "user default off",
    ]);
    let mut admin = redis::Client::open(format!("redis://admin:admin-pw@127.0.0.1:{}", server.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut o = ClientOptions::new(format!("redis://app:first-pw@127.0.0.1:{}", server.port));
    o.response_timeout = RESPONSE_TIMEOUT;
    let client = o.connect().await.unwrap();
    let lock = client.lock("auth", LockOptions::default()).unwrap();
    lock.acquire(Duration::from_secs(2)).await.unwrap().release().await.unwrap();

    let _: () = redis::cmd("ACL").arg("SETUSER").arg("app").arg("resetpass").arg(">second-pw").query(&mut admin).unwrap();
    let _: () = redis::cmd("CLIENT").arg("KILL").arg("USER").arg("app").query(&mut admin).unwrap();
    let started = Instant::now();
    let e = loop {
        match lock.acquire(Duration::from_secs(3)).await {
            Ok(l) => {
                // The kill raced with a request on the old connection; try again.
                l.release().await.ok();
                assert!(started.elapsed() < Duration::from_secs(5), "never reconnected");
            }
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    assert!(!e.message().contains("first-pw") && !e.message().contains("second-pw"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3), "reported at once, not after the wait: {:?}", started.elapsed());
}
