//! Every primitive on a local three-master Redis Cluster (started by the test): scripts are
//! routed by their lock's slot, grants are published across the cluster bus, and every key of a
//! lock shares one slot, so CROSSSLOT cannot happen.
//!
//! The full mutex and fair-lock suites also run on a cluster (`redis_mutex.rs` and
//! `redis_primitives.rs`, the `::cluster` half of each test); the tests here cover what is
//! cluster-specific: slots of every key, locks of one client spread over several masters, and
//! a node whose connection goes silent (issue 13 item 6).
#![cfg(feature = "tokio")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::backend::redis::keys::{MutexKeys, SharedKeys};
use lockgate_core::{ErrorKind, LockOptions};
use redis::Commands;
use support::RedisCluster;

async fn connect(cluster: &RedisCluster) -> Client {
    let mut o = ClientOptions::new(cluster.url());
    o.cluster = true;
    o.connect().await.unwrap()
}

fn slot(cluster: &RedisCluster, key: &str) -> i64 {
    cluster.slot(key)
}

/// Asserts that every key of every primitive named `name` is in one slot (the server's
/// `CLUSTER KEYSLOT`), and returns it.
fn assert_one_slot(cluster: &RedisCluster, name: &str) -> i64 {
    let mutex = MutexKeys::new("lockgate:", name);
    let s = slot(cluster, &mutex.lock);
    for k in mutex.all() {
        assert_eq!(slot(cluster, k), s, "{k} of lock {name:?}");
    }
    for kind in ["sem", "rw", "elect"] {
        for k in SharedKeys::new("lockgate:", kind, name).all() {
            assert_eq!(slot(cluster, k), s, "{k} of lock {name:?}");
        }
    }
    s
}

/// Whether any node of the cluster still has a key of lock `name` other than a fence counter.
fn leftovers(cluster: &RedisCluster, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    for n in &cluster.nodes {
        let mut c = n.raw();
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("lockgate:{{{name}}}*")).query(&mut c).unwrap();
        found.extend(keys.into_iter().filter(|k| !k.ends_with(":fence")));
    }
    found
}

// Names whose slots land on different masters.
const NAMES: [&str; 4] = ["orders", "users:{7}", "ünïcode", "inventory"];

#[test]
fn every_key_of_a_lock_shares_one_slot() {
    let cluster = RedisCluster::start();
    let mut masters = std::collections::HashSet::new();
    for name in NAMES {
        let s = assert_one_slot(&cluster, name);
        masters.insert(s * 3 / 16384);
    }
    assert!(masters.len() >= 2, "the test names should span masters");
}

