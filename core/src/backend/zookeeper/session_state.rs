//! What the ZooKeeper backend knows of its sessions — the client's own and the extra ones sized
//! from short leases (`sessions.rs` keeps them): plain state, below the backend that holds it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::OpId;
use crate::time::{Duration, Instant};

/// One session as the server opened it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SessionInfo {
    pub(super) id: i64,
    pub(super) timeout: Duration,
}

/// One extra session of the client.
#[derive(Clone, Debug, Default)]
pub(super) struct Extra {
    /// Its id and negotiated timeout, once open.
    pub(super) session: Option<SessionInfo>,
    /// Its epoch: replies to calls of an older one speak of nodes that died with it.
    pub(super) epoch: u64,
    /// The send time of the latest request the leader answered in it.
    pub(super) confirmed: Option<Instant>,
}

/// The acquire of each token that holds, kept to revoke it if its extra session ends.
pub(super) type Held = HashMap<Arc<str>, OpId>;
