//! What the backend keeps of the session: each lease of the client (when it was last
//! confirmed, when the backend's own keepalive of it is due), and the requests sent for the
//! session that no call waits for. [`session`](super::session) keeps them alive and ends them.

use super::config::safe_validity;
use super::request::LeaseId;
use crate::time::{Duration, Instant};

/// One lease of the session.
#[derive(Clone, Debug)]
pub(super) struct SessionLease {
    pub(super) id: LeaseId,
    /// The TTL asked for, in whole seconds: which locks' keys it carries
    /// ([`EtcdConfig::key_ttl_secs`](super::config::EtcdConfig::key_ttl_secs) of their lease).
    pub(super) asked: i64,
    /// The TTL granted (or last set by a keepalive).
    pub(super) ttl: Duration,
    /// The send time of the latest acknowledged keepalive (or of the grant).
    pub(super) confirmed: Instant,
    /// A keepalive of the backend's own is on the wire.
    pub(super) keeping: bool,
    /// A failed keepalive is retried at this instant instead of the regular one.
    pub(super) retry_at: Option<Instant>,
}

impl SessionLease {
    pub(super) fn new(id: LeaseId, asked: i64, ttl_secs: i64, sent: Instant) -> Self {
        let ttl = Duration::from_secs(ttl_secs.max(1) as u64);
        SessionLease { id, asked, ttl, confirmed: sent, keeping: false, retry_at: None }
    }

    /// When the backend's own keepalive of this lease is due (`None` while one is on the wire).
    pub(super) fn due(&self) -> Option<Instant> {
        if self.keeping {
            return None;
        }
        Some(self.retry_at.unwrap_or(self.confirmed + safe_validity(self.ttl) / 3))
    }
}

/// A request no call waits for.
#[derive(Clone, Debug)]
pub(super) enum Background {
    /// The engine's session open (its reply goes to `session_reply`).
    Open { sent: Instant },
    /// The backend's own keepalive of `lease`, sent at `sent` in session epoch `epoch`.
    KeepAlive { lease: LeaseId, sent: Instant, epoch: u64 },
    /// Nothing to learn from the reply (a watch cancel, a revoke after a loss).
    Ignore,
    /// A revoke of the client's close: the backend stays busy until it is answered.
    Closing,
}
