//! Engine time: a monotonic instant supplied by the driver, never read from a clock here.
//!
//! `std::time::Instant` panics on `wasm32-unknown-unknown`, so the engine counts time as a
//! [`Duration`] since an origin the driver picks (process start, `performance.now()` zero...).

use std::ops::{Add, Sub};
pub use std::time::Duration;

/// A point on the driver's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(Duration);

impl Instant {
    /// The instant `since_origin` after the driver's chosen origin.
    pub const fn from_origin(since_origin: Duration) -> Self {
        Instant(since_origin)
    }

    /// Milliseconds since the origin, the unit JavaScript drivers use.
    pub fn from_millis_f64(ms: f64) -> Self {
        if ms.is_finite() && ms > 0.0 {
            Instant(Duration::from_secs_f64(ms / 1000.0))
        } else {
            Instant(Duration::ZERO)
        }
    }

    /// Time since the origin.
    pub const fn since_origin(self) -> Duration {
        self.0
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(rhs))
    }
}
