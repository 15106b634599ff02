//! The seam between the backend-agnostic engine and one backend's wire rules.
//!
//! The engine ([`LockEngine`](super::LockEngine)) decides *what* must happen to a lock: attempt
//! it, re-check a queued wait, renew or extend a lease, release it, undo what an abandoned
//! attempt may have left. A [`Backend`] decides *how* that is said on its wire (Lua scripts in a
//! pipeline, one round of votes across N masters, a znode create, a row insert) and what each
//! reply means, in the engine's words: an [`Attempt`] was granted, queued, refused...; a
//! [`Renewal`] was confirmed or refused; a [`Release`] was done or left unconfirmed.
//!
//! A backend never keeps operation or lease state of its own beyond what its wire needs (the
//! calls on the wire, its session, its per-connection caches): deadlines, backoff, reentrant
//! holds, validity, renewal schedules, loss and cleanups are the engine's, written once.

use std::sync::Arc;

use super::ids::{LeaseId, OpId};
use super::io::LeaderInfo;
use crate::error::{Error, Result};
use crate::inspect::{Holder, Kind, Snapshot};
use crate::listing::{Found, Query};
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

use super::ids::RequestId;

/// The engine's id counter: operations, leases, requests and cleanups share it, so an id names
/// one thing for the engine's whole life.
#[derive(Debug)]
pub struct Ids(u64);

impl Default for Ids {
    fn default() -> Self {
        Ids(1)
    }
}

impl Ids {
    /// The next unused id.
    pub fn fresh(&mut self) -> u64 {
        let id = self.0;
        self.0 += 1;
        id
    }

    /// The next unused id, as a request id.
    pub fn request(&mut self) -> RequestId {
        RequestId(self.fresh())
    }
}

/// What a backend may touch while it handles one input: the instant, the shared id counter, the
/// outgoing request queue (in emission order) and the injected randomness.
pub struct Ctx<'a, R> {
    /// The input's instant.
    pub now: Instant,
    /// Ids for requests (and anything else the backend numbers).
    pub ids: &'a mut Ids,
    /// Requests for the driver, performed in this order.
    pub out: &'a mut std::collections::VecDeque<R>,
    /// Jitter and anything else random.
    pub rng: &'a mut dyn RandomSource,
}

/// Why the engine asked for a call; a backend hands it back unchanged with the call's
/// [`Answer`] (and may look at it: a write that must reach replicas, a round that needs a
/// majority rather than every master).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Purpose {
    /// An attempt of acquire `OpId` (the first, a re-check of a queued wait, or a retry).
    Acquire(OpId),
    /// A watchdog renewal of a lease; the last field tags its pending expiry (see `lease.rs`).
    Renew(LeaseId, u64),
    /// An extend the caller asked for, to the duration given; tagged like a renewal.
    Extend(OpId, LeaseId, Duration, u64),
    /// A release the caller asked for.
    Release(OpId, LeaseId),
    /// A release the engine sends on its own behalf (a lost lease, an abandoned attempt);
    /// retried in the background while the backend says it may help.
    Cleanup(u64),
    /// Reading an election's leader.
    Observe(OpId),
    /// Reading a lock's holders and waiters.
    Inspect(OpId),
    /// Removing a holder's entry an operator broke (answered with a [`Verdict::Release`]).
    Break(OpId),
    /// Reading one page of the names under a prefix (see `crate::listing`).
    List(OpId),
}

impl Purpose {
    /// Whether the call writes a grant or an expiry the caller will rely on (what a
    /// replica-acknowledged mode must confirm).
    pub fn confirms_validity(&self) -> bool {
        matches!(self, Purpose::Acquire(_) | Purpose::Renew(..) | Purpose::Extend(..))
    }
}

