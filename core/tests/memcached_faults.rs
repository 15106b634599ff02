//! The memcached backend under faults, on real memcached servers from the project's launcher
//! (`test-servers memcached`, Debian's memcached 1.6). The frozen (SIGSTOPped) holder is the
//! conformance scenario `paused_holder_loses_before_next_grant`, run on the memcached variant in
//! every binding; here:
//!
//! - a server restarted empty: the holder's next renewal finds its item gone and signals the loss
//!   (it writes nothing back); the restarted server grants nothing until it has been up
//!   `max_lease`, so another client's grant comes only after every lease it forgot has ended
//!   (PROTOCOL.md §13, the delayed-restart rule);
//! - eviction under memory pressure (a 2 MB server filled with items of the lock item's size):
//!   the holder's next renewal signals the loss;
//! - a crashed holder (its item written as lockgate writes it, then never touched again) frees
//!   the lock within its lease rounded up plus 3 s, and no sooner than its lease (README "What a
//!   crash costs");
//! - 1,000 waiters polling one held lock, with random timeouts and cancels: every one ends, the
//!   commands they sent stay within the documented rate, and nothing is left behind.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use lockgate_core::backend::memcached::backend::UPTIME_SLACK_SECS;
use lockgate_core::connect::ClientOptions;
use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use test_servers::TestServers;

