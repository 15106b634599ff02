//! The one client family over real redis-servers: a `redlock://` URL gives the same `Client`,
//! `Lock` and `Lease` as a `redis://` one; what the Redlock lacks is `UNSUPPORTED` when the
//! handle is made, before anything reaches a master; its leases carry no fencing token; a
//! reentrant handle counts its holds on one majority grant.
#![cfg(feature = "tokio")]

mod support;

use std::time::Duration;

use lockgate_core::connect::{OptionValue, Spelling};
use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::backend::redlock::scripts::key;
use lockgate_core::{Capability, ErrorKind, LockOptions, Primitive};
use redis::Commands;
use support::RedisServer;

/// Short, so fresh masters grant after ~2 s (the delayed-restart rule: max_lease + 1 s).
const MAX_LEASE: Duration = Duration::from_millis(1000);

/// `redlock://127.0.0.1:P1,127.0.0.1:P2,...` for `servers`.
fn redlock_url(servers: &[RedisServer]) -> String {
    let hosts: Vec<String> = servers.iter().map(|s| s.url().trim_start_matches("redis://").trim_end_matches('/').to_string()).collect();
    format!("redlock://{}", hosts.join(","))
}

/// How many masters have a key for the Redlock lock `name`.
fn holders(servers: &[RedisServer], name: &str) -> usize {
    let k = key("lockgate:", name);
    servers.iter().filter(|s| s.raw().exists::<_, bool>(&k).unwrap()).count()
}

