//! A handle never waits for itself (issue 13, item 3), against a real redis-server: a
//! non-reentrant handle that holds a live lease fails `acquire`, `acquire_default` and
//! `try_acquire` at once with `ALREADY_HELD` and changes nothing on the server; once the lease
//! is released, dropped or lost it acquires again. Mutex, read half, semaphore, election and
//! Redlock; reentrant handles keep re-entering.
#![cfg(feature = "tokio")]

mod support;

use std::time::{Duration, Instant};

use lockgate_core::connect::redlock_url;
use lockgate_core::native::{Client, ClientOptions, Owner};
use lockgate_core::{Error, ErrorKind, LockOptions};
use support::RedisServer;

/// Far above what a refusal takes, far below the waits it replaces.
const PROMPT: Duration = Duration::from_millis(500);

fn assert_already_held<T: std::fmt::Debug>(r: Result<T, Error>, started: Instant, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::AlreadyHeld, "{what}: {e}");
    assert_eq!(e.code(), "ALREADY_HELD");
    assert!(!e.retryable(), "{what}");
    assert!(started.elapsed() < PROMPT, "{what} took {:?}", started.elapsed());
}

/// Every key of lockgate on `server`, with its value's type and TTL state, sorted: what a
/// refused acquire must leave exactly as it was.
fn server_state(server: &RedisServer) -> Vec<(String, String)> {
    let mut c = server.raw();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("lockgate:*").query(&mut c).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut c).unwrap();
            (k, format!("{dump:?}"))
        })
        .collect()
}

/// Tries all three acquire forms on `lock` (which holds a live lease): each refuses at once.
async fn refuses_all_forms(lock: &lockgate_core::native::Lock, server: &RedisServer) {
    let before = server_state(server);
    let t = Instant::now();
    assert_already_held(lock.try_acquire().await, t, "try_acquire");
    let t = Instant::now();
    assert_already_held(lock.acquire(Duration::from_secs(10)).await, t, "acquire(10 s)");
    let t = Instant::now();
    // wait_timeout None: acquire_default would wait for ever on itself.
    assert_already_held(lock.acquire_default().await, t, "acquire_default");
    let t = Instant::now();
    assert_already_held(lock.clone().acquire(Duration::from_secs(10)).await, t, "a clone");
    assert_eq!(server_state(server), before, "a refused acquire changes nothing on the server");
}

#[tokio::test]
async fn mutex_handle_refuses_to_wait_for_itself() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("self", LockOptions::default()).unwrap();

    let lease = lock.acquire(Duration::from_secs(5)).await.unwrap();
    refuses_all_forms(&lock, &server).await;
    assert!(lease.is_held(), "the refusal leaves the lease alone");

    // Released: the handle acquires again at once.
    assert!(lease.release().await.unwrap());
    let lease = lock.try_acquire().await.unwrap().expect("free after release");

    // Dropped: likewise, without waiting for the background release.
    drop(lease);
    let lease = lock.acquire(Duration::from_secs(5)).await.expect("free after drop");

    // Lost (deleted behind its back, noticed by the watchdog): the handle acquires again.
    let renewed = client.lock("lost", LockOptions::renewed_lease(Duration::from_millis(300))).unwrap();
    let lost = renewed.acquire(Duration::from_secs(5)).await.unwrap();
    let mut c = server.raw();
    let keys: Vec<String> = redis::cmd("KEYS").arg("lockgate:{lost}*").query(&mut c).unwrap();
    for k in keys {
        let _: () = redis::cmd("DEL").arg(&k).query(&mut c).unwrap();
    }
    tokio::time::timeout(Duration::from_secs(3), lost.lost()).await.expect("loss noticed");
    let again = renewed.acquire(Duration::from_secs(5)).await.expect("free after loss");
    assert!(again.fencing_token().unwrap() > lost.fencing_token().unwrap());
    drop(lease);
}