/// What the engine asks a backend to do for one [`Purpose`], with everything the wire needs.
#[derive(Debug)]
pub enum Action<'a, T> {
    /// Take the lock for `token`, or (`once` false) join its wait queue where the backend has
    /// one. Sent again with the same token to re-check a queued wait or to retry.
    Acquire {
        /// The lock.
        target: &'a Arc<T>,
        /// The owner token of this acquire.
        token: &'a str,
        /// The lease asked for.
        lease: Duration,
        /// How long a queue entry lives without a re-check.
        entry_ttl: Duration,
        /// A one-shot attempt (never queue).
        once: bool,
    },
    /// Set the remaining lease of `token`'s hold to `duration`, only if `token` still holds it.
    Extend {
        /// The lock.
        target: &'a Arc<T>,
        /// The holder's token.
        token: &'a str,
        /// The new remaining lease.
        duration: Duration,
    },
    /// Remove whatever `token` holds or has queued on the lock (owner-only; harmless if
    /// nothing is left).
    Release {
        /// The lock.
        target: &'a Arc<T>,
        /// The owner token.
        token: &'a str,
    },
    /// Read the current leader of an election.
    Observe {
        /// The election.
        target: &'a Arc<T>,
    },
    /// Read a lock's holders and waiters, changing nothing (an unknown name reads as empty).
    Inspect {
        /// The lock.
        target: &'a Arc<T>,
        /// Which primitive it is read as.
        kind: Kind,
    },
    /// Remove `holder`'s entry (read by an [`Action::Inspect`] just before) as its own release
    /// would, waking the next waiter: by its owner token where it has one, else by its entry's
    /// name (a peer's). Only that entry: if it is gone, nothing is removed (`was_held` false).
    Break {
        /// The lock.
        target: &'a Arc<T>,
        /// The holder to remove.
        holder: &'a Holder,
    },
    /// Read one page of the lock names under a prefix (their kinds; counts come from an
    /// inspect of each), changing nothing; never blocking the server (PROTOCOL.md §16).
    List {
        /// The prefix, the page size and the backend's position.
        query: &'a Query,
    },
}

/// What an acquire attempt's reply means.
#[derive(Clone, Debug, PartialEq)]
pub enum Attempt {
    /// The token holds the lock; the server's lease, of `granted`, started no earlier than the
    /// attempt was sent.
    Granted {
        /// The grant's fencing token, if the backend issues them.
        fence: Option<u64>,
        /// The lease the server granted (shorter than asked for a handoff grant).
        granted: Duration,
    },
    /// Someone else holds it and the token waits in the server's queue, to be woken by a
    /// [`Wake`] notice (a one-shot attempt reads this as "not acquired"; nothing is left).
    Queued {
        /// The holder's remaining lease, if known: the wait is re-checked right after it.
        holder_remaining: Option<Duration>,
        /// The fence of the latest grant when the server answered (0 if unknown): a wake-up
        /// carrying a fence no larger is older than this answer and proves nothing.
        fence: u64,
    },
    /// Someone else holds it and nothing waits on the server: retry after the backend's delay
    /// (a one-shot attempt: not acquired). The engine undoes what the attempt may have set.
    Refused {
        /// Why, for a later timeout's message.
        why: String,
    },
    /// The attempt did not get an answer it can trust (transport error, too few votes, a
    /// write not confirmed by replicas): retried while the wait allows; a one-shot attempt
    /// fails with `error` and is undone.
    Transient {
        /// The failure.
        error: Error,
        /// Why, for a later timeout's message (`None`: the timeout says only that it timed out).
        why: Option<String>,
        /// Whether to undo what the attempt may have set before retrying (the backend has no
        /// queue that keeps it, or the retry uses a clean slate).
        undo: bool,
    },
    /// The acquire ends with `error`; `undo` if the attempt may have left something behind.
    Failed {
        /// The failure.
        error: Error,
        /// Whether to undo what the attempt may have set.
        undo: bool,
    },
}

/// What a renewal's or an extend's reply means (each sets a new expiry, only while still held).
#[derive(Clone, Debug, PartialEq)]
pub enum Renewal {
    /// The holder still holds it, with the new expiry.
    Confirmed,
    /// The hold is gone (expired, deleted, taken over): the lease is lost. `subject` says what
    /// happened, as the start of a sentence ("the lock was deleted or taken over").
    Refused {
        /// What happened.
        subject: String,
    },
    /// No answer to trust: a renewal retries soon, an extend fails with the error.
    Transient(Error),
    /// An answer that makes no sense: a renewal gives the lease up, an extend fails.
    Failed(Error),
}

