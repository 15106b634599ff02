//! What the ZooKeeper fault tests (`zookeeper_faults.rs`, `zookeeper_restart.rs`) share: a
//! client with a short session, and contending workers' holdings checked for exclusivity.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use lockgate_core::connect::{OptionValue, Spelling};
use lockgate_core::native::{Client, ClientOptions, Lease};

/// A client of `url` asking for a `session` timeout; `response` bounds each request (and is
/// how long a silent member is waited for before the client moves on).
pub async fn client(url: &str, session: Duration, response: Option<Duration>) -> Client {
    let mut o = ClientOptions::new(url);
    o.set(
        "session_timeout",
        OptionValue::Number(session.as_secs_f64()),
        &Spelling::RUST,
    )
    .unwrap();
    if let Some(r) = response {
        o.set(
            "response_timeout",
            OptionValue::Number(r.as_secs_f64()),
            &Spelling::RUST,
        )
        .unwrap();
    }
    o.connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// One holding as the holder saw it: its token, when it was granted, and the last instant the
/// holder still knew it held (its release, or the last check before its loss).
#[derive(Clone, Debug)]
pub struct Holding {
    pub token: u64,
    pub granted: Instant,
    pub until: Instant,
    /// Which worker held (shown when a check fails).
    pub who: usize,
}

/// Holds `lease` for `hold`, checking every few ms that it is still held, then releases it;
/// returns when the holder last knew it held.
pub async fn hold_then_release(lease: Lease, hold: Duration) -> Instant {
    let end = Instant::now() + hold;
    let mut known = Instant::now();
    while Instant::now() < end {
        if !lease.is_held() {
            break;
        }
        known = Instant::now();
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    if lease.is_held() {
        known = Instant::now();
    }
    let _ = lease.release().await;
    known
}

/// Never two holdings at once, and tokens strictly increase in grant order.
pub fn check_exclusive(mut holdings: Vec<Holding>) {
    holdings.sort_by_key(|h| h.granted);
    for w in holdings.windows(2) {
        assert!(
            w[1].granted >= w[0].until,
            "two holders at once: {:?} and {:?}",
            w[0],
            w[1]
        );
        assert!(
            w[1].token > w[0].token,
            "the token did not increase: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
}
