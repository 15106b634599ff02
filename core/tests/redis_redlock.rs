//! Redlock against five (or three) real, independent redis-server masters started by the test:
//! minority loss tolerated, majority loss refused cleanly, late replies never valid, no lost
//! update while masters are killed and restarted, renewal and loss.
#![cfg(feature = "tokio")]

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockgate_core::connect::redlock_url;
use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::backend::redlock::scripts::key;
use lockgate_core::{ErrorKind, LockOptions};
use redis::Commands;
use support::RedisServer;

/// The deployment's max lease: short, so masters start granting ~2-3 s after a (re)start.
const MAX_LEASE: Duration = Duration::from_millis(1000);

fn masters(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

fn urls(servers: &[RedisServer]) -> Vec<String> {
    servers.iter().map(|s| s.url()).collect()
}

/// A `redlock://` client over `servers` (the one client family; Redlock settings are options).
fn options(servers: &[RedisServer]) -> ClientOptions {
    let mut o = ClientOptions::new(redlock_url(&urls(servers)).unwrap());
    o.max_lease = Some(MAX_LEASE);
    o.node_timeout = Some(Duration::from_millis(200));
    o.retry_delay = Some(Duration::from_millis(10));
    o.retry_jitter = Some(Duration::from_millis(30));
    o.response_timeout = Duration::from_secs(2);
    o.connect_timeout = Duration::from_secs(1);
    o
}

/// How many reachable masters have a key for lock `name`.
fn holders(servers: &[RedisServer], name: &str) -> usize {
    let k = key("lockgate:", name);
    servers
        .iter()
        .filter_map(|s| redis::Client::open(s.url()).ok()?.get_connection().ok())
        .map(|mut c| c.exists::<_, bool>(&k).unwrap_or(false))
        .filter(|held| *held)
        .count()
}

/// Waits out the delayed-restart rule on freshly started masters.
const STARTUP: Duration = Duration::from_secs(5);

/// Returns once every master has been up long enough to grant under the delayed-restart rule.
/// An acquire succeeds as soon as a majority is past it, so a test that then stops masters
/// must first know the others will grant.
async fn past_restart_rule(urls: Vec<String>) {
    for url in urls {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        loop {
            let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
            let up: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("INFO server has uptime_in_seconds");
            if up * 1000 >= MAX_LEASE.as_millis() as u64 + 1000 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_down_still_grants_three_down_fails_cleanly() {
    let mut servers = masters(5);
    let rl = options(&servers).connect().await.unwrap();
    assert_eq!((rl.server_urls().len(), rl.redlock_config().unwrap().masters), (5, 5));
    let lock = rl.lock("orders", LockOptions::fixed_lease(MAX_LEASE)).unwrap();
    // Fresh masters refuse grants for max_lease + 1 s: the first acquire waits that out.
    let lease = lock.acquire(STARTUP).await.unwrap();
    assert!(lease.is_held());
    // A majority decides: masters that started a little later may still be refusing grants
    // under the restart rule, or may not have answered yet.
    assert!(holders(&servers, "orders") >= 3);
    assert!(lease.release().await.unwrap());
    assert_eq!(holders(&servers, "orders"), 0);

    past_restart_rule(urls(&servers)).await;
    servers[1].stop();
    servers[4].stop();
    let lease = lock.try_acquire().await.unwrap().expect("3 of 5 masters are a majority");
    assert!(lease.is_held());
    assert!(lease.release().await.unwrap());

    servers[2].stop();
    let e = lock.try_acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e:?}");
    // The dead masters fail at once, so the attempt may be decided before the live two answer.
    assert!(e.message().contains("of 5 masters granted, 3 are needed"), "{}", e.message());
    let started = Instant::now();
    let e = lock.acquire(Duration::from_millis(400)).await.unwrap_err();
    // Too few masters answer: CONNECTION with the last attempt's failure, not TIMEOUT.
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("masters granted"), "{}", e.message());
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(holders(&servers, "orders"), 0, "failed attempts were undone");
    rl.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_held_past_the_validity_never_grant() {
    let servers = masters(3);
    let mut o = options(&servers);
    // Wait for late answers instead of timing them out, so they reach the validity check.
    o.node_timeout = Some(Duration::from_secs(3));
    let rl = o.connect().await.unwrap();
    let lock = rl.lock("late", LockOptions::fixed_lease(Duration::from_millis(300))).unwrap();
    lock.acquire(STARTUP).await.unwrap().release().await.unwrap();
    past_restart_rule(urls(&servers)).await;

    // Two of three masters stall for longer than the lease; their grants arrive too late.
    for s in &servers[1..] {
        s.pause();
    }
    let attempt = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    for s in &servers[1..] {
        s.resume();
    }
    let e = attempt.await.unwrap().unwrap_err();
    assert!(e.message().contains("after the lease's validity had run out"), "{e:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(holders(&servers, "late"), 0, "the late grants were undone");
    rl.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_keeps_it_and_losing_the_majority_signals_loss() {
    let mut servers = masters(3);
    let rl = options(&servers).connect().await.unwrap();
    let lock = rl.lock("renewed", LockOptions::renewed_lease(Duration::from_millis(600))).unwrap();
    let lease = lock.acquire(STARTUP).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(lease.is_held(), "renewed past its 600 ms lease");
    // The longest extension first, so no key runs out on its own during the checks below. A
    // majority renewal lets one master lapse when that master stalls for a whole lease (a
    // loaded machine does that), so one master may already lack the key here.
    let k = key("lockgate:", "renewed");
    lease.extend(MAX_LEASE).await.unwrap();
    let lacking = |servers: &[RedisServer]| -> Vec<usize> {
        (0..servers.len()).filter(|&i| !servers[i].raw().exists::<_, bool>(&k).unwrap()).collect()
    };
    let mut gone = lacking(&servers);
    assert!(gone.len() <= 1, "a granted extension left the key on a majority: lacking on {gone:?}");
    if gone.is_empty() {
        let _: () = servers[0].raw().del(&k).unwrap();
        gone.push(0);
    }
    // Extend with a majority works; the minority that lost the key is not re-acquired.
    lease.extend(Duration::from_millis(900)).await.unwrap();
    assert_eq!(lacking(&servers), gone, "extend re-created the key on a master that lost it");
    // Both masters that still hold it die: the next renewal cannot reach a majority and the
    // lease is lost by the time its validity ends.
    for i in (0..servers.len()).filter(|i| !gone.contains(i)) {
        servers[i].stop();
    }
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(3), lease.lost()).await.expect("loss signalled");
    assert_eq!(e.kind(), ErrorKind::NotHeld);
    assert!(started.elapsed() <= Duration::from_millis(1000), "{:?}", started.elapsed());
    assert!(!lease.is_held());
    rl.close().await;
}

/// Sets `KEYS[1]` to `ARGV[1]` only if the server's clock is still before `ARGV[2]` (Unix ms).
const SET_BEFORE_DEADLINE: &str = r#"local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0"#;

/// 8 clients increment a counter kept in a separate server with a GET then a SET that the
/// server refuses once the lease's validity has passed, each only under the Redlock, while masters are killed and restarted empty (at most two down at
/// once; a restarted master refuses grants for one max lease). No increment may be lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_clients_lose_no_update_while_masters_die_and_restart() {
    const CLIENTS: usize = 8;
    const INCREMENTS: usize = 25;
    let servers = Arc::new(std::sync::Mutex::new(masters(5)));
    let counter = RedisServer::start();
    let opts = options(&servers.lock().unwrap());
    let first = urls(&servers.lock().unwrap());
    past_restart_rule(first).await;
    let stop = Arc::new(AtomicBool::new(false));
    let chaos = {
        let (servers, stop) = (Arc::clone(&servers), Arc::clone(&stop));
        tokio::task::spawn_blocking(move || {
            let mut kills = 0;
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(700));
                // Kill two masters together (a minority), then bring them back empty.
                let (a, b) = (i % 5, (i + 2) % 5);
                {
                    let mut s = servers.lock().unwrap();
                    s[a].stop();
                    s[b].stop();
                }
                std::thread::sleep(Duration::from_millis(400));
                {
                    let mut s = servers.lock().unwrap();
                    s[a].restart();
                    s[b].restart();
                }
                kills += 2;
                i += 1;
                // Wait until the restarted pair may grant again before killing another pair,
                // so a majority can always form.
                std::thread::sleep(MAX_LEASE + Duration::from_millis(2100));
            }
            kills
        })
    };
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..CLIENTS {
        let (opts, done, counter_url) = (opts.clone(), Arc::clone(&done), counter.url());
        workers.push(tokio::spawn(async move {
            let rl = opts.connect().await.unwrap();
            let lock = rl.lock("counter", LockOptions::fixed_lease(MAX_LEASE)).unwrap();
            let redis = redis::Client::open(counter_url).unwrap();
            let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
            let mut mine = 0;
            while mine < INCREMENTS {
                let lease = match lock.acquire(Duration::from_secs(30)).await {
                    Ok(l) => l,
                    Err(e) => panic!("acquire failed: {e:?}"),
                };
                let v: i64 = redis::cmd("GET").arg("n").query_async::<Option<i64>>(&mut conn).await.unwrap().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(2)).await;
                // Redlock has no fencing token (PROTOCOL.md §8), so nothing can stop a client
                // that pauses past its validity from writing late. The counter store therefore
                // refuses writes after the lease's validity, by its own clock, and the increment
                // is retried. What remains to check is the masters' side: crashes and restarts
                // must never let two leases be valid at once.
                // The wall clock is read first, so a pause between the two reads only moves the
                // deadline earlier.
                let wall = SystemTime::now();
                let written: i64 = match lease.remaining() {
                    Some(left) => redis::cmd("EVAL")
                        .arg(SET_BEFORE_DEADLINE)
                        .arg(1)
                        .arg("n")
                        .arg(v + 1)
                        .arg((wall + left).duration_since(UNIX_EPOCH).unwrap().as_millis() as u64)
                        .query_async(&mut conn)
                        .await
                        .unwrap(),
                    None => 0,
                };
                if written == 1 {
                    mine += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                let _ = lease.release().await;
            }
            rl.close().await;
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let kills = chaos.await.unwrap();
    let n: i64 = counter.raw().get("n").unwrap();
    assert_eq!(done.load(Ordering::Relaxed), CLIENTS * INCREMENTS);
    assert_eq!(n as usize, CLIENTS * INCREMENTS, "an update was lost");
    assert!(kills >= 2, "masters were killed during the run ({kills})");
}

#[tokio::test]
async fn bad_input_is_rejected_before_connecting() {
    let server = RedisServer::start();
    let host = server.url().trim_start_matches("redis://").trim_end_matches('/').to_string();
    for url in ["redlock://".to_string(), format!("redlock://{host},{host}"), "http://x".to_string()] {
        let e = Client::connect(&url).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}");
    }
    let mut o = ClientOptions::new(format!("redlock://{host}"));
    o.max_lease = Some(Duration::from_secs(5));
    let rl = o.connect().await.unwrap();
    let e = rl.lock("x", LockOptions::fixed_lease(Duration::from_secs(6))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let lock = rl.lock("x", LockOptions::fixed_lease(Duration::from_secs(5))).unwrap();
    assert_eq!(lock.options().lease, rl.redlock_config().unwrap().max_lease);
    let e = lock.try_acquire().await.unwrap_err(); // a fresh master grants nothing yet
    assert_eq!(e.kind(), ErrorKind::Connection);
    assert!(e.message().contains("1 restarted less than max_lease ago"), "{}", e.message());
    assert!(rl.lock("", LockOptions::default()).is_err());
    // Every master unreachable: a clear connection error, with no password in it.
    let e = Client::connect("redlock://:secret@127.0.0.1:1").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection);
    assert!(!e.message().contains("secret"));
}