/// What a release's (or cleanup's) reply means.
#[derive(Clone, Debug, PartialEq)]
pub enum Release {
    /// Done; whether the token still held the lock at that moment.
    Done {
        /// False if the hold had already expired or been taken over.
        was_held: bool,
    },
    /// Not confirmed. `retry`: the engine keeps releasing in the background until the lease
    /// would have run out anyway; otherwise what is left expires with the lease.
    Unconfirmed {
        /// The error the caller gets.
        error: Error,
        /// Whether retrying may help.
        retry: bool,
    },
    /// An answer that makes no sense; the lease is forgotten.
    Failed(Error),
}

/// What one reply (or node timeout) settled, in the engine's words.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// For [`Purpose::Acquire`].
    Attempt(Attempt),
    /// For [`Purpose::Renew`] and [`Purpose::Extend`].
    Renewal(Renewal),
    /// For [`Purpose::Release`] and [`Purpose::Cleanup`].
    Release(Release),
    /// For [`Purpose::Observe`].
    Observed(Result<Option<LeaderInfo>>),
    /// For [`Purpose::Inspect`]: holders carry their owner tokens where the server has them
    /// (the engine matches them with its own leases, then clears them).
    Inspected(Result<Snapshot>),
    /// For [`Purpose::List`]: the names found and the backend's next position.
    Listed(Result<Found>),
    /// For an [`Purpose::Acquire`] already granted: the grant turned out unusable after all
    /// (Redlock: a late vote revealed a holder counting other masters); the lease is lost.
    Revoked(String),
}

/// One settled call: what it was for, when it was sent (the earliest instant its effect on the
/// server can date from), and what it means.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The purpose given with the call.
    pub purpose: Purpose,
    /// When the call (or the round it belonged to) was sent.
    pub sent: Instant,
    /// What the reply means.
    pub verdict: Verdict,
}

/// A pushed message woke a queued waiter: the server granted `token` with `fence`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake {
    /// The owner token granted.
    pub token: String,
    /// The grant's fencing token.
    pub fence: u64,
}

/// What a pushed message (a backend [`Notice`](Backend::Notice)) means to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Nothing for the engine (another client's message, one it cannot parse).
    Nothing,
    /// The server granted a queued waiter (Redis: a `granted` message on the client channel).
    Wake(Wake),
    /// Something the waiters of these tokens wait behind changed (ZooKeeper, etcd: a
    /// predecessor was deleted, a watched directory changed): re-run their attempts now to
    /// learn their places. A token whose attempt is on the wire re-runs right after its answer
    /// (the change may postdate what that attempt read).
    Recheck(Vec<String>),
    /// The session ended on the server (a ZooKeeper session expired, a database connection
    /// dropped): everything bound to it is gone, so every lease is lost together and waits are
    /// re-checked once a new session is open. A Redis lease lives on its own key (a one-lease
    /// session) and never ends this way; an etcd lease found gone is learnt from a reply, so
    /// the etcd backend revokes each hold (`Verdict::Revoked`) instead.
    SessionLost(String),
    /// The session lives on but this client cannot reach it now (ZooKeeper's `Disconnected`):
    /// every lease in it is at risk ([`Event::AtRisk`](super::Event::AtRisk)) until a
    /// confirmation comes back or its validity runs out.
    Unreachable,
    /// The session is reachable again (ZooKeeper's `Reconnected`): every lease at risk is
    /// confirmed at once, and these tokens' waiters re-check their places (a change may have
    /// been missed), as with [`Recheck`](Signal::Recheck).
    Reachable(Vec<String>),
}

/// One backend: how the engine's calls are said on its wire and what its replies mean.
///
/// A backend folder (`core/src/<backend>/`) implements this for its wire rules and adds a
/// `pub type <Name>Engine = LockEngine<<Name>Backend>` alias. See PROTOCOL.md "Layering".
pub trait Backend {
    /// A lock as the wire names it (keys and scripts, a znode path, a row), resolved once per
    /// acquire and shared by its lease and cleanups.
    type Target: std::fmt::Debug;
    /// A request for the driver to perform.
    type Request;
    /// What the driver hands back for a request: its reply or the transport error.
    type Reply;
    /// A message the server pushed (a pub/sub message, a watch event, a session event), as the
    /// driver hands it over.
    type Notice<'a>;
    /// How an operation ends, as this backend's callers see it.
    type Outcome: From<super::io::Done>;

