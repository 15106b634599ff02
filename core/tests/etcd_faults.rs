//! The etcd backend under faults, on one real 3-member etcd cluster (Debian's etcd 3.4, from the
//! project's launcher: `test-servers etcd --members 3 --proxied`, conformance/README.md "etcd
//! kinds"; every test here shares it, one at a time):
//!
//! - the Raft leader is killed while clients contend: never two holders at once (a shared
//!   critical section sees no one enter while another still holds, and holdings never
//!   overlap), tokens keep increasing, every waiter is granted or told;
//! - a holder in a process of its own is frozen (SIGSTOP) past its lease's TTL: the next holder
//!   is granted only after the frozen holder's validity ran out on its own clock, the frozen one
//!   knows it lost the moment it runs again, and the next token is larger;
//! - etcd #22082: a release whose reply is lost (the proxies hold replies back) is retried after
//!   the same client has acquired the lock again: the newer holding is never deleted;
//! - 1,000 waiters with random timeouts and cancellations leave no key and no lease.
#![cfg(feature = "tokio")]
// Each test holds the cluster's guard across its awaits on purpose: it is what keeps them one at
// a time, and every test has a runtime of its own, so nothing waits on it from the same runtime.
#![allow(clippy::await_holding_lock)]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client as ec;
use lockgate_core::native::{Client, ClientOptions, Lease, Lock};
use lockgate_core::LockOptions;
use test_servers::TestServers;

/// The one cluster of this file; holding the guard is also what keeps the tests one at a time
/// (they stop members and freeze connections). The launcher stops it when this process ends.
fn cluster() -> MutexGuard<'static, TestServers> {
    static CLUSTER: OnceLock<Mutex<TestServers>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| Mutex::new(TestServers::start(&["etcd", "--members", "3", "--proxied"])))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The members' own `etcd://` URL (no proxy in between).
fn direct(servers: &TestServers) -> String {
    servers.info["server_url"].as_str().expect("server_url").to_string()
}

/// The members' `http://` endpoints, for the raw client.
fn endpoints(servers: &TestServers) -> Vec<String> {
    servers.info["nodes"].as_array().unwrap().iter().map(|n| format!("http://127.0.0.1:{}", n["port"])).collect()
}

fn unique(tag: &str) -> String {
    format!("faults-{tag}-{}-{}", std::process::id(), wall_ns())
}

fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// A client of `url` with a `session` lease TTL and a `response` bound on each request.
async fn client(url: &str, session: Duration, response: Duration) -> Client {
    let mut o = ClientOptions::new(url);
    o.session_timeout = Some(session);
    o.response_timeout = response;
    o.connect().await.unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// How many live leases were granted with a TTL of `secs` seconds.
async fn leases_granted_for(raw: &mut ec::Client, secs: i64) -> usize {
    let mut n = 0;
    for l in raw.leases().await.unwrap().leases().to_vec() {
        // A lease revoked between the listing and this look is gone: not counted.
        if let Ok(t) = raw.lease_time_to_live(l.id(), None).await {
            n += usize::from(t.granted_ttl() == secs && t.ttl() > 0);
        }
    }
    n
}

/// The keys under mutex `name`'s prefix (create revision, lease), read from the members.
async fn keys(raw: &mut ec::Client, name: &str) -> Vec<(i64, i64)> {
    let r = raw.get(format!("/lockgate/mutex/{name}/"), Some(ec::GetOptions::new().with_prefix())).await.unwrap();
    r.kvs().iter().map(|kv| (kv.create_revision(), kv.lease())).collect()
}

/// Waits up to `limit` for mutex `name` to have no key; panics with what is left.
async fn expect_no_keys(raw: &mut ec::Client, name: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = keys(raw, name).await;
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{name}: {} key(s) left after {limit:?}: {left:?}", left.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One holding as its holder saw it: token, grant, and the last instant it still knew it held.
#[derive(Clone, Debug)]
struct Holding {
    token: u64,
    granted: Instant,
    until: Instant,
}

/// The critical section every holder enters: who is inside (a token, 0 = nobody), and how
/// often a holder that still held saw someone else inside.
#[derive(Default)]
struct Section {
    inside: AtomicU64,
    overlaps: AtomicUsize,
}

impl Section {
    /// Holds `lease` for `hold` inside the section, checking every few ms that nobody else
    /// entered while it still holds; releases; returns the last instant it knew it held.
    async fn hold(&self, lease: Lease, hold: Duration) -> Instant {
        let token = lease.fencing_token().expect("etcd grants carry a token");
        self.inside.store(token, Ordering::SeqCst);
        let end = Instant::now() + hold;
        let mut known = Instant::now();
        while Instant::now() < end {
            // Who is inside first, then whether we still hold: another token inside while we
            // still hold afterwards is two holders at once.
            let now_inside = self.inside.load(Ordering::SeqCst);
            if !lease.is_held() {
                break;
            }
            known = Instant::now();
            if now_inside != token {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let _ = self.inside.compare_exchange(token, 0, Ordering::SeqCst, Ordering::SeqCst);
        let _ = lease.release().await;
        known
    }
}

/// Never two holdings at once, and tokens strictly increase in grant order.
fn check_exclusive(mut holdings: Vec<Holding>) {
    holdings.sort_by_key(|h| h.granted);
    for w in holdings.windows(2) {
        assert!(w[1].granted >= w[0].until, "two holders at once: {:?} and {:?}", w[0], w[1]);
        assert!(w[1].token > w[0].token, "the token did not increase: {:?} then {:?}", w[0], w[1]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_raft_leader_during_contention_never_gives_two_holders() {
    let mut servers = cluster();
    let url = direct(&servers);
    let name = unique("leader-killed");
    let section = Arc::new(Section::default());
    let holdings = Arc::new(Mutex::new(Vec::new()));
    let told = Arc::new(AtomicUsize::new(0));
    let stop_at = Instant::now() + Duration::from_secs(5);
    let mut workers = Vec::new();
    for who in 0..4 {
        let (url, name, section, holdings, told) = (url.clone(), name.clone(), section.clone(), holdings.clone(), told.clone());
        workers.push(tokio::spawn(async move {
            // A 3 s lease outlives a leader election (about a second here).
            let c = client(&url, Duration::from_secs(3), Duration::from_millis(800)).await;
            let lock = c.lock(&name, LockOptions::default()).unwrap();
            while Instant::now() < stop_at {
                match lock.acquire(Duration::from_secs(8)).await {
                    Ok(lease) => {
                        let token = lease.fencing_token().unwrap();
                        let granted = Instant::now();
                        let until = section.hold(lease, Duration::from_millis(15)).await;
                        holdings.lock().unwrap().push(Holding { token, granted, until });
                    }
                    Err(e) => {
                        assert!(e.retryable(), "worker {who}: a fault must be retryable, got {e}");
                        told.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            c.close().await;
        }));
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before = holdings.lock().unwrap().len();
    let leader = servers.command("leader")["leader"].as_u64().expect("a leader") as usize;
    servers.command(&format!("stop {leader}"));
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let new_leader = servers.command("leader")["leader"].as_u64().unwrap() as usize;
    assert_ne!(new_leader, leader, "another member leads");
    servers.command(&format!("start {leader}"));
    for w in workers {
        tokio::time::timeout(Duration::from_secs(30), w).await.expect("every worker ends (granted or told)").unwrap();
    }
    let holdings = holdings.lock().unwrap().clone();
    let after = holdings.iter().filter(|h| h.granted > killed).count();
    // The writes stalled while the cluster had no leader: the longest pause between grants.
    let mut grants: Vec<Instant> = holdings.iter().map(|h| h.granted).collect();
    grants.sort();
    let stall = grants.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    eprintln!(
        "{} holdings ({before} before the leader was killed, {after} after), {} acquires told of a fault, longest pause between grants {stall:?}",
        holdings.len(),
        told.load(Ordering::Relaxed)
    );
    assert!(before > 0, "nobody held before the fault");
    assert!(after > 0, "nobody held after the leader was killed");
    // No write commits without a leader, and a new one takes at least an election timeout.
    assert!(stall >= Duration::from_millis(400), "grants never paused ({stall:?}): was the leader killed during contention?");
    assert_eq!(section.overlaps.load(Ordering::SeqCst), 0, "a holder saw another inside the critical section while it still held");
    check_exclusive(holdings);
    let mut raw = ec::Client::connect(endpoints(&servers), None).await.unwrap();
    expect_no_keys(&mut raw, &name, Duration::from_secs(3)).await;
}

/// The holder process of `a_frozen_holder_...`: this test binary run again with this test's
/// name and `LG_ETCD_HOLDER=<url> <name>`. It acquires the mutex and prints, every 10 ms while
/// it holds, `HOLDER held <token> <now ns> <valid until ns>` (wall clock); then `HOLDER lost
/// <now ns>` and `HOLDER released <was held>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper process: a_frozen_holder_knows_it_lost_before_the_next_grant runs it"]
async fn holder_process() {
    let spec = std::env::var("LG_ETCD_HOLDER").expect("run by a_frozen_holder_knows_it_lost_before_the_next_grant");
    let (url, name) = spec.split_once(' ').unwrap();
    let c = client(url, Duration::from_secs(2), Duration::from_millis(800)).await;
    let lease = c.lock(name, LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let token = lease.fencing_token().unwrap();
    loop {
        let now = wall_ns();
        let left = lease.remaining();
        if !lease.is_held() {
            break;
        }
        let left = left.expect("a held lease has a validity").as_nanos();
        println!("HOLDER held {token} {now} {}", now + left);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("HOLDER lost {}", wall_ns());
    let _ = tokio::time::timeout(Duration::from_secs(3), lease.lost()).await.expect("the loss is signalled");
    println!("HOLDER released {}", lease.release().await.unwrap_or(true));
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_knows_it_lost_before_the_next_grant() {
    let servers = cluster();
    let url = direct(&servers);
    let name = unique("frozen-holder");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "holder_process", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("LG_ETCD_HOLDER", format!("{url} {name}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (tx, lines) = mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("HOLDER ") {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    let first = tokio::task::block_in_place(|| lines.recv_timeout(Duration::from_secs(15))).expect("the holder process holds");
    let holder_token: u64 = first.split(' ').nth(1).unwrap().parse().unwrap();
    let waiter = client(&url, Duration::from_secs(5), Duration::from_millis(800)).await;
    let lock = waiter.lock(&name, LockOptions::default()).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire(Duration::from_secs(10)).await.map(|l| (wall_ns(), l)) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let signal = |sig: &str| assert!(Command::new("kill").arg(sig).arg(&pid).status().unwrap().success(), "kill {sig} {pid}");
    signal("-STOP");
    let frozen = Instant::now();
    let granted = tokio::time::timeout(Duration::from_secs(8), waiting).await;
    let waited = frozen.elapsed();
    signal("-CONT");
    let (grant_ns, lease) = granted.expect("the waiter is granted once the frozen holder's lease expires").unwrap().unwrap();
    // Granted by the lease's expiry on the server (2 s TTL), not by a release.
    assert!(waited >= Duration::from_millis(1000), "granted {waited:?} after the freeze");
    assert!(lease.fencing_token().unwrap() > holder_token, "the next token is larger");

    // Everything the holder said: while it knew it held, both now and its validity end came
    // before the next grant; once thawed its first word is the loss.
    let mut said = Vec::new();
    while let Ok(line) = tokio::task::block_in_place(|| lines.recv_timeout(Duration::from_secs(5))) {
        let done = line.starts_with("released");
        said.push(line);
        if done {
            break;
        }
    }
    assert!(child.wait().unwrap().success(), "the holder process: {said:?}");
    let mut last_valid = 0u128;
    for line in &said {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "held" {
            let (now, until): (u128, u128) = (f[2].parse().unwrap(), f[3].parse().unwrap());
            assert!(now < grant_ns, "the holder still held {} ms after the next grant", (now - grant_ns) / 1_000_000);
            assert!(until < grant_ns, "the holder's validity ran until {} ms after the next grant", (until - grant_ns) / 1_000_000);
            last_valid = last_valid.max(until);
        }
    }
    let lost_at = said.iter().find_map(|l| l.strip_prefix("lost ")).expect("the holder says it lost").parse::<u128>().unwrap();
    assert!(said.iter().any(|l| l == "released false"), "its release reports it was not held: {said:?}");
    eprintln!(
        "frozen holder: its validity ended {} ms before the next grant ({waited:?} after the freeze); it said 'lost' {} ms after the grant, once thawed",
        (grant_ns - last_valid.max(first.split(' ').nth(3).unwrap().parse().unwrap())) / 1_000_000,
        lost_at.saturating_sub(grant_ns) / 1_000_000
    );
    assert!(lease.release().await.unwrap());
    waiter.close().await;
    let mut raw = ec::Client::connect(endpoints(&servers), None).await.unwrap();
    expect_no_keys(&mut raw, &name, Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_retried_after_a_reacquire_never_deletes_the_newer_holding() {
    let mut servers = cluster();
    let proxied = servers.url();
    let name = unique("release-retry");
    let mut raw = ec::Client::connect(endpoints(&servers), None).await.unwrap();
    let c = client(&proxied, Duration::from_secs(5), Duration::from_millis(800)).await;
    let lock = c.lock(&name, LockOptions::default()).unwrap();
    let first = lock.acquire(Duration::from_secs(5)).await.unwrap();
    let t1 = first.fencing_token().unwrap();
    assert_eq!(keys(&mut raw, &name).await.iter().map(|k| k.0 as u64).collect::<Vec<_>>(), vec![t1]);

    // The release reaches the members (its key goes) but its reply is held back.
    servers.command("deafen");
    let releasing = tokio::spawn(async move { first.release().await });
    let deadline = Instant::now() + Duration::from_secs(3);
    while !keys(&mut raw, &name).await.is_empty() {
        assert!(Instant::now() < deadline, "the release's delete never reached the cluster");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!releasing.is_finished(), "the release's reply was lost, yet it returned");
    // The same client acquires the same name again while that release is unconfirmed.
    let again = tokio::spawn({
        let lock: Lock = lock.clone();
        async move { lock.acquire(Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    servers.command("restore");
    let released = releasing.await.unwrap();
    let second = again.await.unwrap().expect("acquired again after the lost reply");
    let t2 = second.fencing_token().unwrap();
    assert!(t2 > t1);
    eprintln!("release with a lost reply: {released:?}; re-acquired with token {t2} (was {t1})");
    // Whatever the release's retries did meanwhile or do now, the newer holding stays.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(second.is_held(), "{:?}", second.lost_reason());
    let left = keys(&mut raw, &name).await;
    assert_eq!(left.iter().map(|k| k.0 as u64).collect::<Vec<_>>(), vec![t2], "the newer key is there, alone");
    let other = client(&direct(&servers), Duration::from_secs(5), Duration::from_millis(800)).await;
    assert!(other.lock(&name, LockOptions::default()).unwrap().try_acquire().await.unwrap().is_none(), "still held");
    assert!(second.release().await.unwrap());
    expect_no_keys(&mut raw, &name, Duration::from_secs(3)).await;
    c.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_with_random_cancels_leave_no_keys_and_no_leases() {
    let servers = cluster();
    let url = direct(&servers);
    let name = unique("thousand");
    let mut raw = ec::Client::connect(endpoints(&servers), None).await.unwrap();
    // This test's clients alone have 8 s leases (the other tests, which run alongside on the
    // same cluster, use other TTLs), so their leases are told apart from everyone else's.
    let leases_before = leases_granted_for(&mut raw, 8).await;
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..4 {
        clients.push(client(&url, Duration::from_secs(8), Duration::from_secs(5)).await);
    }
    let holder = clients[0].lock(&name, LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let section = Arc::new(Section::default());
    let holdings = Arc::new(Mutex::new(Vec::new()));
    let (granted, timed_out, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..1000usize {
        let lock: Lock = clients[i % clients.len()].lock(&name, LockOptions::default()).unwrap();
        let r = next();
        let (section, holdings, granted, timed_out, cancelled) = (section.clone(), holdings.clone(), granted.clone(), timed_out.clone(), cancelled.clone());
        tasks.push(tokio::spawn(async move {
            // A third give up by their own timeout, a third are cancelled (the future dropped)
            // at a random moment, a third wait until granted.
            let wait = Duration::from_millis(50 + r % 1500);
            let fut = lock.acquire(if r % 3 == 0 { wait } else { Duration::from_secs(60) });
            let res = if r % 3 == 1 {
                match tokio::time::timeout(wait, fut).await {
                    Ok(res) => res,
                    Err(_) => {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            } else {
                fut.await
            };
            match res {
                Ok(lease) => {
                    let token = lease.fencing_token().unwrap();
                    let at = Instant::now();
                    let until = section.hold(lease, Duration::ZERO).await;
                    holdings.lock().unwrap().push(Holding { token, granted: at, until });
                    granted.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    assert_eq!(e.code(), "TIMEOUT", "waiter {i}: {e}");
                    timed_out.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // Everyone queues behind the holder; the cancels and timeouts happen meanwhile.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t).await.expect("every waiter ends").unwrap();
    }
    let (g, t, c) = (granted.load(Ordering::Relaxed), timed_out.load(Ordering::Relaxed), cancelled.load(Ordering::Relaxed));
    eprintln!("1000 waiters: {g} granted, {t} timed out, {c} cancelled");
    assert_eq!(g + t + c, 1000);
    assert!(g > 0 && t > 0 && c > 0, "{g} granted, {t} timed out, {c} cancelled");
    assert_eq!(section.overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    check_exclusive(holdings.lock().unwrap().clone());
    expect_no_keys(&mut raw, &name, Duration::from_secs(5)).await;
    for c in clients {
        c.close().await;
    }
    // Every lease the clients granted (one per concurrent waiter of a client) is revoked.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = leases_granted_for(&mut raw, 8).await;
        if n <= leases_before {
            break;
        }
        assert!(Instant::now() < deadline, "{} lease(s) left (before: {leases_before})", n - leases_before);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
