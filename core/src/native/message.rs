//! What lock handles send to a client's driver task, and what comes back.

use tokio::sync::{oneshot, watch};

use super::lease_state::LeaseState;
use crate::engine::{LeaderInfo, LeaseId, Primitive, Wait};
use crate::error::Result;
use crate::options::LockOptions;
use crate::time::Duration;

/// A successful acquisition, handed to the `Lock` that asked.
pub(crate) struct Acquired {
    pub lease: LeaseId,
    /// `None` where the backend gives no fencing token (Redlock).
    pub fencing_token: Option<u64>,
    pub state: watch::Receiver<LeaseState>,
}

/// Requests from handles to the driver task, the same for every backend, so the handles
/// ([`Lock`](super::Lock), [`Lease`](super::Lease)) are one type for every backend. What a
/// backend cannot do is `UNSUPPORTED` from its engine (the handles refuse it first).
pub(crate) enum Msg {
    Acquire {
        ticket: u64,
        name: String,
        primitive: Primitive,
        options: LockOptions,
        wait: Wait,
        /// The caller's span when it asked: the parent of the acquire's span.
        span: tracing::Span,
        reply: oneshot::Sender<Result<Option<Acquired>>>,
    },
    /// Re-enter a held lease (reentrant locks).
    Reacquire {
        lease: LeaseId,
        reply: oneshot::Sender<Result<Option<Acquired>>>,
    },
    Observe {
        name: String,
        reply: oneshot::Sender<Result<Option<LeaderInfo>>>,
    },
    Inspect {
        name: String,
        /// The handle's primitive, or one of the kind asked by name.
        primitive: Primitive,
        reply: oneshot::Sender<Result<crate::inspect::Snapshot>>,
    },
    Break {
        name: String,
        kind: crate::inspect::Kind,
        fencing_token: Option<u64>,
        reply: oneshot::Sender<Result<Option<crate::break_lock::Broken>>>,
    },
    List {
        prefix: String,
        limit: Option<u64>,
        cursor: Option<String>,
        reply: oneshot::Sender<Result<crate::listing::Page>>,
    },
    /// Adopt the lease an identity names (another client exported it).
    Adopt {
        identity: String,
        options: LockOptions,
        reply: oneshot::Sender<Result<Option<Acquired>>>,
    },
    /// A held lease's identity, for another client to adopt.
    Export {
        lease: LeaseId,
        reply: oneshot::Sender<Result<String>>,
    },
    Cancel {
        ticket: u64,
    },
    Release {
        lease: LeaseId,
        reply: Option<oneshot::Sender<Result<bool>>>,
    },
    Extend {
        lease: LeaseId,
        duration: Duration,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Turn the engine's telemetry on (sent first by `connect`), or change what it carries.
    Telemetry(crate::engine::TelemetryConfig),
    /// Hand every telemetry event to this listener too: as it is raised, or (`when_idle`) once
    /// the driver has nothing else ready.
    Listen { listener: super::telemetry::Listener, when_idle: bool },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