/// Every key of every master (nothing may be written by a refused handle).
fn all_keys(servers: &[RedisServer]) -> Vec<String> {
    servers.iter().flat_map(|s| s.raw().keys::<_, Vec<String>>("*").unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_url_gives_the_one_client_family() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut options = ClientOptions::new(redlock_url(&servers));
    // Through the generic setter, as a binding would (Java's names here).
    options.set("maxLease", OptionValue::Number(MAX_LEASE.as_secs_f64()), &Spelling::JAVA).unwrap();
    options.set("retryDelay", OptionValue::Number(0.01), &Spelling::JAVA).unwrap();
    options.set("retryJitter", OptionValue::Number(0.02), &Spelling::JAVA).unwrap();
    options.set("nodeTimeout", OptionValue::Number(0.2), &Spelling::JAVA).unwrap();
    let client = options.connect().await.unwrap();
    assert_eq!(client.url(), redlock_url(&servers));
    assert_eq!(client.server_urls().len(), 3);

    let caps = client.capabilities();
    assert_eq!((caps.backend, caps.scheme), ("Redlock", "redlock"));
    let offered: Vec<_> = caps.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
    assert_eq!(offered, ["reentrant", "list_locks", "adopt", "min_hold"], "{caps:?}");

    // What a Redlock lacks is refused when the handle is made, before any master is touched.
    let lease = LockOptions::fixed_lease(MAX_LEASE);
    for (what, result) in [
        ("semaphore", client.semaphore("s", 2, lease.clone()).map(drop)),
        ("read_write", client.read_write_lock("rw", lease.clone()).map(drop)),
        ("election", client.election("e", lease.clone()).map(drop)),
        ("leader", client.primitive("e", Primitive::Leader { value: "x".into() }, lease.clone(), false).map(drop)),
    ] {
        let e = result.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{what}: {e}");
        assert!(e.message().contains("Redlock client (redlock://)"), "{what}: {e}");
        assert!(!e.retryable());
    }
    assert_eq!(
        client.capabilities().require(Capability::Semaphore).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    // A lease the deployment's max_lease cannot hold is refused at once too.
    let e = client.lock("orders", LockOptions::fixed_lease(Duration::from_secs(5))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(all_keys(&servers).is_empty(), "{:?}", all_keys(&servers));

    // A lock without a lease gets max_lease (shorter than the 30 s default) by the core's rule.
    let o = client.lock_options(None, None, None, None, &Spelling::RUST).unwrap();
    assert_eq!((o.lease, o.auto_renew), (MAX_LEASE, true));
    let e = client.lock_options(None, None, None, Some(Duration::from_secs(1)), &Spelling::JS).unwrap_err();
    assert!(e.message().starts_with("entryTtlMs is not a Redlock setting"), "{e}");

    // The mutex itself: acquire (fresh masters wait out their restart rule), no token, release.
    let lock = client.lock("orders", o).unwrap();
    let lease = lock.acquire(Duration::from_secs(10)).await.unwrap();
    assert_eq!(lease.fencing_token(), None);
    assert!(lease.is_held());
    assert!(holders(&servers, "orders") >= 2);
    // The handle holds it: a second acquire through it fails at once, as on every backend.
    assert_eq!(lock.try_acquire().await.unwrap_err().kind(), ErrorKind::AlreadyHeld);
    let other = client.lock("orders", LockOptions::fixed_lease(MAX_LEASE)).unwrap();
    assert!(other.try_acquire().await.unwrap().is_none());
    assert!(lease.release().await.unwrap());
    assert_eq!(holders(&servers, "orders"), 0);
    let again = other.try_acquire().await.unwrap().expect("free after the release");
    assert_eq!(again.fencing_token(), None);
    drop(again);

    // A reentrant handle: the second acquire is a second hold on the same majority grant (no
    // round); the first release gives one hold back and sends nothing, the last one releases
    // it on the masters (PROTOCOL.md §8).
    let reentrant = client.reentrant_lock("re", LockOptions::renewed_lease(MAX_LEASE)).unwrap();
    assert!(reentrant.is_reentrant());
    let first = reentrant.acquire(Duration::from_secs(10)).await.unwrap();
    let second = reentrant.try_acquire().await.unwrap().expect("re-entered at once");
    assert_eq!((first.fencing_token(), second.fencing_token()), (None, None));
    assert!(holders(&servers, "re") >= 2);
    let rival = client.lock("re", LockOptions::fixed_lease(MAX_LEASE)).unwrap();
    assert!(first.release().await.unwrap(), "one hold given back");
    assert!(second.is_held(), "the other hold keeps the lease");
    assert!(holders(&servers, "re") >= 2, "nothing was released on the masters");
    assert!(rival.try_acquire().await.unwrap().is_none());
    assert!(second.release().await.unwrap(), "the last hold releases it");
    assert!(!second.is_held());
    assert_eq!(holders(&servers, "re"), 0);
    let free = rival.try_acquire().await.unwrap().expect("free after the last release");
    drop(free);
    client.close().await;
    assert_eq!(lock.try_acquire().await.unwrap_err().kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_url_gives_every_capability_and_tokens() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let caps = client.capabilities();
    assert_eq!((caps.backend, caps.scheme), ("Redis", "redis"));
    let on: Vec<&str> = caps.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
    assert_eq!(
        on,
        ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "readers_first", "agreed_parameters", "entry_ttl", "list_locks", "adopt", "min_hold"]
    );
    let lock = client.lock("plain", client.lock_options(None, None, None, None, &Spelling::RUST).unwrap()).unwrap();
    let lease = lock.try_acquire().await.unwrap().expect("free");
    assert!(lease.fencing_token().is_some_and(|t| t > 0));
    assert!(lease.release().await.unwrap());
    let permits = client.semaphore("s", 2, LockOptions::default()).unwrap();
    assert!(permits.try_acquire().await.unwrap().is_some_and(|l| l.fencing_token().is_some()));
    // A Redlock setting on a Redis URL is refused before connecting (in the caller's words by
    // `validate_as`, which a binding calls first).
    let mut o = ClientOptions::new(server.url());
    o.set("maxLeaseMs", OptionValue::Number(5000.0), &Spelling::JS).unwrap();
    assert!(o.validate_as(&Spelling::JS).unwrap_err().message().starts_with("maxLeaseMs is a Redlock setting"));
    let e = o.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().starts_with("max_lease is a Redlock setting"), "{e}");
    client.close().await;
}

#[tokio::test]
async fn bad_urls_fail_before_connecting_without_secrets() {
    for (url, kind) in [
        ("redlock://u:hunter2@127.0.0.1:1,127.0.0.1:1", ErrorKind::InvalidArgument),
        ("redlock://u:hunter2@", ErrorKind::InvalidArgument),
        ("redis+cluster://:hunter2@a,b", ErrorKind::InvalidArgument),
        // A login memcached's text protocol cannot carry (SASL is binary-protocol only).
        ("memcached://:hunter2@h", ErrorKind::Unsupported),
    ] {
        let e = Client::connect(url).await.unwrap_err();
        assert_eq!(e.kind(), kind, "{url}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{url}: {e}");
        assert!(!format!("{:?}", ClientOptions::new(url)).contains("hunter2"));
    }
}