fn unique(tag: &str) -> String {
    format!("faults-{tag}-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos())
}

/// One text-protocol exchange with the server on `port`: sends `bytes`, reads until the answer
/// ends with `end`.
fn exchange(port: u16, bytes: &[u8], end: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !out.ends_with(end) {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "the server closed the connection");
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A counter of the server's `stats`.
fn stat(port: u16, name: &str) -> u64 {
    let stats = exchange(port, b"stats\r\n", b"END\r\n");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")).map(|v| v.trim().parse().unwrap()))
        .unwrap_or_else(|| panic!("no stat {name}"))
}

/// The deployment's max lease in these tests: a fresh or restarted server grants nothing for
/// this long (plus memcached's uptime slack).
const MAX_LEASE: Duration = Duration::from_secs(6);

/// A client of the servers at `url` with this file's max lease.
async fn connect(url: &str) -> Client {
    let mut o = ClientOptions::new(url);
    o.max_lease = Some(MAX_LEASE);
    o.connect().await.unwrap()
}

/// Waits until the server on `port` has been up long enough to grant.
async fn ready(port: u16) {
    while stat(port, "uptime") < MAX_LEASE.as_secs() + UPTIME_SLACK_SECS + 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn renewed(ms: u64) -> LockOptions {
    LockOptions::renewed_lease(Duration::from_millis(ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_a_lost_lock_signalled_at_the_next_renewal() {
    let mut servers = TestServers::start(&["memcached"]);
    let url = servers.url();
    ready(servers.port(0)).await;
    let holder = connect(&url).await;
    let other = connect(&url).await;
    let name = unique("restart");
    let lease = holder.lock(&name, renewed(3000)).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
    assert_eq!(lease.fencing_token(), None, "memcached grants carry no token");
    let killed = Instant::now();
    servers.command("restart 0");
    let wanting = other.lock(&name, renewed(3000)).unwrap();
    let theirs = tokio::spawn(async move { wanting.acquire(Duration::from_secs(20)).await.map(|l| (l, killed.elapsed())) });
    // The holder learns at its next renewal, within a third of its lease (plus a reconnect).
    let lost = tokio::time::timeout(Duration::from_secs(3), lease.lost()).await.expect("the loss is signalled");
    assert!(killed.elapsed() < Duration::from_millis(2500), "signalled after {:?}: {lost}", killed.elapsed());
    // The other client is granted only once the restarted server has been up max_lease: the
    // holder's lease (3 s from a renewal before the kill) has ended by then.
    let (theirs, after) = theirs.await.unwrap().expect("granted once the server is old enough");
    assert!(after >= MAX_LEASE - Duration::from_millis(100), "granted {after:?} after the kill, before max_lease");
    assert!(after <= MAX_LEASE + Duration::from_secs(5), "granted only {after:?} after the kill");
    assert!(!lease.is_held());
    assert!(!lease.release().await.unwrap(), "the lost lease releases nothing");
    assert!(theirs.is_held(), "the loser wrote nothing back over the new holder's item");
    assert!(theirs.release().await.unwrap());
    holder.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_item_is_a_lost_lock_signalled_at_the_next_renewal() {
    let servers = TestServers::start(&["memcached", "--memory", "2"]);
    let port = servers.port(0);
    ready(port).await;
    let client = connect(&servers.url()).await;
    let name = unique("evict");
    let lease = client.lock(&name, renewed(6000)).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
    // Fill the server with items of the lock item's size (its slab class) until the lock's
    // item, the least recently used, is evicted.
    // Same key length and value length as the lock's item: same slab class.
    let key_len = format!("lockgate:m:{name}").len();
    let mut batch = Vec::new();
    for i in 0..60_000 {
        let key = format!("fill:{i:0>width$}", width = key_len - 5);
        batch.extend_from_slice(format!("set {key} 0 0 32 noreply\r\n{i:032}\r\n").as_bytes());
    }
    batch.extend_from_slice(b"version\r\n");
    exchange(port, &batch, b"\r\n");
    assert!(stat(port, "evictions") > 0, "the server evicted nothing");
    let lost = tokio::time::timeout(Duration::from_secs(4), lease.lost()).await.expect("the loss is signalled at the next renewal");
    assert!(!lease.is_held(), "{lost}");
    // Taken again cleanly afterwards.
    let again = client.lock(&name, renewed(3000)).unwrap().try_acquire().await.unwrap().expect("free after the eviction");
    assert!(again.release().await.unwrap());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_polling_waiters_with_cancels_leave_nothing_and_poll_within_the_rate() {
    let servers = TestServers::start(&["memcached"]);
    let port = servers.port(0);
    let url = servers.url();
    ready(port).await;
    let clients = [connect(&url).await, connect(&url).await];
    let name = unique("waiters");
    let held = clients[0].lock(&name, renewed(3000)).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
    let before = stat(port, "cmd_set") + stat(port, "cmd_get");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..1000u64 {
        let lock = clients[(i % 2) as usize].lock(&name, LockOptions::fixed_lease(Duration::from_secs(1))).unwrap();
        // A third time out, a third are cancelled (their future dropped), a third wait on.
        let wait = Duration::from_millis(200 + (i * 7919) % 1500);
        tasks.push(tokio::spawn(async move {
            let lease = match i % 3 {
                0 => lock.acquire(wait).await.ok(),
                1 => tokio::time::timeout(wait, lock.acquire(Duration::from_secs(60))).await.ok().and_then(Result::ok),
                _ => lock.acquire(Duration::from_secs(60)).await.ok(),
            };
            match lease {
                Some(l) => l.release().await.unwrap_or(false),
                None => false,
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waited = started.elapsed().as_secs_f64();
    let polls = stat(port, "cmd_set") + stat(port, "cmd_get") - before;
    // At most 12 commands per waiter in its first second and 10 a second after (the holder's
    // renewals are a few more).
    let bound = 1000.0 * (12.0 + 10.0 * (waited - 1.0).max(0.0)) + 50.0;
    assert!((polls as f64) <= bound, "{polls} commands in {waited:.1} s from 1,000 waiters (bound {bound})");
    assert!(held.release().await.unwrap());
    // The waiters left take the lock one after another, each releasing it at once.
    let mut granted = 0;
    for t in tasks {
        granted += usize::from(tokio::time::timeout(Duration::from_secs(120), t).await.expect("every waiter ends").unwrap());
    }
    assert!(granted >= 333, "every waiter that waits on was granted: {granted}");
    // Nothing is left: the lock's item is gone.
    let key = format!("lockgate:m:{name}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = exchange(port, format!("get {key}\r\n").as_bytes(), b"END\r\n");
        if answer == "END\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {answer:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for c in &clients {
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_lock_is_free_within_its_lease_plus_the_clock_slack() {
    let servers = TestServers::start(&["memcached"]);
    let port = servers.port(0);
    ready(port).await;
    let client = connect(&servers.url()).await;
    let name = unique("crash");
    // A holder that took a 1.5 s lease and crashed at once: its item, as lockgate's add wrote it
    // (the lease rounded up to 2 s, plus the 2 s of clock slack), never renewed nor deleted.
    let key = format!("lockgate:m:{name}");
    let stored = exchange(port, format!("add {key} 0 4 32\r\n{:032}\r\n", 7).as_bytes(), b"\r\n");
    assert_eq!(stored, "STORED\r\n");
    let crashed = Instant::now();
    let lease = client.lock(&name, renewed(1500)).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    let freed = crashed.elapsed();
    assert!(freed >= Duration::from_millis(1500), "freed before the crashed holder's lease ended: {freed:?}");
    assert!(freed <= Duration::from_millis(2000 + 3000 + 300), "freed after {freed:?}: more than the lease rounded up + 3 s + a poll");
    assert!(lease.release().await.unwrap());
    client.close().await;
}
