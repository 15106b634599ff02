//! A ZooKeeper-shaped backend written outside core, against the public `Backend` trait only
//! (issue 15's shape): each waiter holds a sequential node under the lock's path and watches its
//! predecessor; every node lives in the client's session, so a lost session loses every lease at
//! once; the sequence number is the fencing token. One copy, used by `tests/engine_backend.rs`
//! (over an in-memory server, synchronously) and by the simulator's model `sim/zk.rs`; issue 15's
//! real backend in `core/src/backend/zookeeper/` replaces it.

use std::collections::HashMap;

use lockgate_core::engine::{Action, Answer, Attempt, Backend, Ctx, Done, Renewal, Purpose, Release, Signal, Verdict};
use lockgate_core::random::RandomSource;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, LockOptions, Primitive, RequestId, Result};

/// What the server is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    OpenSession,
    /// Create the token's sequential node under `path` (or find it in this session) and say
    /// whether it is first.
    Enqueue { path: String, token: String },
    Delete { path: String, token: String },
    /// The session heartbeat: a renewal of every lease.
    Ping,
}

#[derive(Clone, Debug)]
pub struct Req {
    pub id: RequestId,
    pub op: Op,
}

#[derive(Clone, Debug)]
pub enum Rep {
    Session,
    Place { seq: u64, first: bool },
    Deleted(bool),
    Pong(bool),
}

/// What the server pushes.
#[derive(Clone, Debug)]
pub enum Push {
    /// The node the waiter `token` watched is gone.
    PredecessorGone { token: String },
    SessionExpired,
}

pub struct SeqBackend {
    /// Validity of every lease: what a client counts on after a heartbeat (at most the
    /// session timeout, counted by the server from when it heard the heartbeat).
    lease: Duration,
    in_flight: HashMap<RequestId, (Purpose, Instant)>,
}

impl SeqBackend {
    /// A backend whose leases are valid for `lease` after each acknowledged contact.
    pub fn new(lease: Duration) -> Self {
        SeqBackend { lease, in_flight: HashMap::new() }
    }
}

impl Backend for SeqBackend {
    type Target = String;
    type Request = Req;
    type Reply = Result<Rep>;
    type Notice<'a> = Push;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<String> {
        match primitive {
            Primitive::Mutex => Ok(format!("/locks/{name}")),
            _ => Err(Error::unsupported("this backend offers mutexes only")),
        }
    }

    fn check_observe(&self) -> Result<()> {
        Err(Error::unsupported("no elections here"))
    }

    /// A session promises only `lease` after each heartbeat, whatever a grant or an extend
    /// asked for: the rest of a longer lease cannot be counted on (the simulator showed two
    /// holders without this cap, see simulation_zk.rs).
    fn confirmation_span(&self, _token: &str) -> Option<Duration> {
        Some(self.lease)
    }

    fn attempts_need_session(&self) -> bool {
        true
    }

    fn retry_delay(&self, backoff: &mut Duration, _rng: &mut dyn RandomSource) -> Duration {
        let d = *backoff;
        *backoff = (*backoff * 2).min(Duration::from_secs(1));
        d
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, Req>) -> Option<RequestId> {
        let id = ctx.ids.request();
        ctx.out.push_back(Req { id, op: Op::OpenSession });
        Some(id)
    }

    fn session_reply(&mut self, reply: Result<Rep>) -> Result<()> {
        match reply? {
            Rep::Session => Ok(()),
            other => Err(Error::protocol(format!("session answered with {other:?}"))),
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, Req>, purpose: Purpose, action: Action<'_, String>, _answers: &mut Vec<Answer>) {
        let op = match action {
            Action::Acquire { target, token, .. } => Op::Enqueue { path: target.to_string(), token: token.into() },
            Action::Extend { .. } => Op::Ping,
            Action::Release { target, token } => Op::Delete { path: target.to_string(), token: token.into() },
            Action::Observe { .. } => unreachable!("check_observe refuses"),
            Action::Inspect { .. } => unreachable!("check_inspect refuses"),
            Action::Break { .. } => unreachable!("check_break refuses"),
            Action::List { .. } => unreachable!("check_list refuses"),
        };
        let id = ctx.ids.request();
        self.in_flight.insert(id, (purpose, ctx.now));
        ctx.out.push_back(Req { id, op });
    }

    fn on_reply(&mut self, _ctx: &mut Ctx<'_, Req>, id: RequestId, reply: Result<Rep>, answers: &mut Vec<Answer>) {
        let Some((purpose, sent)) = self.in_flight.remove(&id) else {
            return;
        };
        let verdict = match (purpose, reply) {
            (Purpose::Acquire(_), Ok(Rep::Place { seq, first: true })) => {
                Verdict::Attempt(Attempt::Granted { fence: Some(seq), granted: self.lease })
            }
            // Behind another node: woken when the predecessor goes (Signal::Recheck).
            (Purpose::Acquire(_), Ok(Rep::Place { .. })) => {
                Verdict::Attempt(Attempt::Queued { holder_remaining: None, fence: 0 })
            }
            (Purpose::Acquire(_), Err(e)) => Verdict::Attempt(Attempt::Transient { error: e, why: None, undo: false }),
            (Purpose::Renew(..) | Purpose::Extend(..), Ok(Rep::Pong(true))) => Verdict::Renewal(Renewal::Confirmed),
            (Purpose::Renew(..) | Purpose::Extend(..), Ok(Rep::Pong(false))) => {
                Verdict::Renewal(Renewal::Refused { subject: "the session expired".into() })
            }
            (Purpose::Renew(..) | Purpose::Extend(..), Err(e)) => Verdict::Renewal(Renewal::Transient(e)),
            (Purpose::Release(..) | Purpose::Cleanup(_), Ok(Rep::Deleted(was_held))) => {
                Verdict::Release(Release::Done { was_held })
            }
            (Purpose::Release(..) | Purpose::Cleanup(_), Err(e)) => {
                Verdict::Release(Release::Unconfirmed { error: e, retry: true })
            }
            (purpose, reply) => {
                let e = Error::protocol(format!("{purpose:?} answered with {reply:?}"));
                match purpose {
                    Purpose::Acquire(_) => Verdict::Attempt(Attempt::Failed { error: e, undo: true }),
                    Purpose::Renew(..) | Purpose::Extend(..) => Verdict::Renewal(Renewal::Failed(e)),
                    _ => Verdict::Release(Release::Failed(e)),
                }
            }
        };
        answers.push(Answer { purpose, sent, verdict });
    }

    fn on_notice(&mut self, _ctx: &mut Ctx<'_, Req>, notice: Push, _answers: &mut Vec<Answer>) -> Signal {
        match notice {
            Push::PredecessorGone { token } => Signal::Recheck(vec![token]),
            Push::SessionExpired => Signal::SessionLost("the server expired it".into()),
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }
}