    /// Resolves lock `name` of kind `primitive` (both already checked against the generic
    /// rules), refusing what this backend does not offer or allow (`UNSUPPORTED`,
    /// `INVALID_ARGUMENT`) before anything is sent.
    fn target(&self, name: &str, primitive: &Primitive, options: &LockOptions) -> Result<Self::Target>;

    /// Checks an extension's duration against the backend's own limits (the generic range is
    /// already checked).
    fn check_extend(&self, _duration: Duration) -> Result<()> {
        Ok(())
    }

    /// Whether this backend can read an election's leader; `Err` (`UNSUPPORTED`) if not.
    fn check_observe(&self) -> Result<()>;

    /// Whether this backend can read a lock's holders and waiters (`Err`, `UNSUPPORTED`, if
    /// not); a backend that can answers [`Action::Inspect`] in [`call`](Self::call).
    fn check_inspect(&self) -> Result<()> {
        Err(Error::unsupported("inspecting a lock is not available on this backend yet"))
    }

    /// Whether this backend can break a lock (`Err`, `UNSUPPORTED`, if not); `fenced`: the
    /// break names the holder by its fencing token (refused where the backend issues none). A
    /// backend that can answers [`Action::Break`] in [`call`](Self::call).
    fn check_break(&self, fenced: bool) -> Result<()> {
        let _ = fenced;
        Err(Error::unsupported("breaking a lock is not available on this backend yet"))
    }

    /// Whether this backend can list the locks under a prefix (`Err`, `UNSUPPORTED`, if not);
    /// a backend that can answers [`Action::List`] in [`call`](Self::call).
    fn check_list(&self) -> Result<()> {
        Err(Error::unsupported("listing locks is not available on this backend"))
    }

    /// Whether a lease of this backend can be handed to another client (`Err`, `UNSUPPORTED`,
    /// if not: where the holder's entry lives in its own session, PROTOCOL.md §17). A backend
    /// that can confirms an adoption with the [`Action::Extend`] of the holder's token.
    fn check_adopt(&self) -> Result<()> {
        Err(Error::unsupported("handing a lease to another client is not available on this backend"))
    }

    /// An adoption of `token`'s hold on `target` (fencing token `fence`) is about to be
    /// confirmed by an extend: records what that extend needs that the token alone does not
    /// say (the SQL row, whose id is the fencing token). Nothing is sent.
    fn adopt(&mut self, _target: &Self::Target, _token: &str, _fence: Option<u64>) -> Result<()> {
        Ok(())
    }

    /// The owner token stored on the server, made from 32 random hex digits.
    fn owner_token(&self, random_hex: String) -> String {
        random_hex
    }

    /// How much of a lease of `d` the client cannot count on because clocks drift apart
    /// (deducted from every validity; zero where the server's clock alone decides).
    fn drift(&self, _d: Duration) -> Duration {
        Duration::ZERO
    }

    /// The longest validity one confirmation (a grant, a renewal, an extend) gives, whatever
    /// lease was asked for; `None` where a confirmation holds for the whole lease it set (a
    /// Redis `PEXPIRE`). A ZooKeeper session proves itself only for a part of its timeout:
    /// with a span shorter than the lease, the engine renews every third of the span, and a
    /// fixed (not renewed) lease is still confirmed that often until its end. `token` names
    /// the lease's owner token: its span may depend on where its entry lives (a ZooKeeper node
    /// in a session of its own sized from its lock's lease).
    fn confirmation_span(&self, _token: &str) -> Option<Duration> {
        None
    }

    /// Whether what an attempt or a lease leaves on the server lives until the session ends,
    /// not until a lease runs out (a ZooKeeper node): a background release is then retried
    /// until it is done or the session is gone, never given up when the lease would have ended.
    fn leftovers_live_with_session(&self) -> bool {
        false
    }

    /// How long before its due instant a renewal may go out with others sent anyway (so
    /// renewals due close together share one request); `None` for never early.
    fn renew_window(&self, _lease: Duration) -> Option<Duration> {
        None
    }

    /// Whether an attempt abandoned while on the wire is undone at once (the undo queues behind
    /// it on every connection) rather than once its reply shows what it did.
    fn undo_in_flight_at_once(&self) -> bool {
        false
    }

