//! Transient server errors against a real redis-server (PROTOCOL.md §4): while the server is
//! busy running a long script it answers every other client `-BUSY`. Those replies are
//! retryable `CONNECTION` errors: a queued acquire keeps waiting, a renewal retries until the
//! lease's local validity would run out, and a release made during the spell takes effect right
//! after it (the next waiter gets the lock then, not after the holder's lease).
#![cfg(feature = "tokio")]

mod support;

use std::thread;
use std::time::{Duration, Instant};

use lockgate_core::native::ClientOptions;
use lockgate_core::{ErrorKind, LockOptions};
use support::RedisServer;

/// Spins for `ARGV[1]` ms of server time (TIME is real time inside a script).
const SPIN: &str = r#"local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local stop = now_ms() + tonumber(ARGV[1])
while now_ms() < stop do end
return 1
"#;

/// Starts a busy spell of `ms` on its own connection and returns once the server answers BUSY.
fn busy_spell(server: &RedisServer, ms: u64) -> thread::JoinHandle<()> {
    let mut spin = server.raw();
    let spinner = thread::spawn(move || {
        let _: i64 = redis::cmd("EVAL").arg(SPIN).arg(0).arg(ms).query(&mut spin).unwrap();
    });
    let mut probe = server.raw();
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        match redis::cmd("PING").query::<String>(&mut probe) {
            Err(e) if e.code() == Some("BUSY") => return spinner,
            _ => {
                assert!(Instant::now() < give_up, "the server never answered BUSY");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_replies_are_retried_as_for_a_lost_connection() {
    let server = RedisServer::start();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("busy-reply-threshold").arg(50).query(&mut server.raw()).unwrap();
    let (a, b, c) = (
        ClientOptions::new(server.url()).connect().await.unwrap(),
        ClientOptions::new(server.url()).connect().await.unwrap(),
        ClientOptions::new(server.url()).connect().await.unwrap(),
    );
    let held = a.lock("r", LockOptions::fixed_lease(Duration::from_secs(20))).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
    // A 3 s lease renewed every second: its validity outlasts a 1.5 s spell with room to retry.
    let renewed = c.lock("w", LockOptions::renewed_lease(Duration::from_secs(3))).unwrap().acquire(Duration::from_secs(2)).await.unwrap();
    let waiter_lock = b.lock("r", LockOptions::default()).unwrap();
    let waiter = tokio::spawn(async move { waiter_lock.acquire(Duration::from_secs(8)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let spell = tokio::task::block_in_place(|| busy_spell(&server, 1500));
    // (c) A release during the spell cannot land now: it reports CONNECTION (retryable) and is
    // retried in the background.
    let e = held.release().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "release during BUSY: {e}");
    assert!(e.retryable());
    tokio::task::block_in_place(|| spell.join().unwrap());
    let spell_end = Instant::now();

    // (a) The queued acquire kept waiting, and (c) got the lock right after the spell, once the
    // background release landed (its backoff is at most 1 s), not after the 20 s lease.
    let lease = waiter.await.unwrap().expect("the waiter still gets the lock after the spell");
    let after = spell_end.elapsed();
    assert!(after < Duration::from_millis(3000), "granted {after:?} after the spell");
    assert!(lease.fencing_token().unwrap() > held.fencing_token().unwrap());

    // (b) The renewals answered BUSY were retried: the lease was never marked lost, and it is
    // still held after its next renewal.
    assert!(renewed.lost_reason().is_none(), "lost: {:?}", renewed.lost_reason());
    assert!(renewed.is_held());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(renewed.is_held(), "lost after the spell: {:?}", renewed.lost_reason());

    assert!(lease.release().await.unwrap());
    assert!(renewed.release().await.unwrap());
    for client in [a, b, c] {
        client.close().await;
    }
}
