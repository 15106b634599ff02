//! The client's session with the backend, which waiting acquires need before they queue: a
//! notification subscription (Redis), a ZooKeeper session, an etcd lease, a database
//! connection. A backend without one is always [`Session::Active`].

use super::io::RequestId;
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
