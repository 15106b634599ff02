//! The one client family over a real ZooKeeper server from the project's test-server launcher:
//! `ClientOptions::new("zookeeper://...").connect()`, then a mutex, a read-write lock, a
//! semaphore and an election acquired, waited for, released and observed end to end through the
//! native driver and the ZooKeeper transport, with fencing tokens (creation zxids) increasing;
//! nodes live under the URL's chroot and none is left once released or once the clients close. A
//! holder whose server goes silent is told it lost the lock within the session timeout, and the
//! next holder's token is larger.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::time::Duration;

use lockgate_core::connect::Spelling;
use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(10);

/// A chroot no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("/lg-{tag}-{}-{t}", std::process::id())
}

async fn connect(url: &str) -> Client {
    ClientOptions::new(url).connect().await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("ZooKeeper grants carry a fencing token (the node's czxid)")
}

/// Every node under `path` (itself included) owned by a session: (path, owner).
async fn ephemerals(zk: &zk::Client, path: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    let mut todo = vec![path.to_string()];
    while let Some(p) = todo.pop() {
        let Ok((children, stat)) = zk.get_children(&p).await else { continue };
        if stat.ephemeral_owner != 0 {
            found.push((p.clone(), stat.ephemeral_owner));
        }
        for c in children {
            todo.push(if p == "/" { format!("/{c}") } else { format!("{p}/{c}") });
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_ensemble_is_a_connection_error_with_or_without_tls() {
    // zookeeper+tls:// itself is tested against a TLS server in zookeeper_tls.rs.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for scheme in ["zookeeper", "zookeeper+tls"] {
        let mut options = ClientOptions::new(format!("{scheme}://app:pw-secret@127.0.0.1:{port}/x"));
        options.connect_timeout = Duration::from_millis(500);
        let e = options.connect().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Connection, "{scheme}: {e}");
        assert!(!e.message().contains("pw-secret"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_end_to_end_with_increasing_fencing_tokens() {
    let server = TestServers::start(&["zookeeper"]);
    let chroot = unique("e2e");
    let url = format!("{}{chroot}", server.url());
    let (a, b) = (connect(&url).await, connect(&url).await);
    let host = server.url().strip_prefix("zookeeper://").unwrap().to_string();
    let raw = zk::Client::connect(&host).await.unwrap();
    let options = LockOptions::default();
    let mut tokens = Vec::new();
    // A waiter's node lives as long as its session: no entry_ttl on ZooKeeper.
    let e = a.lock_options(None, None, None, Some(Duration::from_secs(1)), &Spelling::RUST).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    // Mutex: one holder; a waiter is granted when the holder releases.
    let (ma, mb) = (a.lock("m", options.clone()).unwrap(), b.lock("m", options.clone()).unwrap());
    let held = ma.acquire(WAIT).await.unwrap();
    tokens.push(token(&held));
    assert!(mb.try_acquire().await.unwrap().is_none(), "held by a");
    let waiter = tokio::spawn(async move { mb.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b waits while a holds");
    let nodes = ephemerals(&raw, &chroot).await;
    assert_eq!(nodes.len(), 2, "a's node and b's waiting node, under the chroot: {nodes:?}");
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    tokens.push(token(&next));
    assert!(next.release().await.unwrap());

    // Read-write lock: readers share, a writer excludes them.
    let (rwa, rwb) = (a.read_write_lock("rw", options.clone()).unwrap(), b.read_write_lock("rw", options.clone()).unwrap());
    let r1 = rwa.read().acquire(WAIT).await.unwrap();
    let r2 = rwb.read().acquire(WAIT).await.unwrap();
    tokens.push(token(&r1).max(token(&r2)));
    assert!(rwb.write().try_acquire().await.unwrap().is_none(), "readers hold");
    assert!(r1.release().await.unwrap() && r2.release().await.unwrap());
    let w = rwb.write().acquire(WAIT).await.unwrap();
    tokens.push(token(&w));
    assert!(rwa.read().try_acquire().await.unwrap().is_none(), "the writer holds");
    assert!(w.release().await.unwrap());

    // Semaphore: two permits.
    // (One handle holds one permit: a third holder takes its own handle.)
    let (sa, sb) = (a.semaphore("s", 2, options.clone()).unwrap(), b.semaphore("s", 2, options.clone()).unwrap());
    let sc = b.semaphore("s", 2, options.clone()).unwrap();
    let p1 = sa.acquire(WAIT).await.unwrap();
    let p2 = sb.acquire(WAIT).await.unwrap();
    assert!(sc.try_acquire().await.unwrap().is_none(), "both permits taken");
    tokens.push(token(&p1).max(token(&p2)));
    let third = tokio::spawn(async move { sc.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "the third waits for a permit");
    assert!(p1.release().await.unwrap());
    let p3 = third.await.unwrap().unwrap();
    tokens.push(token(&p3));
    assert!(p2.release().await.unwrap() && p3.release().await.unwrap());

    // Election: the leader's value and term are observed; the next leader's term is larger.
    let (ea, eb) = (a.election("e", options.clone()).unwrap(), b.election("e", options.clone()).unwrap());
    let leader = ea.campaign("node-a", Some(WAIT)).await.unwrap();
    tokens.push(token(&leader));
    let seen = eb.observe().await.unwrap().expect("a leads");
    assert_eq!((seen.value.as_str(), seen.term), ("node-a", token(&leader)));
    assert!(eb.try_campaign("node-b").await.unwrap().is_none(), "a leads");
    assert!(leader.release().await.unwrap());
    let leader = eb.campaign("node-b", Some(WAIT)).await.unwrap();
    tokens.push(token(&leader));
    let seen = ea.observe().await.unwrap().expect("b leads");
    assert_eq!((seen.value.as_str(), seen.term), ("node-b", token(&leader)));
    assert!(leader.release().await.unwrap());

    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "fencing tokens increase: {tokens:?}");
    let left = ephemerals(&raw, &chroot).await;
    assert!(left.is_empty(), "released: no node left: {left:?}");

    // A clean shutdown leaves nothing either: a held lease and a waiter of the closing client.
    let (ma, mb) = (a.lock("m", options.clone()).unwrap(), b.lock("m", options.clone()).unwrap());
    let _held = mb.acquire(WAIT).await.unwrap();
    let waiting = tokio::spawn(async move { ma.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ephemerals(&raw, &chroot).await.len(), 2);
    b.close().await;
    assert!(waiting.await.unwrap().is_ok(), "a is granted once b's client closed");
    a.close().await;
    let left = ephemerals(&raw, &chroot).await;
    assert!(left.is_empty(), "closed: no node left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silenced_holder_is_told_it_lost_the_lock_before_the_next_grant() {
    let mut server = TestServers::start(&["zookeeper"]);
    let url = format!("{}{}", server.url(), unique("loss"));
    let mut options = ClientOptions::new(&url);
    options.session_timeout = Some(Duration::from_secs(2));
    options.response_timeout = Duration::from_secs(1);
    let holder = options.connect().await.unwrap();
    let lease = holder.lock("m", LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    let first = token(&lease);

    // The loss comes no later than the ensemble could expire the session: its timeout after
    // the last contact, which was before the pause (a little slack for a loaded machine).
    server.command("pause 0");
    let paused = std::time::Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(4), lease.lost()).await.expect("the loss is signalled");
    assert!(paused.elapsed() < Duration::from_millis(2300), "lost {:?} after the pause: {lost}", paused.elapsed());
    assert!(!lease.is_held(), "{lost}");
    server.command("resume 0");

    let next = connect(&url).await;
    let granted = next.lock("m", LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    assert!(token(&granted) > first, "{} > {first}", token(&granted));
    assert!(granted.release().await.unwrap());
    // The silenced client is usable again, in a new session.
    let again = holder.lock("m", LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    assert!(token(&again) > token(&granted));
    assert!(again.release().await.unwrap());
    holder.close().await;
    next.close().await;
}
