//! Pending acquires: one record per acquire not yet granted, failed or cancelled, with its
//! deadline, its place in the attempt cycle and its retry backoff.

use std::sync::Arc;

use super::io::Wait;
use crate::time::{Duration, Instant};

/// The first pause before retrying an attempt that failed in transport.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between retries (and between background cleanup retries).
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Where an acquire is in its attempt cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireState {
    /// Waiting for the backend's session before it may wait on the server.
    AwaitSession,
    /// An attempt is on the wire.
    InFlight,
    /// In the server's queue; re-check (heartbeat) at `recheck_at`.
    Queued { recheck_at: Instant },
    /// The last attempt failed or was refused; try again at the instant.
    RetryAt(Instant),
}

/// One pending acquire. `T` is the backend's target (keys, path, row).
pub(crate) struct PendingAcquire<T> {
    pub target: Arc<T>,
    /// The lock's name and primitive (what the lease's identity names).
    pub held: Arc<crate::adopt::Held>,
    pub token: Arc<str>,
    pub lease: Duration,
    pub auto_renew: bool,
    pub entry_ttl: Duration,
    /// The shortest hold asked for (`LockOptions::min_hold`).
    pub min_hold: Option<Duration>,
    /// The longest hold asked for (`LockOptions::max_hold`).
    pub max_hold: Option<Duration>,
    pub wait: Wait,
    pub deadline: Option<Instant>,
    pub state: AcquireState,
    /// Earliest instant at which a grant to us can have started: the send time of the last
    /// attempt the server answered "queued" (or the first one sent). `None` until sent.
    pub grant_lower_bound: Option<Instant>,
    /// Whether something of this acquire may be on the server (sent and not undone since).
    pub dirty: bool,
    /// The largest fence a "queued" answer reported: a wake-up carrying a fence no larger
    /// refers to an older grant (delayed message) and proves nothing about now.
    pub seen_fence: u64,
    pub backoff: Duration,
    /// Why the last attempt failed, for the timeout's message.
    pub last_failure: Option<String>,
    /// The `CONNECTION` error of the last attempt (or session opening), cleared by any other
    /// answer. A wait that ends while it is set fails with it (`CONNECTION`), not `TIMEOUT`:
    /// nobody was seen holding the lock, the server could not be reached.
    pub unreachable: Option<crate::error::Error>,
    /// A re-check was asked for while an attempt was on the wire: if that attempt answers
    /// "queued", re-check at once.
    pub recheck_soon: bool,
}

impl<T> PendingAcquire<T> {
    /// Heartbeat period of a queue entry; also bounds how stale a grant's lower bound can be.
    pub fn recheck_interval(&self) -> Duration {
        (self.entry_ttl / 3)
            .min(self.lease / 3)
            .max(Duration::from_millis(1))
    }

    /// The earliest instant this acquire has work: its wait deadline, or its queue re-check or
    /// retry, whichever comes first.
    pub fn timer(&self) -> Option<Instant> {
        let state = match self.state {
            AcquireState::Queued { recheck_at } => Some(recheck_at),
            AcquireState::RetryAt(t) => Some(t),
            AcquireState::AwaitSession | AcquireState::InFlight => None,
        };
        match (self.deadline, state) {
            (Some(d), Some(t)) => Some(d.min(t)),
            (d, t) => d.or(t),
        }
    }

    /// How long an undo of this acquire is worth retrying: what it may have left lives no
    /// longer than its lease or its queue entry.
    pub fn undo_span(&self) -> Duration {
        self.lease.max(self.entry_ttl)
    }
}
