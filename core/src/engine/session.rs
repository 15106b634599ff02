//! The client's session with the backend: a notification subscription (Redis), a ZooKeeper
//! session, an etcd lease, a database connection. Waiting acquires need it before they queue
//! (every attempt does where [`Backend::attempts_need_session`](super::Backend::attempts_need_session)).
//! Leases live and die with it: when the backend signals that it ended
//! ([`Signal::SessionLost`](super::Signal::SessionLost)), every lease is lost at once and the
//! next wait opens a new one. While the session lives on but cannot be reached
//! ([`Signal::Unreachable`](super::Signal::Unreachable), until
//! [`Signal::Reachable`](super::Signal::Reachable)) every lease is at risk (`risk.rs`). A Redis
//! lease lives on its own key, a one-lease session of its own, so the subscription ending loses
//! nothing. A backend without a session is always
//! [`Session::Active`].

use super::ids::RequestId;
use crate::time::Instant;

/// Where the session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Session {
    /// Not opened (or lost); opened by the next waiting acquire.
    None,
    /// The open request is on the wire.
    Pending(RequestId),
    /// Opening failed; try again at the instant.
    RetryAt(Instant),
    /// Usable.
    Active,
}

impl Session {
    /// The request whose reply opens the session, if one is on the wire.
    pub fn request(&self) -> Option<RequestId> {
        match self {
            Session::Pending(id) => Some(*id),
            _ => None,
        }
    }
}
