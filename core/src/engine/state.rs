//! The engine's bookkeeping: one record per pending acquire, held lease, and cleanup.

use std::sync::Arc;

use crate::engine::io::{OpId, Wait};
use crate::engine::io::Primitive;
use crate::redis::keys::{MutexKeys, SharedKeys};
use crate::redis::{holders, mutex, Script};
use crate::time::{Duration, Instant};

/// What one acquire works on: the keys of its primitive and the scripts that drive them.
#[derive(Debug)]
pub(crate) struct Target {
    /// The shared-holder family (semaphore, read-write, election) rather than the mutex.
    pub shared: bool,
    /// The keys, in the scripts' order.
    pub keys: Vec<String>,
    /// ARGV the shared ACQUIRE takes after the six it has in common with the mutex's: kind,
    /// limit, barge, value, and the setting every participant must agree on with its value
    /// (PROTOCOL.md §7; empty for none).
    pub acquire_extra: [String; 6],
    /// The primitive, as error messages name it.
    pub what: &'static str,
}

impl Target {
    /// The target of `primitive` named `name` (both validated).
    pub fn new(prefix: &str, name: &str, primitive: &Primitive) -> Target {
        let shared_target = |what: &'static str, kind: &str, mode: &str, limit: u32, barge: bool, value: &str, setting: (&str, String)| Target {
            shared: true,
            keys: SharedKeys::new(prefix, kind, name).all().map(String::from).to_vec(),
            acquire_extra: [
                mode.into(),
                limit.to_string(),
                if barge { "1" } else { "0" }.into(),
                value.into(),
                setting.0.into(),
                setting.1,
            ],
            what,
        };
        let none = || ("", String::new());
        match primitive {
            Primitive::Mutex => Target {
                shared: false,
                keys: MutexKeys::new(prefix, name).all().map(String::from).to_vec(),
                acquire_extra: Default::default(),
                what: "mutex",
            },
            Primitive::Semaphore { permits } => {
                shared_target("semaphore", "sem", "r", *permits, false, "", ("permits", permits.to_string()))
            }
            Primitive::Read { writers_first } => shared_target(
                "read-write lock",
                "rw",
                "r",
                0,
                !writers_first,
                "",
                ("writers_first", writers_first.to_string()),
            ),
            // A writer behaves the same under either policy (it never passes anyone), so the
            // write half neither records nor checks writers_first.
            Primitive::Write => shared_target("read-write lock", "rw", "w", 0, false, "", none()),
            Primitive::Leader { value } => shared_target("election", "elect", "w", 0, false, value, none()),
        }
    }

    pub fn acquire_script(&self) -> &'static Script {
        if self.shared { &holders::ACQUIRE } else { &mutex::ACQUIRE }
    }

    pub fn release_script(&self) -> &'static Script {
        if self.shared { &holders::RELEASE } else { &mutex::RELEASE }
    }

    /// EXTEND and how many keys it takes (the mutex's needs only the lock key).
    pub fn extend_script(&self) -> (&'static Script, usize) {
        if self.shared { (&holders::EXTEND, 5) } else { (&mutex::EXTEND, 1) }
    }
}

/// A script invocation, kept so a NOSCRIPT reply can be answered with a full EVAL.
#[derive(Clone, Debug)]
pub(crate) struct ScriptCall {
    pub script: &'static Script,
    /// The lock's keys (shared, not copied per call); the script takes the first `key_count`.
    pub target: Arc<Target>,
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
    Observe(OpId),
}

/// A request on the wire and what each of its commands was for.
pub(crate) struct InFlight {
    pub sent: Instant,
    pub calls: Vec<(Purpose, ScriptCall)>,
    /// A trailing `WAIT` was sent after the calls (replica-acknowledged mode).
    pub waited: Option<crate::engine::ReplicaAcks>,
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
    pub target: Arc<Target>,
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
    pub target: Arc<Target>,
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
    /// The fencing token of the grant (handed out again on reentry).
    pub fence: u64,
    /// Reentrant acquisitions not yet released; the lease is released when the last one is.
    pub holds: u32,
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
    pub target: Arc<Target>,
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