    /// The pause before retrying an attempt that was [refused](Attempt::Refused) or
    /// [transient](Attempt::Transient). `backoff` is the acquire's own state: it starts at
    /// [`FIRST_BACKOFF`](super::operation::FIRST_BACKOFF) and is reset whenever the acquire is
    /// queued.
    fn retry_delay(&self, backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration;

    /// The lease a [`Wake`] grants a waiter that asked for `lease` with queue entries living
    /// `entry_ttl`; `None` if a pushed grant proves nothing and the wait must be re-checked
    /// with a request instead (a grant that must be confirmed by replicas).
    fn handoff_lease(&self, _lease: Duration, _entry_ttl: Duration) -> Option<Duration> {
        None
    }

    /// Whether every attempt, a one-shot one too, needs the session (what it creates lives in
    /// the session, like a ZooKeeper ephemeral node); otherwise only waits need it.
    fn attempts_need_session(&self) -> bool {
        false
    }

    /// Opens the session waiting acquires need (a notification subscription, a ZooKeeper
    /// session, an etcd lease) and returns the request whose reply confirms it; `None` if the
    /// backend needs none.
    fn open_session(&mut self, _ctx: &mut Ctx<'_, Self::Request>) -> Option<RequestId> {
        None
    }

    /// The reply to the session request: `Ok` once the session is usable.
    fn session_reply(&mut self, reply: Self::Reply) -> Result<()>;

    /// The client is shutting down and every lease was released: end the session now (what
    /// lives in it goes with it, as `concurrency.Session.Close` revokes its lease) rather than
    /// leave it to expire on the server. Requests sent here keep the backend busy
    /// ([`is_idle`](Self::is_idle)) until answered, so the driver waits for them.
    fn close_session(&mut self, _ctx: &mut Ctx<'_, Self::Request>) {}

    /// Queues one call. It may go out at once or wait for [`flush`](Self::flush). A call that
    /// settles without asking the server (a renewal of a hold the backend knows is gone, a
    /// queued wait with nothing to re-check) appends its answer to `answers`: the engine
    /// handles it within the same input, as it would a reply's.
    fn call(&mut self, ctx: &mut Ctx<'_, Self::Request>, purpose: Purpose, action: Action<'_, Self::Target>, answers: &mut Vec<Answer>);

    /// The end of one engine input: sends whatever calls wait (one pipeline, one per slot...).
    fn flush(&mut self, _ctx: &mut Ctx<'_, Self::Request>) {}

    /// The reply to request `id`: appends what it settled, in call order. Unknown ids (a reply
    /// handed back twice) are ignored.
    fn on_reply(&mut self, ctx: &mut Ctx<'_, Self::Request>, id: RequestId, reply: Self::Reply, answers: &mut Vec<Answer>);

    /// A pushed message: what it means to the engine. It may also settle calls (appended to
    /// `answers`) or send requests.
    fn on_notice(&mut self, ctx: &mut Ctx<'_, Self::Request>, notice: Self::Notice<'_>, answers: &mut Vec<Answer>) -> Signal;

    /// A signal the backend raised outside a notice, drained by the engine after every reply
    /// and notice: a reply can say what a notice says elsewhere (a MySQL waiter's blocking
    /// `GET_LOCK` on its predecessor's named lock returned: re-check it; a listener set up
    /// again after a reconnect: re-check every waiter). `None` when there is none.
    fn take_signal(&mut self) -> Option<Signal> {
        None
    }

    /// A round of votes the backend decided since the last call, with its call's purpose, for
    /// telemetry (Redlock's rounds across its masters); drained by the engine after every reply
    /// and timeout. `None` when there is none: other backends have no rounds.
    fn take_round(&mut self) -> Option<(Purpose, super::RoundVotes)> {
        None
    }

    /// Timers of the backend's own (a node timeout) that are due at `ctx.now`: appends what
    /// they settled.
    fn on_timeout(&mut self, _ctx: &mut Ctx<'_, Self::Request>, _answers: &mut Vec<Answer>) {}

    /// The backend's next own timer.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Whether no request of this backend is on the wire.
    fn is_idle(&self) -> bool;
}