// Two acquires through one handle wait behind another holder: the first to win holds, the
// other ends with ALREADY_HELD as soon as it does, instead of waiting out its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_through_one_handle_end_when_one_wins() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = client.lock("race", LockOptions::default()).unwrap();
    let held = other.acquire(Duration::from_secs(5)).await.unwrap();

    let lock = client.lock("race", LockOptions::default()).unwrap();
    let (a, b) = (lock.clone(), lock.clone());
    let ta = tokio::spawn(async move { a.acquire(Duration::from_secs(20)).await });
    let tb = tokio::spawn(async move { b.acquire(Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    held.release().await.unwrap();
    let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
    assert!(released.elapsed() < Duration::from_secs(3), "both ended soon: {:?}", released.elapsed());
    let (won, refused) = match (ra, rb) {
        (Ok(l), Err(e)) | (Err(e), Ok(l)) => (l, e),
        other => panic!("one wins, one is refused: {other:?}"),
    };
    assert_eq!(refused.kind(), ErrorKind::AlreadyHeld, "{refused}");
    assert!(won.is_held());
    // The refused wait left no queue entry behind: a stranger gets the lock right after.
    won.release().await.unwrap();
    let stranger = client.lock("race", LockOptions::default()).unwrap();
    assert!(stranger.try_acquire().await.unwrap().is_some());
}

// Issue 23, item 3: owners sharing one handle (threads, tasks) wait their turn instead of
// being refused; each owner still never waits for itself, and its refusal says which owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_owners_of_one_handle_wait_their_turn() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("owners", LockOptions::default()).unwrap();
    let first = lock.as_owner(Owner::thread(1)).acquire(Duration::from_secs(5)).await.unwrap();

    // The same owner: ALREADY_HELD at once, naming the thread; nothing changes on the server.
    let before = server_state(&server);
    let t = Instant::now();
    let again = lock.as_owner(Owner::thread(1)).acquire(Duration::from_secs(10)).await;
    assert_already_held(again.as_ref().map(|_| ()).map_err(Clone::clone), t, "the same thread");
    assert!(again.unwrap_err().to_string().contains("this thread already holds"));
    assert_eq!(server_state(&server), before);

    // Other owners queue behind it and are served one at a time, tokens increasing.
    let waiters: Vec<_> = (2..6u64)
        .map(|n| {
            let me = lock.as_owner(if n % 2 == 0 { Owner::thread(n) } else { Owner::task(n) });
            tokio::spawn(async move {
                let lease = me.acquire(Duration::from_secs(20)).await?;
                let token = lease.fencing_token().unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert!(lease.release().await?, "held until released");
                Ok::<u64, Error>(token)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut last = first.fencing_token().unwrap();
    first.release().await.unwrap();
    let mut tokens = Vec::new();
    for w in waiters {
        tokens.push(w.await.unwrap().expect("another owner waits its turn"));
    }
    tokens.sort();
    for t in tokens {
        assert!(t > last, "tokens increase");
        last = t;
    }

    // A task owner refused while it holds, with a message naming the task.
    let task = lock.as_owner(Owner::task(9));
    let held = task.acquire(Duration::from_secs(5)).await.unwrap();
    let e = task.try_acquire().await.unwrap_err();
    assert!(e.to_string().contains("this task already holds"), "{e}");
    drop(held);
}

#[tokio::test]
async fn read_half_and_semaphore_handles_hold_one_lease() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();

    let rw = client.read_write_lock("rw", LockOptions::default()).unwrap();
    let read = rw.read().acquire(Duration::from_secs(5)).await.unwrap();
    refuses_all_forms(rw.read(), &server).await;
    // Another handle's read hold is shared as always.
    let rw2 = client.read_write_lock("rw", LockOptions::default()).unwrap();
    let read2 = rw2.read().try_acquire().await.unwrap().expect("readers share");
    drop((read, read2));

    let sem = client.semaphore("sem", 2, LockOptions::default()).unwrap();
    let p1 = sem.acquire(Duration::from_secs(5)).await.unwrap();
    refuses_all_forms(&sem, &server).await;
    // The second permit takes a second handle.
    let sem2 = client.semaphore("sem", 2, LockOptions::default()).unwrap();
    let p2 = sem2.try_acquire().await.unwrap().expect("second permit on a second handle");
    assert!(p1.is_held() && p2.is_held());
    p1.release().await.unwrap();
    assert!(sem.try_acquire().await.unwrap().is_some(), "free after release");
}

#[tokio::test]
async fn reentrant_handles_still_reenter() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.reentrant_lock("re", LockOptions::default()).unwrap();
    let first = lock.acquire(Duration::from_secs(5)).await.unwrap();
    let second = lock.try_acquire().await.unwrap().expect("re-entered");
    let third = lock.acquire_default().await.unwrap();
    assert_eq!(first.fencing_token().unwrap(), second.fencing_token().unwrap());
    assert_eq!(first.fencing_token().unwrap(), third.fencing_token().unwrap());
    drop((first, second, third));
}

#[tokio::test]
async fn an_election_leads_at_most_once() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let election = client.election("lead", LockOptions::default()).unwrap();
    let term = election.campaign("a", Some(Duration::from_secs(5))).await.unwrap();
    let t = Instant::now();
    assert_already_held(election.campaign("a", Some(Duration::from_secs(10))).await, t, "campaign");
    let t = Instant::now();
    assert_already_held(election.try_campaign("b").await, t, "try_campaign");
    let t = Instant::now();
    assert_already_held(election.clone().campaign("c", None).await, t, "a clone's campaign");
    // Another candidate (another Election) just finds it led.
    let rival = client.election("lead", LockOptions::default()).unwrap();
    assert!(rival.try_campaign("r").await.unwrap().is_none());
    // Resigned: the same election campaigns again.
    term.release().await.unwrap();
    let next = election.campaign("a", Some(Duration::from_secs(5))).await.unwrap();
    assert!(next.fencing_token().unwrap() > term.fencing_token().unwrap());
}

#[tokio::test]
async fn redlock_handle_refuses_to_wait_for_itself() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let mut o = ClientOptions::new(redlock_url(&urls).unwrap());
    o.max_lease = Some(Duration::from_millis(1000));
    let redlock: Client = o.connect().await.unwrap();
    // Fresh masters refuse grants for max_lease after their start (the restart rule).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let lock = redlock.lock("self", LockOptions::renewed_lease(Duration::from_millis(900))).unwrap();
    let lease = lock.acquire(Duration::from_secs(5)).await.unwrap();
    let before: Vec<_> = servers.iter().map(server_state).collect();
    let t = Instant::now();
    assert_already_held(lock.try_acquire().await, t, "try_acquire");
    let t = Instant::now();
    assert_already_held(lock.acquire(Duration::from_secs(10)).await, t, "acquire");
    let t = Instant::now();
    assert_already_held(lock.clone().acquire_default().await, t, "acquire_default");
    let after: Vec<_> = servers.iter().map(server_state).collect();
    assert_eq!(after, before, "a refused acquire changes nothing on the masters");
    assert!(lease.is_held());
    assert!(lease.release().await.unwrap());
    let again = lock.acquire(Duration::from_secs(5)).await.expect("free after release");
    drop(again);
    let _third = lock.acquire(Duration::from_secs(5)).await.expect("free after drop");
}
