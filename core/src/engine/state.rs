//! The engine's bookkeeping: one record per pending acquire, held lease, and cleanup.

use std::sync::Arc;

use crate::engine::io::{OpId, Wait};
use crate::redis::keys::MutexKeys;
use crate::redis::scripts::Script;
use crate::time::{Duration, Instant};

/// A script invocation, kept so a NOSCRIPT reply can be answered with a full EVAL.
#[derive(Clone, Debug)]
pub(crate) struct ScriptCall {
    pub script: &'static Script,
    /// The lock's keys (shared, not copied per call); the script takes the first `key_count`
    /// of them in [`MutexKeys::all`] order.
    pub keys: Arc<MutexKeys>,
    pub key_count: usize,
    pub args: Vec<String>,
    /// Send the body with EVAL (after NOSCRIPT) instead of EVALSHA.
    pub full: bool,
}

/// Why a command in a pipeline was sent; decides what its reply does.
#[derive(Clone, Debug)]
pub(crate) enum Purpose {
    Acquire(OpId),
    /// The last field tags the PEXPIRE (see [`LeaseState::send_pexpire`]).
    Renew(crate::engine::io::LeaseId, u64),
    Extend(OpId, crate::engine::io::LeaseId, Duration, u64),
    Release(OpId, crate::engine::io::LeaseId),
    Cleanup(u64),
}

/// A request on the wire and what each of its commands was for.
pub(crate) struct InFlight {
    pub sent: Instant,
    pub calls: Vec<(Purpose, ScriptCall)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireState {
    /// Waiting for the client channel subscription before queueing.
    AwaitSubscribe,
    /// An ACQUIRE is on the wire.
    InFlight,
    /// In the server's queue; re-check (heartbeat) at `recheck_at`.
    Queued { recheck_at: Instant },
    /// The last attempt failed in transport; try again at the instant.
    RetryAt(Instant),
}

pub(crate) struct AcquireOp {
    pub keys: Arc<MutexKeys>,
    pub token: String,
    pub lease: Duration,
    pub auto_renew: bool,
    pub entry_ttl: Duration,
    pub wait: Wait,
    pub deadline: Option<Instant>,
    pub state: AcquireState,
    /// Earliest instant at which a grant to us can have started: the send time of the last
    /// ACQUIRE the server answered "queued" (or the first one sent). `None` until sent.
    pub grant_lower_bound: Option<Instant>,
    /// The largest fence a "busy" reply reported: a grant notification carrying a fence no
    /// larger refers to an older grant (delayed message) and proves nothing about now.
    pub seen_fence: u64,
    pub backoff: Duration,
}

impl AcquireOp {
    /// Heartbeat period of the queue entry; also bounds how stale a grant's lower bound can be.
    pub fn recheck_interval(&self) -> Duration {
        (self.entry_ttl / 3)
            .min(self.lease / 3)
            .max(Duration::from_millis(1))
    }
}

pub(crate) struct LeaseState {
    pub keys: Arc<MutexKeys>,
    pub token: String,
    pub lease: Duration,
    pub auto_renew: bool,
    pub valid_until: Instant,
    pub next_renew: Option<Instant>,
    pub renewing: bool,
    pub releasing: bool,
    /// Renewals and extends sent but not answered: (tag, duration, send time + duration).
    pub pexpires: Vec<(u64, Duration, Instant)>,
    pub next_tag: u64,
}

impl LeaseState {
    /// Notes a PEXPIRE of `d` sent at `now` and returns its tag. Until it is answered the lease
    /// is certain only until `now + d`, since it may shorten the lease when it runs.
    pub fn send_pexpire(&mut self, now: Instant, d: Duration) -> u64 {
        self.next_tag += 1;
        self.valid_until = self.valid_until.min(now + d);
        self.pexpires.push((self.next_tag, d, now + d));
        self.next_tag
    }

    /// Settles PEXPIRE `tag` and returns its duration. If it succeeded in a request sent at
    /// `sent`, the server expiry is now at least `sent + d`; a PEXPIRE still unanswered may run
    /// after it and set its own, so the lease is certain until the smaller of those.
    pub fn settle_pexpire(&mut self, tag: u64, succeeded: Option<Instant>) -> Option<Duration> {
        let i = self.pexpires.iter().position(|p| p.0 == tag)?;
        let (_, d, _) = self.pexpires.remove(i);
        if let Some(sent) = succeeded {
            self.valid_until = self
                .pexpires
                .iter()
                .map(|p| p.2)
                .fold(sent + d, Instant::min);
        }
        Some(d)
    }
}

pub(crate) struct Cleanup {
    pub keys: Arc<MutexKeys>,
    pub token: String,
    pub due: Instant,
    pub give_up_at: Instant,
    pub in_flight: bool,
    pub backoff: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subscription {
    None,
    Pending,
    RetryAt(Instant),
    Active,
}
