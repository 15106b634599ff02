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
    /// Releases whose first try failed in transport: their callers are told once a retry lands
    /// (the release landed) or is given up, `UNDO_WAIT` at most (see `held_back`); with each,
    /// whether its lease was still valid when that try failed.
    pub releases: Vec<(super::ids::OpId, bool)>,
}

impl<T> Cleanup<T> {
    /// Every caller waiting for this cleanup, acquires and releases: told what they were held
    /// back with when it ends before answering them (voided, or failed as a request).
    pub fn waiting(self) -> impl Iterator<Item = super::ids::OpId> {
        self.answers.into_iter().chain(self.releases.into_iter().map(|(op, _)| op))
    }
}