// Names that look like hash tags, or contain stray braces, still keep every key of a lock in one
// slot: the first `}` after the tag's `{` is inside `{N}`, so the tag is a non-empty prefix of
// `N` shared by every key. A name starting with `}` would make that tag empty (Redis would then
// hash each whole key, and a script would hit CROSSSLOT), so such names are refused before any
// network call. Every primitive is then used with each accepted name on the cluster: a CROSSSLOT
// error would fail the acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brace_names_keep_one_slot() {
    let cluster = RedisCluster::start();
    let c = connect(&cluster).await;
    let accepted = ["a{b}c", "{}", "{", "{{}}", "x}{", "a}b{c", "{a}{b}", "{}}", "{7}:orders", "a{}b"];
    let refused = ["}", "}{", "}}", "}a{b}"];
    for name in accepted {
        assert_one_slot(&cluster, name);
        let lease = c.lock(name, LockOptions::default()).unwrap().acquire(Duration::from_secs(1)).await.unwrap();
        assert!(lease.release().await.unwrap(), "{name:?}");
        let permit = c.semaphore(name, 2, LockOptions::default()).unwrap().acquire(Duration::from_secs(1)).await.unwrap();
        assert!(permit.release().await.unwrap(), "{name:?}");
        let rw = c.read_write_lock(name, LockOptions::default()).unwrap();
        let r = rw.read().acquire(Duration::from_secs(1)).await.unwrap();
        assert!(rw.write().try_acquire().await.unwrap().is_none(), "{name:?}");
        assert!(r.release().await.unwrap(), "{name:?}");
        let e = c.election(name, LockOptions::default()).unwrap();
        let lead = e.campaign("me", None).await.unwrap();
        assert_eq!(e.observe().await.unwrap().unwrap().term, lead.fencing_token().unwrap(), "{name:?}");
        assert!(lead.release().await.unwrap(), "{name:?}");
    }
    for name in refused {
        for r in [
            c.lock(name, LockOptions::default()).map(|_| ()),
            c.semaphore(name, 2, LockOptions::default()).map(|_| ()),
            c.read_write_lock(name, LockOptions::default()).map(|_| ()),
            c.election(name, LockOptions::default()).map(|_| ()),
        ] {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidArgument, "{name:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_and_fair_queue_on_a_cluster() {
    let cluster = RedisCluster::start();
    // Mutual exclusion on locks owned by different masters, several clients each.
    let active = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let mut tasks = Vec::new();
    for i in 0..4 {
        let c = connect(&cluster).await;
        let active = active.clone();
        tasks.push(tokio::spawn(async move {
            let lock = c.lock(NAMES[i % 2], LockOptions::default()).unwrap();
            let mut last = 0;
            for _ in 0..25 {
                let lease = lock.acquire(Duration::from_secs(20)).await.unwrap();
                assert!(lease.fencing_token().unwrap() > last);
                last = lease.fencing_token().unwrap();
                assert_eq!(active[i % 2].fetch_add(1, Ordering::SeqCst), 0, "two holders of one lock");
                tokio::task::yield_now().await;
                active[i % 2].fetch_sub(1, Ordering::SeqCst);
                assert!(lease.release().await.unwrap());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // FIFO handoff with targeted wake-ups across the cluster bus.
    let c = connect(&cluster).await;
    let lock = c.lock("inventory", LockOptions::default()).unwrap();
    let first = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let order = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let c = connect(&cluster).await;
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let lease = c.lock("inventory", LockOptions::default()).unwrap().acquire(Duration::from_secs(20)).await.unwrap();
            order.lock().await.push(i);
            lease.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    first.release().await.unwrap();
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(*order.lock().await, (0..6).collect::<Vec<_>>());
    // A timed-out waiter leaves nothing; renewals of locks on different masters are batched.
    let held = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let e = c.lock("inventory", LockOptions::default()).unwrap().acquire(Duration::from_millis(100)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let short = LockOptions::renewed_lease(Duration::from_millis(300));
    let a = c.lock("orders", short.clone()).unwrap().acquire(Duration::from_secs(1)).await.unwrap();
    let b = c.lock("users:{7}", short).unwrap().acquire(Duration::from_secs(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(a.is_held() && b.is_held(), "renewed past the lease on two masters");
    for l in [held, a, b] {
        assert!(l.release().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    for name in NAMES {
        assert!(leftovers(&cluster, name).is_empty(), "{:?}", leftovers(&cluster, name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_primitives_on_a_cluster() {
    let cluster = RedisCluster::start();
    let c = connect(&cluster).await;
    let other = connect(&cluster).await;
    // One handle per permit (a handle holds one lease at a time).
    let sem = c.semaphore("orders", 2, LockOptions::default()).unwrap();
    let sem2 = c.semaphore("orders", 2, LockOptions::default()).unwrap();
    let (p1, p2) = (sem.acquire(Duration::from_secs(1)).await.unwrap(), sem2.acquire(Duration::from_secs(1)).await.unwrap());
    assert!(other.semaphore("orders", 2, LockOptions::default()).unwrap().try_acquire().await.unwrap().is_none());
    let waiter = tokio::spawn({
        let other = other.clone();
        async move { other.semaphore("orders", 2, LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    p1.release().await.unwrap();
    let p3 = waiter.await.unwrap();
    assert!(p3.fencing_token().unwrap() > p2.fencing_token().unwrap());
    for p in [p2, p3] {
        p.release().await.unwrap();
    }
    let rw = c.read_write_lock("users:{7}", LockOptions::default()).unwrap();
    let r = rw.read().acquire(Duration::from_secs(1)).await.unwrap();
    assert!(rw.write().try_acquire().await.unwrap().is_none());
    r.release().await.unwrap();
    let e = c.election("ünïcode", LockOptions::default()).unwrap();
    let lead = e.campaign("node-1", None).await.unwrap();
    let seen = other.election("ünïcode", LockOptions::default()).unwrap().observe().await.unwrap().unwrap();
    assert_eq!((seen.value.as_str(), seen.term), ("node-1", lead.fencing_token().unwrap()));
    lead.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for name in NAMES {
        assert!(leftovers(&cluster, name).is_empty(), "{:?}", leftovers(&cluster, name));
    }
}

/// `count` lock names (with `prefix`) whose slots belong to master `node`.
fn names_on(cluster: &RedisCluster, node: usize, prefix: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|k| format!("{prefix}-{k}"))
        .filter(|name| cluster.owner(&MutexKeys::new("lockgate:", name).lock) == node)
        .take(count)
        .collect()
}

// Issue 13 item 6 on a cluster. Every node is reached through a proxy (the nodes announce the
// proxies' ports); one node's proxy then stops forwarding on its open connections without
// closing them, as a hung proxy or a frozen host would, while new connections pass. The same
// client recovers: its first call on that node waits out one response timeout (1 s), the
// cluster connection is replaced (a reconnect on loopback takes milliseconds), and the call's
// retry goes through; the bound of 3 s is that plus the engine's retry pause, with margin. A
// waiter queued across the silence is woken by the release (it subscribes again), and a lease
// held across it is honest: held on the server if it says held, or reported lost.
// Without the replacement every call on that node's slots times out for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_connection_is_replaced() {
    const SILENT: usize = 1;
    let cluster = RedisCluster::start();
    let proxies = cluster.behind_proxies().await;
    let mut o = ClientOptions::new(proxies[0].url());
    o.cluster = true;
    o.response_timeout = Duration::from_secs(1);
    o.connect_timeout = Duration::from_secs(1);
    let client = o.connect().await.unwrap();
    // A single-server client straight to the silent node's own port (it owns the slots of
    // these names, so the scripts run there; its grants reach the cluster over the bus).
    let direct = lockgate_core::native::Client::connect(&cluster.nodes[SILENT].url()).await.unwrap();
    let names = names_on(&cluster, SILENT, "silent", 8);
    let (kept_name, queued_name, other_name) = (&names[0], &names[1], &names[2]);

    let kept = client.lock(kept_name, LockOptions::renewed_lease(Duration::from_secs(3))).unwrap();
    let kept = kept.acquire(Duration::from_secs(5)).await.unwrap();
    let blocked = direct.lock(queued_name, LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let waiter = tokio::spawn({
        let lock = client.lock(queued_name, LockOptions::default()).unwrap();
        async move { lock.acquire(Duration::from_secs(30)).await }
    });
    let mut raw = cluster.nodes[SILENT].raw();
    let queue = MutexKeys::new("lockgate:", queued_name).queue;
    while raw.zcard::<_, usize>(&queue).unwrap() < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    proxies[SILENT].silence();
    let silent_at = std::time::Instant::now();
    let lease = client.lock(other_name, LockOptions::default()).unwrap().acquire(Duration::from_secs(8)).await;
    let recovered = silent_at.elapsed();
    let lease = lease.expect("recovered after the silence");
    assert!(recovered < Duration::from_secs(3), "recovered after {recovered:?}");
    assert!(lease.release().await.unwrap());
    // And keeps working on that node: more locks, one after another.
    for name in &names[3..] {
        let lease = client.lock(name, LockOptions::default()).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
        assert!(lease.release().await.unwrap(), "{name}");
    }

    let released_at = std::time::Instant::now();
    assert!(blocked.release().await.unwrap());
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("waiter woken").unwrap();
    let woken = woken.expect("the waiter got the lock");
    assert!(released_at.elapsed() < Duration::from_secs(3), "woken after {:?}", released_at.elapsed());
    assert!(woken.release().await.unwrap());

    tokio::time::sleep(Duration::from_millis(1500)).await;
    if kept.is_held() {
        let pttl: i64 = raw.pttl(&MutexKeys::new("lockgate:", kept_name).lock).unwrap();
        assert!(pttl > 0, "a lease that says held is held on the server (pttl {pttl})");
        assert!(kept.release().await.unwrap(), "and its release finds it");
    } else {
        let why = kept.lost_reason().expect("a lease that is not held says why");
        assert!(matches!(why.kind(), ErrorKind::Connection | ErrorKind::NotHeld | ErrorKind::Timeout), "{why}");
    }
    client.close().await;
    direct.close().await;
}

// A frozen node (its open connections and every new one stay silent), here the seed node, does
// not cut the same client off the healthy nodes: the call on the frozen node times out and
// starts a replacement of the cluster connection, which cannot connect through the frozen seed,
// so the client keeps using its connection to the healthy nodes meanwhile and afterwards
// (replacing a silent connection must never make things worse than keeping it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_seed_node_leaves_the_others_usable() {
    const FROZEN: usize = 0;
    let cluster = RedisCluster::start();
    let proxies = cluster.behind_proxies().await;
    let mut o = ClientOptions::new(proxies[FROZEN].url());
    o.cluster = true;
    o.response_timeout = Duration::from_secs(1);
    o.connect_timeout = Duration::from_secs(1);
    let client = o.connect().await.unwrap();
    let frozen = names_on(&cluster, FROZEN, "frozen", 1).remove(0);
    let healthy = names_on(&cluster, 2, "healthy", 1).remove(0);
    let lock = client.lock(&healthy, LockOptions::default()).unwrap();
    // Connected and subscribed before the freeze (the client's channel may live on any node).
    assert!(lock.acquire(Duration::from_secs(1)).await.unwrap().release().await.unwrap());

    proxies[FROZEN].freeze();
    let e = client.lock(&frozen, LockOptions::default()).unwrap().acquire(Duration::from_millis(1500)).await.unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout), "{e}");
    // Through the replacement attempt (up to connect_timeout) and after it failed, the healthy
    // node answers every call at once.
    let until = std::time::Instant::now() + Duration::from_millis(2500);
    while std::time::Instant::now() < until {
        let started = std::time::Instant::now();
        let lease = lock.acquire(Duration::from_secs(2)).await.expect("the healthy node answers");
        assert!(lease.release().await.unwrap());
        assert!(started.elapsed() < Duration::from_millis(500), "a healthy call took {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.close().await;
}
