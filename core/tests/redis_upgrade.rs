//! A rolling upgrade from protocol version 17 (18 runs the same scripts) to 19 (issue 30): clients running the version-17
//! mutex scripts and clients of this version contend for the same locks on one server.
//!
//! The old client is the version-17 ACQUIRE and RELEASE exactly as they shipped, kept as
//! fixtures (`tests/fixtures/redis_v17/`, taken from this repository's history at `b0e5430`, the
//! helpers both scripts began with in `prelude.lua`;
//! their digests are those of PROTOCOL.md version 17, checked below), driven here the way the
//! version-17 engine drives them: ACQUIRE in `wait` mode to queue, its client channel
//! subscribed first, `granted <token> <fence>` received there, RELEASE to give the lock up.
//! The new clients are lockgate's own. Both directions of every handoff are covered: old → new
//! → old → new in one FIFO queue of mixed waiters, and a new holder's release with an old
//! waiter and a new one queued. Asserted: mutual exclusion (the lock key names exactly the
//! expected holder at each step, and a waiter further back is not woken), FIFO order, fencing
//! tokens strictly increasing across every grant whichever version made it, and nothing left
//! behind but the fence key.
#![cfg(feature = "tokio")]

#[macro_use]
mod support;

use std::time::Duration;

use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::LockOptions;
use redis::Commands;
use support::RedisServer;

const ACQUIRE_V17: &str = concat!(include_str!("fixtures/redis_v17/prelude.lua"), include_str!("fixtures/redis_v17/acquire.lua"));
const RELEASE_V17: &str = concat!(include_str!("fixtures/redis_v17/prelude.lua"), include_str!("fixtures/redis_v17/release.lua"));

const LOCK: &str = "lockgate:{up}";
const QUEUE: &str = "lockgate:{up}:queue";

/// A version-17 client of one lock: its own token, channel and label.
struct OldClient {
    conn: redis::Connection,
    token: String,
    channel: String,
    label: String,
}

impl OldClient {
    fn new(server: &RedisServer, id: &str) -> Self {
        OldClient {
            conn: server.raw(),
            token: format!("{id:0>32}"),
            channel: format!("lockgate:client:{id:0>16}"),
            label: format!("old {id}"),
        }
    }

    /// Version-17 ACQUIRE: `Some(fence)` when held, `None` when busy (queued in `wait` mode).
    fn acquire(&mut self, mode: &str) -> Option<u64> {
        let reply: (i64, String, i64) = redis::Script::new(ACQUIRE_V17)
            .key(LOCK)
            .key(format!("{LOCK}:fence"))
            .key(QUEUE)
            .key(format!("{LOCK}:waiters"))
            .arg(&self.token)
            .arg(30_000)
            .arg(mode)
            .arg(10_000)
            .arg(&self.channel)
            .arg(3_600_000)
            .arg(&self.label)
            .invoke(&mut self.conn)
            .unwrap();
        (reply.0 == 1).then(|| reply.1.parse().unwrap())
    }

    /// Version-17 RELEASE: whether it held the lock.
    fn release(&mut self) -> bool {
        let held: i64 = redis::Script::new(RELEASE_V17)
            .key(LOCK)
            .key(format!("{LOCK}:fence"))
            .key(QUEUE)
            .key(format!("{LOCK}:waiters"))
            .arg(&self.token)
            .arg(3_600_000)
            .invoke(&mut self.conn)
            .unwrap();
        held == 1
    }
}

