//! What the Redis mutex costs inside the server, counted by the server itself (`INFO
//! commandstats`, which counts every command a script runs as well as the `EVALSHA`), for the
//! two operations the benchmarks measure: an uncontended acquire + release, and a contended
//! acquisition (the waiter's queueing ACQUIRE plus the holder's RELEASE that hands over).
//! Counts, never timings: a script change that adds commands fails here (issue 30).
#![cfg(feature = "tokio")]

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use lockgate_core::native::ClientOptions;
use lockgate_core::LockOptions;
use support::RedisServer;

/// Commands the test itself sends to read or reset the counters, or to watch the queue; never
/// sent by a lockgate script.
const PROBES: [&str; 4] = ["info", "config|resetstat", "zcard", "hello"];

fn reset(c: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(c).unwrap();
}

/// Calls per command since the last reset, the test's own probes left out.
fn counts(c: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().unwrap()))
        })
        .filter(|(name, _)| !PROBES.contains(&name.as_str()))
        .collect()
}

fn total(m: &BTreeMap<String, u64>) -> u64 {
    m.values().sum()
}

/// Options of a client as the benchmarks run them: the default label (`<host>:<pid>`), a
/// watchdog lease far longer than the test, so no renewal is counted.
fn options(url: &str) -> ClientOptions {
    ClientOptions::new(url)
}

fn lease() -> LockOptions {
    LockOptions::default()
}

#[tokio::test]
async fn uncontended_pair_command_count() {
    let server = RedisServer::start();
    let client = options(&server.url()).connect().await.unwrap();
    let lock = client.lock("count", lease()).unwrap();
    let mut raw = server.raw();
    // The first pair loads the scripts (NOSCRIPT, then EVAL); the measured ones are warm.
    lock.acquire(Duration::from_secs(1))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    reset(&mut raw);
    let held = lock.acquire(Duration::from_secs(1)).await.unwrap();
    let acquire = counts(&mut raw);
    reset(&mut raw);
    assert!(held.release().await.unwrap());
    let release = counts(&mut raw);
    eprintln!("uncontended acquire: {} {acquire:?}", total(&acquire));
    eprintln!("uncontended release: {} {release:?}", total(&release));
    // Version 17: 11 + 5. Version 19: EVALSHA, SET NX GET, EXISTS (queue), HSET + PEXPIRE (the
    // label), TIME, SET ... GET (fence); EVALSHA, GET, ZPOPMIN, DEL (key and hash).
    assert_eq!(total(&acquire), 7, "{acquire:?}");
    assert_eq!(total(&release), 4, "{release:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_acquisition_command_count() {
    let server = RedisServer::start();
    let a = options(&server.url()).connect().await.unwrap();
    let b = options(&server.url()).connect().await.unwrap();
    let lock_a = a.lock("handoff", lease()).unwrap();
    let lock_b = b.lock("handoff", lease()).unwrap();
    let mut raw = server.raw();

    // Two rounds: the first subscribes the waiter's client and loads the scripts, the second is
    // measured.
    let mut measured = None;
    for round in 0..2 {
        let held = lock_a.acquire(Duration::from_secs(1)).await.unwrap();
        reset(&mut raw);
        let lock_b = lock_b.clone();
        let waiter =
            tokio::spawn(async move { lock_b.acquire(Duration::from_secs(20)).await.unwrap() });
        while redis::cmd("ZCARD")
            .arg("lockgate:{handoff}:queue")
            .query::<usize>(&mut raw)
            .unwrap()
            < 1
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let queued = counts(&mut raw);
        reset(&mut raw);
        assert!(held.release().await.unwrap());
        let next = waiter.await.unwrap();
        let handoff = counts(&mut raw);
        assert!(next.fencing_token().unwrap() > held.fencing_token().unwrap());
        next.release().await.unwrap();
        if round == 1 {
            measured = Some((queued, handoff));
        }
    }
    let (queued, handoff) = measured.unwrap();
    eprintln!("waiter's queueing acquire: {} {queued:?}", total(&queued));
    eprintln!(
        "holder's handing-over release: {} {handoff:?}",
        total(&handoff)
    );
    // Version 17: 14 + 14. Version 19: EVALSHA, SET NX GET, TIME, HSET (entry and label),
    // ZRANGE (tail), ZADD, PEXPIRE (queue), PTTL (hash), GET (fence), PTTL (holder); EVALSHA, GET,
    // ZPOPMIN, HMGET, TIME, HDEL, PTTL (the head's label), SET, SET ... GET (fence), PUBLISH.
    assert_eq!(total(&queued), 10, "{queued:?}");
    assert_eq!(total(&handoff), 10, "{handoff:?}");
}
