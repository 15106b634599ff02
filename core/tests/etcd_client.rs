//! The one client family over a real etcd (Debian's etcd 3.4, from the project's test-server
//! launcher) through the native driver and the etcd transport: a mutex acquired and released
//! with its key gone afterwards, two clients contending with increasing fencing tokens (each
//! holder key's create revision), and a holder told of its loss when its lease is revoked
//! behind the client's back with Debian's `etcdctl`; two handles of one client on one name (a
//! lease each, kept alive on the client's one keepalive stream) outlive their TTL several times.
//! With etcd's user authentication on, the URL's login is used; a wrong password is an
//! `AUTHENTICATION` error at connect that never shows it, and no login is refused too.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::process::Command;
use std::time::{Duration, Instant};

use etcd_client as ec;
use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;

const WAIT: Duration = Duration::from_secs(10);

/// A lock name no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("lg-{tag}-{}-{t}", std::process::id())
}

async fn connect(url: &str, session_secs: u64) -> Client {
    let mut options = ClientOptions::new(url);
    options.session_timeout = Some(Duration::from_secs(session_secs));
    options.connect().await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn token(lease: &Lease) -> u64 {
    lease.fencing_token().expect("etcd grants carry a fencing token (the key's create revision)")
}

/// The keys under `prefix` now, with their create revisions and leases.
async fn keys(raw: &mut ec::Client, prefix: &str) -> Vec<(String, i64, i64)> {
    let r = raw.get(prefix, Some(ec::GetOptions::new().with_prefix())).await.unwrap();
    r.kvs().iter().map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.create_revision(), kv.lease())).collect()
}

