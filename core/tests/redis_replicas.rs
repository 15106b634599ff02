//! Replica-acknowledged mode against a real primary and replica started by the test: a grant
//! counts only once WAIT confirms it reached the replica.
#![cfg(feature = "tokio")]

mod support;

use std::time::{Duration, Instant};

use lockgate_core::native::ClientOptions;
use lockgate_core::{ErrorKind, LockOptions, ReplicaAcks};
use redis::Commands;
use support::RedisServer;

fn acked_client_options(url: &str) -> ClientOptions {
    let mut o = ClientOptions::new(url);
    o.replica_acks = Some(ReplicaAcks { replicas: 1, timeout: Duration::from_millis(200) });
    o.response_timeout = Duration::from_secs(2);
    o
}

fn start_pair() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start_with(
        vec!["--replicaof".into(), "127.0.0.1".into(), primary.port.to_string()],
        false,
    );
    let mut raw = primary.raw();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut raw).unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(Instant::now() < deadline, "replica never came online: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (primary, replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_count_only_once_a_replica_has_them() {
    let (primary, replica) = start_pair();
    let client = acked_client_options(&primary.url()).connect().await.unwrap();
    let lock = client.lock("acked", LockOptions::default()).unwrap();
    let lease = lock.acquire(Duration::from_secs(2)).await.unwrap();
    assert!(lease.is_held());
    // A waiter in the same mode is handed the lock on release (its grant is confirmed too).
    let other = acked_client_options(&primary.url()).connect().await.unwrap();
    let waiter = tokio::spawn(async move {
        let l = other.lock("acked", LockOptions::default()).unwrap();
        let lease = l.acquire(Duration::from_secs(5)).await?;
        let token = lease.fencing_token().unwrap();
        // Released before the pause below, not dropped: a dropped lease's release is sent
        // in the background and could reach the primary after the next grant is asked for.
        assert!(lease.release().await?);
        Ok::<_, lockgate_core::Error>(token)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let token = lease.fencing_token().unwrap();
    assert!(lease.release().await.unwrap());
    assert!(waiter.await.unwrap().unwrap() > token);

    // With the only replica paused, grants fail and are undone.
    replica.pause();
    let e = lock.try_acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("replicas"), "{e}");
    let e = lock.acquire(Duration::from_millis(700)).await.unwrap_err();
    // No replica acknowledges: CONNECTION with the last attempt's failure, not TIMEOUT.
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("replicas"), "{e}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut raw = primary.raw();
    let keys: Vec<String> = raw.keys("lockgate:{acked}*").unwrap();
    assert!(keys.iter().all(|k| k.ends_with(":fence")), "left behind: {keys:?}");
    replica.resume();
    let lease = lock.acquire(Duration::from_secs(5)).await.unwrap();
    assert!(lease.release().await.unwrap());
    // Bad settings are rejected before connecting.
    let mut bad = ClientOptions::new(primary.url());
    bad.replica_acks = Some(ReplicaAcks { replicas: 0, timeout: Duration::from_millis(10) });
    assert_eq!(bad.connect().await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    drop(replica);
}
