//! Network model: latencies and loss, and the deterministic randomness that drives them.

use lockgate_core::random::{RandomSource, SeededRandom};
use lockgate_core::time::Duration;

/// How messages travel between engines and the server.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// One-way latency of commands and replies (uniform in the range).
    pub latency: (Duration, Duration),
    /// Latency of the notification connection (subscribe confirmations and pushed messages).
    pub notify_latency: (Duration, Duration),
    /// Probability that a pipeline's reply is lost after it executed (a transport error instead).
    pub drop_reply: f64,
    /// Probability that a pipeline is lost before it reached the server (a transport error).
    pub drop_request: f64,
    /// Probability that one pushed message is silently lost.
    pub drop_notification: f64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency: (Duration::from_micros(200), Duration::from_millis(3)),
            notify_latency: (Duration::from_micros(200), Duration::from_millis(3)),
            drop_reply: 0.0,
            drop_request: 0.0,
            drop_notification: 0.0,
        }
    }
}

impl NetConfig {
    /// A fixed latency in both directions and on both connections, no loss.
    pub fn fixed(latency: Duration) -> Self {
        NetConfig {
            latency: (latency, latency),
            notify_latency: (latency, latency),
            ..Default::default()
        }
    }

    /// The longest one-way trip of anything.
    pub fn max_latency(&self) -> Duration {
        self.latency.1.max(self.notify_latency.1)
    }

    pub fn lossy(mut self, drop_reply: f64, drop_request: f64, drop_notification: f64) -> Self {
        self.drop_reply = drop_reply;
        self.drop_request = drop_request;
        self.drop_notification = drop_notification;
        self
    }
}

/// Deterministic randomness for the simulator itself (not the engines').
pub struct Rng(SeededRandom);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SeededRandom::new(mix(seed, 0x5151)))
    }

    pub fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.u64() % (hi - lo + 1)
        }
    }

    /// Uniform duration in the range, at microsecond granularity plus a sub-µs part.
    pub fn duration(&mut self, (lo, hi): (Duration, Duration)) -> Duration {
        let ns = self.between(lo.as_nanos() as u64, hi.as_nanos() as u64);
        Duration::from_nanos(ns)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.u64() as usize % items.len()]
    }
}

/// Derives independent seeds (SplitMix finalizer), so seeds `s` and `s + 1` share nothing.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
