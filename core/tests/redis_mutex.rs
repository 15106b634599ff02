//! The Redis mutex against real servers started by the test: every test that does not depend
//! on a single server runs twice, as `<test>::single` on one redis-server and `<test>::cluster`
//! on a local three-master Redis Cluster (`on_both!`), asserting the same things.
//!
//! `acl_authentication` runs on both too, on servers with an ACL file (instantiated by hand).
//!
//! Single-server only, with the reason:
//! - `tls_connection_is_verified`: starts its own TLS-only server; the cluster fixture is
//!   plaintext (cluster TLS needs `tls-cluster` and TLS bus ports).
#![cfg(feature = "tokio")]

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::{ErrorKind, LockOptions};
use redis::Commands;
use support::{Backend, RedisServer, TlsFiles};

fn fixed(ms: u64) -> LockOptions {
    LockOptions::fixed_lease(Duration::from_millis(ms))
}

// Several clients increment a counter with a non-atomic GET/SET inside the lock: no update is lost.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn mutual_exclusion_loses_no_updates);
async fn mutual_exclusion_loses_no_updates(b: Backend) {
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let opts = b.options();
        let counter_url = b.url_for("counter");
        tasks.push(tokio::spawn(async move {
            let client = opts.connect().await.unwrap();
            let raw = redis::Client::open(counter_url.as_str()).unwrap();
            let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
            let lock = client.lock("counter", LockOptions::default()).unwrap();
            let mut tokens = Vec::new();
            for _ in 0..50 {
                let lease = lock.acquire(Duration::from_secs(20)).await.unwrap();
                tokens.push(lease.fencing_token().unwrap());
                let v: Option<i64> = redis::cmd("GET")
                    .arg("counter")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
                let _: () = redis::cmd("SET")
                    .arg("counter")
                    .arg(v.unwrap_or(0) + 1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(lease.release().await.unwrap());
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let tokens = t.await.unwrap();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens of one client increase"
        );
        all.extend(tokens);
    }
    let v: i64 = b.raw("counter").get("counter").unwrap();
    assert_eq!(v, 200);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 200, "every grant has a distinct fencing token");
}

// Only the owner's release deletes the key; a stranger's token changes nothing.
on_both!(#[tokio::test] async fn release_is_owner_only);
async fn release_is_owner_only(b: Backend) {
    let client = b.connect().await;
    let lock = client.lock("owner", fixed(200)).unwrap();
    let lease = lock.acquire(Duration::from_secs(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = lock.acquire(Duration::from_secs(1)).await.unwrap();
    assert!(
        !lease.release().await.unwrap(),
        "the expired holder's release reports not held"
    );
    assert!(other.is_held());
    let holder: Option<String> = b.raw("lockgate:{owner}").get("lockgate:{owner}").unwrap();
    assert!(
        holder.is_some(),
        "the new holder's key survived the old holder's release"
    );
    assert!(other.release().await.unwrap());
}

// A fixed lease expires by itself and the lock becomes free; extend after that never resurrects it.
on_both!(#[tokio::test] async fn expiry_frees_and_extend_never_resurrects);
async fn expiry_frees_and_extend_never_resurrects(b: Backend) {
    let client = b.connect().await;
    let lock = client.lock("exp", fixed(150)).unwrap();
    // Another contender (a handle never waits for itself: it would get ALREADY_HELD).
    let other = client.lock("exp", fixed(150)).unwrap();
    let lease = lock.acquire(Duration::from_secs(1)).await.unwrap();
    assert!(other.try_acquire().await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(!lease.is_held());
    let e = lease.extend(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld);
    let exists: bool = b.raw("lockgate:{exp}").exists("lockgate:{exp}").unwrap();
    assert!(!exists, "extend must not re-create the key");
    let again = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free after expiry");
    assert!(again.fencing_token().unwrap() > lease.fencing_token().unwrap());
}

// With renewal on, the watchdog keeps a short lease alive well past its length.
on_both!(#[tokio::test] async fn watchdog_keeps_lock_past_its_lease);
async fn watchdog_keeps_lock_past_its_lease(b: Backend) {
    let client = b.connect().await;
    let lock = client
        .lock(
            "dog",
            LockOptions::renewed_lease(Duration::from_millis(300)),
        )
        .unwrap();
    let other = client.lock("dog", LockOptions::default()).unwrap();
    let lease = lock.acquire(Duration::from_secs(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(lease.is_held());
    let pttl: i64 = b.raw("lockgate:{dog}").pttl("lockgate:{dog}").unwrap();
    assert!(pttl > 0, "key still has a lease");
    assert!(other.try_acquire().await.unwrap().is_none());
    assert!(lease.release().await.unwrap());
}

// Deleting the key behind the holder's back fires the loss signal at the next renewal.
on_both!(#[tokio::test] async fn loss_is_signalled_when_key_is_deleted);
async fn loss_is_signalled_when_key_is_deleted(b: Backend) {
    let client = b.connect().await;
    let lock = client
        .lock(
            "gone",
            LockOptions::renewed_lease(Duration::from_millis(600)),
        )
        .unwrap();
    let lease = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let _: () = b.raw("lockgate:{gone}").del("lockgate:{gone}").unwrap();
    let err = tokio::time::timeout(Duration::from_secs(2), lease.lost())
        .await
        .expect("loss signalled within a lease");
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(!lease.is_held());
    assert!(lease.lost_reason().is_some());
}

// A waiter is woken by the release (push), far sooner than any fallback re-check.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn waiter_is_woken_by_release);
async fn waiter_is_woken_by_release(backend: Backend) {
    let a = backend.connect().await;
    let b = backend.connect().await;
    // A 30 s watchdog lease: the waiter's fallback re-check is seconds away.
    let holder = a
        .lock("wake", LockOptions::default())
        .unwrap()
        .acquire(Duration::from_secs(1))
        .await
        .unwrap();
    let lock_b = b.lock("wake", LockOptions::default()).unwrap();
    let waiter = tokio::spawn(async move {
        let lease = lock_b.acquire(Duration::from_secs(20)).await.unwrap();
        (std::time::Instant::now(), lease)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = std::time::Instant::now();
    assert!(holder.release().await.unwrap());
    let (acquired_at, lease) = waiter.await.unwrap();
    let gap = acquired_at.duration_since(released_at);
    assert!(gap < Duration::from_millis(500), "handoff took {gap:?}");
    assert!(lease.fencing_token().unwrap() > holder.fencing_token().unwrap());
}

// Waiters are granted in arrival order, and each release wakes only the next one.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn waiters_are_served_in_arrival_order);
async fn waiters_are_served_in_arrival_order(b: Backend) {
    let client = b.connect().await;
    let lock = client.lock("fifo", LockOptions::default()).unwrap();
    let first = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let order = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let c = b.connect().await;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let lock = c.lock("fifo", LockOptions::default()).unwrap();
            let lease = lock.acquire(Duration::from_secs(20)).await.unwrap();
            order.lock().await.push(i);
            lease.release().await.unwrap();
        }));
        // Let this waiter reach the queue before the next one arrives.
        let mut raw = b.raw("lockgate:{fifo}:queue");
        while raw.zcard::<_, usize>("lockgate:{fifo}:queue").unwrap() < i + 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    first.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().await, (0..8).collect::<Vec<_>>());
    for suffix in ["", ":queue", ":waiters"] {
        let k = format!("lockgate:{{fifo}}{suffix}");
        assert!(!b.raw(&k).exists::<_, bool>(&k).unwrap(), "{k} left behind");
    }
}

// A timed-out waiter leaves no queue entry behind, and the timeout is honoured.
on_both!(#[tokio::test] async fn timeout_leaves_nothing_behind);
async fn timeout_leaves_nothing_behind(b: Backend) {
    let client = b.connect().await;
    let holder = client.lock("t", LockOptions::default()).unwrap();
    // The waiter is another handle (a handle never waits for itself: it would get ALREADY_HELD).
    let lock = client.lock("t", LockOptions::default()).unwrap();
    let held = holder.acquire(Duration::from_secs(1)).await.unwrap();
    let started = std::time::Instant::now();
    let e = lock.acquire(Duration::from_millis(200)).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.retryable());
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(700),
        "{took:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut raw = b.raw("lockgate:{t}");
    assert_eq!(raw.zcard::<_, usize>("lockgate:{t}:queue").unwrap(), 0);
    // Dropping a pending acquire cancels it the same way.
    let pending = tokio::time::timeout(
        Duration::from_millis(100),
        lock.acquire(Duration::from_secs(10)),
    )
    .await;
    assert!(pending.is_err());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(raw.zcard::<_, usize>("lockgate:{t}:queue").unwrap(), 0);
    held.release().await.unwrap();
    assert!(!raw.exists::<_, bool>("lockgate:{t}").unwrap());
}

// Restarting Redis without persistence keeps fencing tokens increasing (and reloads scripts).
// On a cluster, the master owning the lock's slot is restarted.
on_both!(#[tokio::test] async fn tokens_increase_across_server_restart);
async fn tokens_increase_across_server_restart(mut b: Backend) {
    let client = b.connect().await;
    let lock = client.lock("fence", fixed(5000)).unwrap();
    let mut last = 0;
    for _ in 0..20 {
        let l = lock.acquire(Duration::from_secs(1)).await.unwrap();
        assert!(l.fencing_token().unwrap() > last);
        last = l.fencing_token().unwrap();
        l.release().await.unwrap();
    }
    b.restart_owner_of("lockgate:{fence}");
    let mut after = None;
    for _ in 0..50 {
        match lock.acquire(Duration::from_secs(1)).await {
            Ok(l) => {
                after = Some(l.fencing_token().unwrap());
                l.release().await.unwrap();
                break;
            }
            Err(e) => {
                assert!(e.retryable(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let after = after.expect("acquired after restart");
    assert!(
        after > last,
        "token after restart {after} must exceed {last}"
    );
}

// Bad input is rejected before any network call with INVALID_ARGUMENT.
on_both!(#[tokio::test] async fn bad_input_is_rejected);
async fn bad_input_is_rejected(b: Backend) {
    let client = b.connect().await;
    assert_eq!(
        client.lock("", LockOptions::default()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        client
            .lock(&"n".repeat(513), LockOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        client.lock("x", fixed(0)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let huge = LockOptions::fixed_lease(Duration::from_secs(u64::MAX / 4));
    assert_eq!(
        client.lock("x", huge).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let lock = client.lock("x", LockOptions::default()).unwrap();
    assert_eq!(
        lock.acquire(Duration::from_secs(u64::MAX / 4))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    let lease = lock.acquire(Duration::from_secs(1)).await.unwrap();
    assert_eq!(
        lease.extend(Duration::ZERO).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    for url in [
        "",
        "http://127.0.0.1",
        "redis://",
        "redis://127.0.0.1:1/notadb",
    ] {
        assert_eq!(
            b.options_for(url).connect().await.unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{url}"
        );
    }
    assert!(!b.raw("lockgate:{}").exists::<_, bool>("lockgate:{}").unwrap());
}

// A key of the wrong type under the lock's name is a PROTOCOL error, not a panic.
on_both!(#[tokio::test] async fn wrong_type_is_a_protocol_error);
async fn wrong_type_is_a_protocol_error(b: Backend) {
    let _: () = b.raw("lockgate:{wt}").hset("lockgate:{wt}", "f", "v").unwrap();
    let client = b.connect().await;
    let e = client
        .lock("wt", LockOptions::default())
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol);
}

// ACL users: the right password connects; a wrong one is AUTHENTICATION and never appears in errors.
// On a cluster every node has the same users, and the client authenticates to each node it
// discovers (`{acl}` is in a slot of the second master, not the seed).
const ACL: [&str; 2] = ["user app on >s3cret-pw ~* &* +@all", "user default off"];
mod acl_authentication {
    use super::{Backend, RedisServer, ACL};
    #[tokio::test]
    async fn single() {
        super::acl_authentication(Backend::Single(RedisServer::start_with_acl(&ACL))).await
    }
    #[tokio::test]
    async fn cluster() {
        super::acl_authentication(Backend::cluster_with_acl(&ACL, "app:s3cret-pw")).await
    }
}
async fn acl_authentication(b: Backend) {
    let ok = b
        .options_for(&format!("redis://app:s3cret-pw@127.0.0.1:{}", b.port()))
        .connect()
        .await
        .unwrap();
    assert!(!format!("{ok:?}").contains("s3cret-pw"));
    let lease = ok
        .lock("acl", LockOptions::default())
        .unwrap()
        .acquire(Duration::from_secs(1))
        .await
        .unwrap();
    assert!(lease.release().await.unwrap());
    let e = b
        .options_for(&format!("redis://app:wrong-pw@127.0.0.1:{}", b.port()))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    assert!(!e.to_string().contains("wrong-pw"));
    let e = b
        .options_for(&format!("redis://127.0.0.1:{}", b.port()))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
}

// TLS with a verified certificate works; an unknown CA is refused (no plaintext fallback).
#[tokio::test]
async fn tls_connection_is_verified() {
    let tls = TlsFiles::create();
    let server = RedisServer::start_with(tls.server_args(), true);
    let url = format!("rediss://127.0.0.1:{}", server.port);
    let mut opts = ClientOptions::new(url.clone());
    opts.tls_ca_pem = Some(tls.ca_pem.clone());
    let client = opts.connect().await.unwrap();
    let lease = client
        .lock("tls", LockOptions::default())
        .unwrap()
        .acquire(Duration::from_secs(1))
        .await
        .unwrap();
    assert!(lease.fencing_token().unwrap() > 0);
    assert!(lease.release().await.unwrap());
    let e = Client::connect(&url).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    let e = Client::connect(&format!("redis://127.0.0.1:{}", server.port))
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Connection | ErrorKind::Protocol),
        "{e}"
    );
}

// A waiter that crashes while queued holds a handed-over lock for at most its entry lease,
// not a full lease: the next waiter (heartbeat every entry_ttl / 3) gets it within
// entry_ttl + entry_ttl / 3.
on_both!(#[test] fn crashed_waiter_is_skipped_within_its_entry_lease);
fn crashed_waiter_is_skipped_within_its_entry_lease(b: Backend) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let holder = rt.block_on(async {
        let c = b.connect().await;
        c.lock("crash", LockOptions::default()).unwrap().acquire(Duration::from_secs(1)).await.unwrap()
    });
    // The doomed waiter lives in its own runtime; dropping that runtime is a crash: no release,
    // no cancel, its heartbeats stop.
    let doomed_rt = tokio::runtime::Runtime::new().unwrap();
    let opts = LockOptions::default().with_entry_ttl(Duration::from_millis(400));
    let doomed_opts = b.options();
    doomed_rt.spawn(async move {
        let c = doomed_opts.connect().await.unwrap();
        let _lease = c.lock("crash", opts).unwrap().acquire(Duration::from_secs(60)).await;
        std::future::pending::<()>().await;
    });
    let mut raw = b.raw("lockgate:{crash}:queue");
    while raw.zcard::<_, usize>("lockgate:{crash}:queue").unwrap() < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivor = rt.spawn({
        let survivor_opts = b.options();
        async move {
            let c = survivor_opts.connect().await.unwrap();
            let opts = LockOptions::default().with_entry_ttl(Duration::from_millis(400));
            let lock = c.lock("crash", opts).unwrap();
            let lease = lock.acquire(Duration::from_secs(20)).await.unwrap();
            (std::time::Instant::now(), lease.fencing_token().unwrap())
        }
    });
    while raw.zcard::<_, usize>("lockgate:{crash}:queue").unwrap() < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    doomed_rt.shutdown_background();
    let released_at = std::time::Instant::now();
    rt.block_on(async { assert!(holder.release().await.unwrap()) });
    let (acquired_at, _) = rt.block_on(survivor).unwrap();
    let waited = acquired_at.duration_since(released_at);
    assert!(waited < Duration::from_millis(1000), "survivor waited {waited:?} (a full lease is 30 s)");
    assert!(waited >= Duration::from_millis(300), "the dead waiter's handoff lease was not honoured: {waited:?}");
}