/// `etcdctl --endpoints <the launcher's endpoints> <args>`: Debian's own client.
fn etcdctl(server: &TestServers, args: &[&str]) -> String {
    let endpoints = server.info["endpoints"].as_str().expect("endpoints");
    let out = Command::new("etcdctl").arg("--endpoints").arg(endpoints).args(args).env("ETCDCTL_API", "3").output().expect("etcdctl (apt-get install etcd-client)");
    assert!(out.status.success(), "etcdctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn raw_client(server: &TestServers) -> ec::Client {
    let endpoints: Vec<String> = server.info["endpoints"].as_str().unwrap().split(',').map(str::to_string).collect();
    ec::Client::connect(endpoints, None).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_cluster_is_a_connection_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut options = ClientOptions::new(format!("etcd://127.0.0.1:{port}"));
    options.connect_timeout = Duration::from_millis(500);
    let e = options.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    // With a login the crate authenticates while connecting: same error, no password in it.
    let mut options = ClientOptions::new(format!("etcd://app:pw-secret@127.0.0.1:{port}"));
    options.connect_timeout = Duration::from_millis(500);
    let e = options.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(!e.message().contains("pw-secret"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_is_acquired_contended_and_released_with_increasing_tokens() {
    let server = TestServers::start(&["etcd"]);
    let mut raw = raw_client(&server).await;
    let name = unique("mutex");
    let prefix = format!("/lockgate/mutex/{name}/");
    let (a, b) = (connect(&server.url(), 5).await, connect(&server.url(), 5).await);
    let (ma, mb) = (a.lock(&name, LockOptions::default()).unwrap(), b.lock(&name, LockOptions::default()).unwrap());

    // Acquire and release: one key while held (attached to a lease), none after.
    let held = ma.acquire(WAIT).await.unwrap();
    let first = token(&held);
    let found = keys(&mut raw, &prefix).await;
    assert_eq!(found.len(), 1, "the holder's key: {found:?}");
    assert_eq!(found[0].1 as u64, first, "the token is the key's create revision");
    assert_ne!(found[0].2, 0, "the key is attached to the client's lease");
    assert!(held.is_held());
    assert!(held.release().await.unwrap());
    assert!(!held.is_held());
    assert!(keys(&mut raw, &prefix).await.is_empty(), "released: no key left");

    // Contention: b waits while a holds, and is granted when a releases, with a larger token.
    let held = ma.acquire(WAIT).await.unwrap();
    let second = token(&held);
    assert!(second > first, "{second} > {first}");
    assert!(mb.try_acquire().await.unwrap().is_none(), "held by a");
    let waiter = tokio::spawn(async move { mb.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b waits while a holds");
    assert_eq!(keys(&mut raw, &prefix).await.len(), 2, "a's key and b's waiting key");
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    let third = token(&next);
    assert!(third > second, "{third} > {second}");
    // And back: a waits for b.
    let ma2 = ma.clone();
    let waiter = tokio::spawn(async move { ma2.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "a waits while b holds");
    assert!(next.release().await.unwrap());
    let last = waiter.await.unwrap().unwrap();
    assert!(token(&last) > third, "{} > {third}", token(&last));
    assert!(last.release().await.unwrap());
    assert!(keys(&mut raw, &prefix).await.is_empty(), "released: no key left");

    // A clean shutdown leaves nothing: b's client closes while holding, a is granted then.
    let held = b.lock(&name, LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    let waiting = tokio::spawn(async move { ma.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.close().await;
    let granted = waiting.await.unwrap().unwrap();
    assert!(token(&granted) > token(&held));
    a.close().await;
    assert!(keys(&mut raw, &prefix).await.is_empty(), "closed: no key left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lease_is_revoked_behind_its_back_is_told_it_lost() {
    let server = TestServers::start(&["etcd"]);
    let mut raw = raw_client(&server).await;
    let name = unique("revoked");
    let prefix = format!("/lockgate/mutex/{name}/");
    let holder = connect(&server.url(), 3).await;
    let lease = holder.lock(&name, LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    let first = token(&lease);
    let found = keys(&mut raw, &prefix).await;
    assert_eq!(found.len(), 1, "{found:?}");

    // etcdctl revokes the holder's lease (its key goes with it); the client learns it at its
    // next keepalive or check, well within the session's TTL.
    let revoked = etcdctl(&server, &["lease", "revoke", &format!("{:x}", found[0].2)]);
    assert!(revoked.contains("revoked"), "{revoked}");
    let at = Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(5), lease.lost()).await.expect("the loss is signalled");
    assert!(at.elapsed() < Duration::from_secs(3), "lost {:?} after the revoke: {lost}", at.elapsed());
    assert!(!lease.is_held(), "{lost}");

    // The lock is free; the next grant's token is larger, and the holder's client works again
    // (it grants itself a new lease).
    let other = connect(&server.url(), 3).await;
    let next = other.lock(&name, LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    assert!(token(&next) > first);
    assert!(next.release().await.unwrap());
    let again = holder.lock(&name, LockOptions::default()).unwrap().acquire(WAIT).await.unwrap();
    assert!(token(&again) > token(&next));
    assert!(again.release().await.unwrap());
    holder.close().await;
    other.close().await;
    assert!(keys(&mut raw, &prefix).await.is_empty(), "no key left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_of_one_client_keep_their_own_leases_alive_past_the_ttl() {
    let server = TestServers::start(&["etcd"]);
    let mut raw = raw_client(&server).await;
    let name = unique("two-leases");
    let prefix = format!("/lockgate/mutex/{name}/");
    // A 1 s lease: the test servers' shortest; three of them pass while the test waits.
    let c = connect(&server.url(), 1).await;
    let (h1, h2) = (c.lock(&name, LockOptions::default()).unwrap(), c.lock(&name, LockOptions::default()).unwrap());
    let held = h1.acquire(WAIT).await.unwrap();
    let waiter = tokio::spawn(async move { h2.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let found = keys(&mut raw, &prefix).await;
    assert_eq!(found.len(), 2, "the holder's key and the waiter's: {found:?}");
    assert_ne!(found[0].2, found[1].2, "one lease per key of one client on one name: {found:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(held.is_held(), "kept alive past three TTLs");
    assert!(!waiter.is_finished(), "the second handle still waits");
    let still = keys(&mut raw, &prefix).await;
    assert_eq!(still, found, "both keys (and so both leases) lived on");
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    assert!(token(&next) > token(&held));
    assert!(next.release().await.unwrap());
    c.close().await;
    let deadline = Instant::now() + Duration::from_secs(3);
    while !keys(&mut raw, &prefix).await.is_empty() {
        assert!(Instant::now() < deadline, "no key left once closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_is_used_and_a_wrong_password_is_an_authentication_error_without_it() {
    let server = TestServers::start(&["etcd"]);
    // etcd's own user authentication: root (required to enable it) and an app user allowed
    // every key.
    for args in [
        &["user", "add", "root:root-pw-1"][..],
        &["user", "add", "app:app-pw-secret"],
        &["role", "add", "locks"],
        &["role", "grant-permission", "locks", "readwrite", "--prefix=true", "/"],
        &["user", "grant-role", "app", "locks"],
        &["auth", "enable"],
    ] {
        etcdctl(&server, args);
    }
    let hosts = server.url().trim_start_matches("etcd://").to_string();
    let c = connect(&format!("etcd://app:app-pw-secret@{hosts}"), 5).await;
    let name = unique("auth");
    let lock = c.lock(&name, LockOptions::default()).unwrap();
    let held = lock.acquire(WAIT).await.unwrap();
    assert!(held.is_held());
    assert!(held.release().await.unwrap());
    c.close().await;

    let mut options = ClientOptions::new(format!("etcd://app:wrong-pw-secret@{hosts}"));
    options.connect_timeout = Duration::from_secs(3);
    let e = options.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    assert!(!e.message().contains("wrong-pw-secret"), "{e}");
    // No login at all on a cluster that asks for one: refused too, on the first request.
    let anonymous = connect(&server.url(), 5).await;
    let e = anonymous.lock(&name, LockOptions::default()).unwrap().acquire(Duration::from_secs(3)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    anonymous.close().await;
}
