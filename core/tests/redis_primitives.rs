//! Semaphores, read-write locks, leader election, reentrancy and the fair queue against real
//! servers started by the test: every test runs twice, as `<test>::single` on one redis-server
//! and `<test>::cluster` on a local three-master Redis Cluster (`on_both!`), asserting the same
//! things.
#![cfg(feature = "tokio")]

#[macro_use]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::{ErrorKind, LockOptions};
use redis::Commands;
use support::Backend;

fn fixed(ms: u64) -> LockOptions {
    LockOptions::fixed_lease(Duration::from_millis(ms))
}

/// Keys of `name` other than the fence counter (which is kept on purpose, PROTOCOL.md §5), on
/// every master.
fn live_keys(b: &Backend, name: &str) -> Vec<String> {
    let keys = b.keys(&format!("lockgate:{{{name}}}*"));
    keys.into_iter().filter(|k| !k.ends_with(":fence")).collect()
}

/// Runs `f` on a runtime that is then dropped without any cleanup: a process crash.
fn crash_after<F>(opts: ClientOptions, f: impl FnOnce(Client) -> F + Send + 'static) -> tokio::runtime::Runtime
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.spawn(async move {
        let c = opts.connect().await.unwrap();
        f(c).await;
        std::future::pending::<()>().await;
    });
    rt
}

// At most N holders at once over a thousand acquisitions, while holders crash holding permits;
// crashed permits come back within one lease.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn semaphore_caps_holders_and_recovers_crashed_permits);
async fn semaphore_caps_holders_and_recovers_crashed_permits(b: Backend) {
    let active = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut crashed = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = std::sync::mpsc::channel();
        let rt = crash_after(b.options(), move |c| async move {
            let sem = c.semaphore("pool", 3, fixed(400)).unwrap();
            let lease = sem.acquire(Duration::from_secs(10)).await.unwrap();
            tx.send(()).unwrap();
            std::mem::forget(lease);
        });
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        crashed.push(rt);
    }
    for rt in crashed {
        rt.shutdown_background();
    }
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let opts = b.options();
        let (active, peak) = (active.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let c = opts.connect().await.unwrap();
            let sem = c.semaphore("pool", 3, fixed(2000)).unwrap();
            for _ in 0..170 {
                let lease = sem.acquire(Duration::from_secs(20)).await.unwrap();
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                active.fetch_sub(1, Ordering::SeqCst);
                assert!(lease.release().await.unwrap());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) <= 3, "peak {}", peak.load(Ordering::SeqCst));
    assert!(peak.load(Ordering::SeqCst) >= 2, "permits were never shared");
    assert!(live_keys(&b, "pool").is_empty(), "{:?}", live_keys(&b, "pool"));
}