/// A subscription to an old client's channel, made before it queues (as the engine does).
/// (A `PubSub` unsubscribes when dropped, so it lives as long as the test: its connection is
/// leaked, one per test.)
struct Inbox(redis::PubSub<'static>);

impl Inbox {
    fn open(server: &RedisServer, channel: &str) -> Self {
        let conn = Box::leak(Box::new(server.raw()));
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut pubsub = conn.as_pubsub();
        pubsub.subscribe(channel).unwrap();
        Inbox(pubsub)
    }

    /// The next `granted` message's (token, fence), or `None` within the read timeout.
    fn next(&mut self) -> Option<(String, u64)> {
        let msg = match self.0.get_message() {
            Ok(m) => m,
            Err(e) if e.is_timeout() => return None,
            Err(e) => panic!("{e}"),
        };
        let text: String = msg.get_payload().unwrap();
        let mut words = text.split(' ');
        assert_eq!(words.next(), Some("granted"), "{text}");
        Some((
            words.next().unwrap().to_string(),
            words.next().unwrap().parse().unwrap(),
        ))
    }
}

async fn new_client(server: &RedisServer) -> Client {
    ClientOptions::new(&server.url()).connect().await.unwrap()
}

/// A new client's acquire, waiting in the background.
fn wait_new(client: &Client) -> tokio::task::JoinHandle<Lease> {
    let lock = client.lock("up", LockOptions::default()).unwrap();
    tokio::spawn(async move { lock.acquire(Duration::from_secs(30)).await.unwrap() })
}

async fn queued(raw: &mut redis::Connection, n: usize) {
    while raw.zcard::<_, usize>(QUEUE).unwrap() < n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn holder(raw: &mut redis::Connection) -> Option<String> {
    raw.get(LOCK).unwrap()
}

#[test]
fn fixtures_are_the_version_17_scripts() {
    let sha = |s: &str| sha1_smol::Sha1::from(s).digest().to_string();
    assert_eq!(sha(ACQUIRE_V17), "39e1e7fdfe5141d9f1de97d8b4e5c79e2f239d4d");
    assert_eq!(sha(RELEASE_V17), "859be6b399d026c0548624e46f9b705443f9c0da");
}

// Old holder → new waiter → old waiter → new waiter: each release, whichever version runs it,
// wakes exactly the next in line, and every grant's token is larger than the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_and_new_clients_share_one_fifo_queue() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let mut old_holder = OldClient::new(&server, "a1");
    let mut old_waiter = OldClient::new(&server, "b2");
    let mut inbox = Inbox::open(&server, &old_waiter.channel);
    let (n1, n2) = (new_client(&server).await, new_client(&server).await);

    let f0 = old_holder.acquire("try").expect("a free lock is granted");
    let first = wait_new(&n1);
    queued(&mut raw, 1).await;
    assert_eq!(
        old_waiter.acquire("wait"),
        None,
        "held by the old client: queued"
    );
    queued(&mut raw, 2).await;
    let third = wait_new(&n2);
    queued(&mut raw, 3).await;
    // Arrival order in the one queue, whichever version queued.
    let order: Vec<String> = raw.zrange(QUEUE, 0, -1).unwrap();
    assert_eq!(order[1], old_waiter.token);

    // Old release → the new waiter at the head, and nobody else.
    assert!(old_holder.release());
    let lease1 = first.await.unwrap();
    let f1 = lease1.fencing_token().unwrap();
    assert!(f1 > f0, "{f1} > {f0}");
    assert_eq!(inbox.next(), None, "the old waiter is second: not woken");
    assert!(!third.is_finished());
    assert_eq!(
        old_waiter.acquire("wait"),
        None,
        "a heartbeat while the new client holds"
    );

    // New release → the old waiter, by its channel, with a larger token.
    assert!(lease1.release().await.unwrap());
    let (token, f2) = inbox.next().expect("the old waiter is granted");
    assert_eq!(token, old_waiter.token);
    assert!(f2 > f1, "{f2} > {f1}");
    assert_eq!(holder(&mut raw).as_deref(), Some(old_waiter.token.as_str()));
    assert_eq!(
        old_waiter.acquire("wait"),
        Some(f2),
        "the old client confirms its grant"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !third.is_finished(),
        "the new waiter waits for the old holder"
    );

    // Old release → the last new waiter.
    assert!(old_waiter.release());
    let lease3 = third.await.unwrap();
    let f3 = lease3.fencing_token().unwrap();
    assert!(f3 > f2, "{f3} > {f2}");
    assert!(lease3.release().await.unwrap());

    assert_eq!(holder(&mut raw), None);
    for k in [QUEUE, "lockgate:{up}:waiters"] {
        assert!(!raw.exists::<_, bool>(k).unwrap(), "{k} left behind");
    }
    // A later old grant still gets a larger token than every new one.
    let f4 = old_holder.acquire("try").unwrap();
    assert!(f4 > f3, "{f4} > {f3}");
    assert!(old_holder.release());
}

// A new holder hands over to an old waiter ahead of a new one, and an old client's try on a
// lock a new client holds is refused; the new holder's label and the old waiter's label are
// both kept while they hold or wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_holder_hands_over_to_old_waiter() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let (n1, n2) = (new_client(&server).await, new_client(&server).await);
    let mut old = OldClient::new(&server, "c3");
    let mut inbox = Inbox::open(&server, &old.channel);

    let lease = n1
        .lock("up", LockOptions::default())
        .unwrap()
        .acquire(Duration::from_secs(1))
        .await
        .unwrap();
    let f0 = lease.fencing_token().unwrap();
    assert_eq!(old.acquire("try"), None, "mutual exclusion: refused");
    assert_eq!(old.acquire("wait"), None);
    queued(&mut raw, 1).await;
    let next_new = wait_new(&n2);
    queued(&mut raw, 2).await;
    let fields: Vec<String> = raw.hkeys("lockgate:{up}:waiters").unwrap();
    assert!(fields.contains(&format!("l:{}", old.token)), "{fields:?}");
    assert_eq!(
        fields.iter().filter(|f| f.starts_with("l:")).count(),
        3,
        "holder and both waiters labelled: {fields:?}"
    );

    assert!(lease.release().await.unwrap());
    let (token, f1) = inbox.next().expect("the old waiter is granted");
    assert_eq!(token, old.token);
    assert!(f1 > f0, "{f1} > {f0}");
    assert_eq!(old.acquire("wait"), Some(f1));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !next_new.is_finished(),
        "mutual exclusion: the new waiter still waits"
    );

    assert!(old.release());
    let last = next_new.await.unwrap();
    assert!(last.fencing_token().unwrap() > f1);
    assert!(last.release().await.unwrap());
    assert_eq!(holder(&mut raw), None);
    assert!(
        !raw.exists::<_, bool>("lockgate:{up}:waiters").unwrap(),
        "no label left behind"
    );
}
