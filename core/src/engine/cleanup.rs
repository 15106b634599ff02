//! Releases the engine sends on its own behalf: a lost lease, an abandoned attempt, a release
//! whose reply never came. Retried with backoff until what they remove would have expired.

use std::sync::Arc;

use crate::time::{Duration, Instant};

/// One background release. `T` is the backend's target.
pub(crate) struct Cleanup<T> {
    pub target: Arc<T>,
    pub token: Arc<str>,
    pub due: Instant,
    pub give_up_at: Instant,
    pub in_flight: bool,
    pub backoff: Duration,
    /// Acquires whose callers are told once this cleanup first answers (see `held_back`).
    pub answers: Vec<super::ids::OpId>,
}