on_both!(#[tokio::test] async fn semaphore_permits_return_by_themselves);
async fn semaphore_permits_return_by_themselves(backend: Backend) {
    let rt = crash_after(backend.options(), |c| async move {
        // One handle per permit (a handle holds one lease at a time).
        for _ in 0..2 {
            let sem = c.semaphore("s", 2, fixed(500)).unwrap();
            std::mem::forget(sem.acquire(Duration::from_secs(5)).await.unwrap());
        }
    });
    let mut raw = backend.raw("lockgate:{s}:sem:holders");
    while raw.zcard::<_, usize>("lockgate:{s}:sem:holders").unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rt.shutdown_background();
    let c = backend.connect().await;
    let sem = c.semaphore("s", 2, fixed(1000)).unwrap();
    let sem2 = c.semaphore("s", 2, fixed(1000)).unwrap();
    assert!(sem.try_acquire().await.unwrap().is_none(), "both permits are taken");
    let start = Instant::now();
    let a = sem.acquire(Duration::from_secs(5)).await.unwrap();
    let b = sem2.acquire(Duration::from_secs(5)).await.unwrap();
    assert!(start.elapsed() < Duration::from_millis(1200), "{:?}", start.elapsed());
    assert!(a.fencing_token().unwrap() < b.fencing_token().unwrap());
    assert!(a.release().await.unwrap() && b.release().await.unwrap());
    assert!(live_keys(&backend, "s").is_empty());
    // Bad input changes nothing.
    assert_eq!(c.semaphore("s", 0, fixed(1000)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(c.semaphore("", 1, fixed(1000)).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

// Readers overlap; a writer never overlaps anyone; a queued writer blocks later readers.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn read_write_lock_excludes_writers);
async fn read_write_lock_excludes_writers(b: Backend) {
    let c = b.connect().await;
    let rw = c.read_write_lock("doc", LockOptions::default()).unwrap();
    // Each read hold through its own handle (a handle holds one lease at a time).
    let rw2 = c.read_write_lock("doc", LockOptions::default()).unwrap();
    let rw3 = c.read_write_lock("doc", LockOptions::default()).unwrap();
    let r1 = rw.read().acquire(Duration::from_secs(1)).await.unwrap();
    let r2 = rw2.read().acquire(Duration::from_secs(1)).await.unwrap();
    assert!(rw.write().try_acquire().await.unwrap().is_none());
    let writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().acquire(Duration::from_secs(10)).await.unwrap() }
    });
    let mut raw = b.raw("lockgate:{doc}:rw:queue");
    while raw.zcard::<_, usize>("lockgate:{doc}:rw:queue").unwrap() < 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(rw3.read().try_acquire().await.unwrap().is_none(), "a queued writer blocks new readers");
    // Every reader of a lock in use must share its writers_first (PROTOCOL.md §7): the server refuses another.
    let barging = c.read_write_lock("doc", LockOptions::default()).unwrap().with_writers_first(false);
    let refused = barging.read().try_acquire().await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");
    for r in [r1, r2] {
        assert!(r.release().await.unwrap());
    }
    let w = writer.await.unwrap();
    assert!(w.fencing_token().unwrap() > 0 && w.is_held());
    assert!(rw.read().try_acquire().await.unwrap().is_none());
    assert!(w.release().await.unwrap());
    assert!(live_keys(&b, "doc").is_empty(), "{:?}", live_keys(&b, "doc"));

    // With writers_first = false on every reader, a reader passes a queued writer.
    let first = c.read_write_lock("open", LockOptions::default()).unwrap().with_writers_first(false);
    let second = c.read_write_lock("open", LockOptions::default()).unwrap().with_writers_first(false);
    let r1 = first.read().acquire(Duration::from_secs(1)).await.unwrap();
    let writer = tokio::spawn({
        let rw = first.clone();
        async move { rw.write().acquire(Duration::from_secs(10)).await.unwrap() }
    });
    let mut raw = b.raw("lockgate:{open}:rw:queue");
    while raw.zcard::<_, usize>("lockgate:{open}:rw:queue").unwrap() < 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r2 = second.read().try_acquire().await.unwrap().expect("writers_first=false lets readers in");
    assert!(r1.release().await.unwrap() && r2.release().await.unwrap());
    assert!(writer.await.unwrap().release().await.unwrap());
    assert!(live_keys(&b, "open").is_empty(), "{:?}", live_keys(&b, "open"));

    // Stress: counters of active readers and writers never show a writer beside anyone.
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let opts = b.options();
        let (readers, writers, overlap) = (readers.clone(), writers.clone(), overlap.clone());
        tasks.push(tokio::spawn(async move {
            let c = opts.connect().await.unwrap();
            let rw = c.read_write_lock("stress", LockOptions::default()).unwrap();
            for n in 0..60 {
                if (i + n) % 3 == 0 {
                    let l = rw.write().acquire(Duration::from_secs(30)).await.unwrap();
                    if writers.fetch_add(1, Ordering::SeqCst) > 0 || readers.load(Ordering::SeqCst) > 0 {
                        overlap.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    writers.fetch_sub(1, Ordering::SeqCst);
                    l.release().await.unwrap();
                } else {
                    let l = rw.read().acquire(Duration::from_secs(30)).await.unwrap();
                    readers.fetch_add(1, Ordering::SeqCst);
                    if writers.load(Ordering::SeqCst) > 0 {
                        overlap.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    l.release().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(overlap.load(Ordering::SeqCst), 0);
    assert!(live_keys(&b, "stress").is_empty());
}

// One leader at a time with increasing terms; observers see its value; a crashed leader is
// replaced within one lease.
on_both!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn election_elects_one_leader_and_replaces_a_dead_one);
async fn election_elects_one_leader_and_replaces_a_dead_one(b: Backend) {
    let opts = LockOptions::renewed_lease(Duration::from_millis(600));
    let (tx, rx) = std::sync::mpsc::channel();
    let first = crash_after(b.options(), {
        let opts = opts.clone();
        move |c| async move {
            let e = c.election("leader", opts).unwrap();
            let lease = e.campaign("node-a", None).await.unwrap();
            tx.send(lease.fencing_token().unwrap()).unwrap();
            std::mem::forget(lease);
        }
    });
    let term_a = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let c = b.connect().await;
    let election = c.election("leader", opts.clone()).unwrap();
    let seen = election.observe().await.unwrap().expect("a leader");
    assert_eq!((seen.value.as_str(), seen.term), ("node-a", term_a));
    // Still leader well past its lease: the watchdog renews it.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(election.observe().await.unwrap().unwrap().term, term_a);
    // One attempt finds it led; a campaign without a timeout uses the election's wait_timeout.
    assert!(election.try_campaign("node-x").await.unwrap().is_none());
    let impatient = c.election("leader", opts.clone().with_wait_timeout(Some(Duration::from_millis(200)))).unwrap();
    let started = Instant::now();
    assert_eq!(impatient.campaign("node-y", None).await.unwrap_err().kind(), ErrorKind::Timeout);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let lead_b = tokio::spawn({
        let e = election.clone();
        async move { e.campaign("node-b", Some(Duration::from_secs(10))).await.unwrap() }
    });
    let c2 = b.connect().await;
    let e2 = c2.election("leader", opts.clone()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let third = tokio::spawn(async move { e2.campaign("node-c", Some(Duration::from_secs(10))).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let killed = Instant::now();
    first.shutdown_background();
    let lead_b = lead_b.await.unwrap();
    assert!(killed.elapsed() < Duration::from_millis(1500), "{:?}", killed.elapsed());
    assert!(lead_b.fencing_token().unwrap() > term_a);
    let seen = election.observe().await.unwrap().unwrap();
    assert_eq!((seen.value.as_str(), seen.term), ("node-b", lead_b.fencing_token().unwrap()));
    assert!(!third.is_finished(), "two leaders at once");
    assert!(lead_b.release().await.unwrap(), "resign");
    let c_lease = third.await.unwrap();
    assert!(c_lease.fencing_token().unwrap() > lead_b.fencing_token().unwrap());
    assert_eq!(election.observe().await.unwrap().unwrap().value, "node-c");
    // Deleting the leader's hold behind its back is reported as lost leadership.
    let mut raw = b.raw("lockgate:{leader}:elect:holders");
    let _: () = raw.del("lockgate:{leader}:elect:holders").unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(2), c_lease.lost()).await.unwrap();
    assert_eq!(lost.kind(), ErrorKind::NotHeld);
    assert!(election.observe().await.unwrap().is_none());
}

// Re-acquiring through the same reentrant handle adds a hold; only the last release frees it.
on_both!(#[tokio::test] async fn reentrant_lock_counts_holds);
async fn reentrant_lock_counts_holds(b: Backend) {
    let c = b.connect().await;
    let other = b.connect().await;
    let lock = c.reentrant_lock("re", LockOptions::default()).unwrap();
    let outer = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let inner = lock.clone().acquire(Duration::from_secs(1)).await.unwrap();
    assert_eq!(outer.fencing_token().unwrap(), inner.fencing_token().unwrap());
    assert!(inner.release().await.unwrap());
    assert!(!inner.release().await.unwrap(), "a hold is given back once");
    let probe = other.lock("re", LockOptions::default()).unwrap();
    assert!(probe.try_acquire().await.unwrap().is_none(), "still held after the inner release");
    assert!(outer.release().await.unwrap());
    let p = probe.try_acquire().await.unwrap().expect("free after the last release");
    p.release().await.unwrap();
    // A non-reentrant handle does not re-enter, nor wait for itself: ALREADY_HELD at once.
    let plain = c.lock("re", LockOptions::default()).unwrap();
    let held = plain.acquire(Duration::from_secs(1)).await.unwrap();
    assert_eq!(plain.try_acquire().await.unwrap_err().kind(), ErrorKind::AlreadyHeld);
    assert!(c.lock("re", LockOptions::default()).unwrap().try_acquire().await.unwrap().is_none());
    held.release().await.unwrap();
    assert!(c.semaphore("re", 2, LockOptions::default()).is_ok());
    assert_eq!(
        c.primitive("re", lockgate_core::Primitive::Semaphore { permits: 2 }, LockOptions::default(), true)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

// The fair lock (the mutex's queue): 16 waiters are granted in arrival order; with 5 of them
// crashed while queued the queue moves on within about one entry lease per dead waiter, ends
// empty, and every release wakes exactly one waiter.
// On a cluster the wake-ups are counted on the seed node: grants are classic publishes, which
// the cluster bus delivers to subscribers on every node.
on_both!(#[test] fn fair_queue_serves_arrival_order_and_skips_crashed_waiters);
fn fair_queue_serves_arrival_order_and_skips_crashed_waiters(b: Backend) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = b.url();
    let ttl = Duration::from_millis(300);
    let opts = LockOptions::default().with_entry_ttl(ttl);
    let holder = rt.block_on(async {
        let c = b.connect().await;
        c.lock("fair", opts.clone()).unwrap().acquire(Duration::from_secs(1)).await.unwrap()
    });
    // Count wake-ups: every message published to any client channel.
    let mut sub = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("lockgate:client:*").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut raw = b.raw("lockgate:{fair}:queue");
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut doomed = Vec::new();
    let mut live = Vec::new();
    for i in 0..16usize {
        let dies = [2usize, 5, 6, 9, 13].contains(&i);
        let order = order.clone();
        let opts = opts.clone();
        let client_opts = b.options();
        let body = async move {
            let c = client_opts.connect().await.unwrap();
            let lease = c.lock("fair", opts).unwrap().acquire(Duration::from_secs(60)).await.unwrap();
            order.lock().unwrap().push(i);
            lease.release().await.unwrap();
        };
        if dies {
            let drt = tokio::runtime::Runtime::new().unwrap();
            drt.spawn(body);
            doomed.push(drt);
        } else {
            live.push(rt.spawn(body));
        }
        while raw.zcard::<_, usize>("lockgate:{fair}:queue").unwrap() < i + 1 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for d in doomed {
        d.shutdown_background();
    }
    let start = Instant::now();
    rt.block_on(async { holder.release().await.unwrap() });
    for t in live {
        rt.block_on(t).unwrap();
    }
    let took = start.elapsed();
    let order = order.lock().unwrap().clone();
    assert_eq!(order, vec![0, 1, 3, 4, 7, 8, 10, 11, 12, 14, 15], "granted in arrival order");
    // Each dead waiter costs at most its handoff (one entry lease) plus a heartbeat third.
    assert!(took < (ttl + ttl / 3) * 5 + Duration::from_millis(1500), "{took:?}");
    // Every message is a grant to one waiter: none is woken twice, nobody is woken without a
    // grant (11 live waiters, plus dead ones granted while their entry still looked live).
    let mut tokens = std::collections::HashSet::new();
    while let Ok(m) = pubsub.get_message() {
        let payload: String = m.get_payload().unwrap();
        let mut parts = payload.split(' ');
        assert_eq!(parts.next(), Some("granted"));
        assert!(tokens.insert(parts.next().unwrap().to_string()), "a waiter was woken twice");
    }
    assert!((11..=16).contains(&tokens.len()), "{} wake-ups for 11 live waiters", tokens.len());
    assert!(live_keys(&b, "fair").is_empty(), "{:?}", live_keys(&b, "fair"));
}

// Every primitive: a timed-out waiter leaves nothing behind, and bad input is rejected.
on_both!(#[tokio::test] async fn timeouts_and_cancellation_leave_nothing_behind);
async fn timeouts_and_cancellation_leave_nothing_behind(b: Backend) {
    let c = b.connect().await;
    let sem = c.semaphore("t", 1, LockOptions::default()).unwrap();
    let held = sem.acquire(Duration::from_secs(1)).await.unwrap();
    // The waiter is another handle (one holding the permit would get ALREADY_HELD at once).
    let waiter = c.semaphore("t", 1, LockOptions::default()).unwrap();
    let e = waiter.acquire(Duration::from_millis(100)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let wait = tokio::spawn({
        let sem = waiter.clone();
        async move { sem.acquire(Duration::from_secs(30)).await }
    });
    let mut raw = b.raw("lockgate:{t}:sem:queue");
    while raw.zcard::<_, usize>("lockgate:{t}:sem:queue").unwrap() < 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    wait.abort();
    let _ = wait.await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(raw.zcard::<_, usize>("lockgate:{t}:sem:queue").unwrap(), 0, "cancelled waiter removed");
    held.release().await.unwrap();
    let rw = c.read_write_lock("t", LockOptions::default()).unwrap();
    let w = rw.write().acquire(Duration::from_secs(1)).await.unwrap();
    assert_eq!(rw.read().acquire(Duration::from_millis(50)).await.unwrap_err().kind(), ErrorKind::Timeout);
    w.release().await.unwrap();
    let e = c.election("t", LockOptions::default()).unwrap();
    let big = "x".repeat(5000);
    assert_eq!(e.campaign(&big, None).await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(live_keys(&b, "t").is_empty(), "{:?}", live_keys(&b, "t"));
}
