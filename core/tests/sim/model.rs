//! What the simulator needs from one backend: a model of its server(s) that performs the
//! engine's requests, and a way to read that backend's outcomes in the engine's generic words.
//!
//! The harness (`harness.rs`: clock, network, clients, crashes, restarts, beliefs) and the
//! checks (`check.rs`) are written once over [`Model`]; each backend adds one file here
//! (`redis.rs`, `redlock.rs`, `zk.rs`) that implements it. See core/README "Adding a backend".

use std::fmt::Debug;

use lockgate_core::engine::{Backend, Done, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redlock::RedlockOutcome;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, Outcome, Primitive, RequestId};

/// One simulated client, as the model knows it.
pub type ClientId = usize;

/// Which connection of a client a request travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Conn {
    /// The command connection to server `i` (Redis: the one server; Redlock: master `i`): FIFO
    /// both ways, latency `NetConfig::latency`, requests and replies may be lost (a transport
    /// error instead), and [`Isolation`](super::Isolation) breaks it.
    Server(usize),
    /// The client's session (notification) connection to server 0: latency
    /// `NetConfig::notify_latency`, never lost, and the server's pushes come back on it. A
    /// restart of server 0 or a dropped session connection reports a disconnect to the engine.
    Session,
}

/// A backend's server(s), as the simulator runs them.
pub trait Model {
    /// The engine's backend; its replies are what the model answers, or the harness's
    /// transport failure, in the backend's words ([`WireReply`]).
    type Backend: Backend<Request = Self::Request, Reply: WireReply<Self::Answer>, Outcome = Self::Outcome>;
    /// What the engine asks the driver to do.
    type Request: Clone + Debug;
    /// A successful reply to a request (a transport failure is the `Err` of the reply).
    type Answer: Clone + Debug;
    /// A message a server pushes to one client, owned (handed to the engine by [`notify`]).
    ///
    /// [`notify`]: Model::notify
    type Push: Clone + Debug;
    /// How the backend's operations end.
    type Outcome: SimOutcome;

    /// A new client's engine, with its randomness.
    fn engine(&self, rng: SeededRandom) -> LockEngine<Self::Backend>;

    /// How many servers the command connections go to (`Conn::Server(0..servers)`).
    fn servers(&self) -> usize {
        1
    }

    /// Whether clients keep a session connection (`Conn::Session`) to server 0.
    fn has_session(&self) -> bool {
        false
    }

    /// The request's id, for its reply.
    fn request_id(req: &Self::Request) -> RequestId;

    /// The connection `req` travels on.
    fn route(&self, req: &Self::Request) -> Conn;

    /// `req` reached its server at `now` and runs there (a crashed client's request still
    /// runs; its reply is then thrown away). Messages it makes the server push go to `pushes`.
    /// `Err`: what the client library reports instead of an answer (no session, say).
    fn serve(
        &mut self,
        now: Instant,
        client: ClientId,
        crashed: bool,
        req: Self::Request,
        pushes: &mut Vec<(ClientId, Self::Push)>,
    ) -> Result<Self::Answer, Error>;

    /// Hands a pushed message to a client's engine.
    fn notify(engine: &mut LockEngine<Self::Backend>, now: Instant, push: &Self::Push);

    /// Server `server` restarts without persistence at `now`, its clock jumping forward by
    /// `clock_jump`; with `drop_connections` its connections (and what they registered, such
    /// as subscriptions) are gone too.
    fn restart(&mut self, server: usize, now: Instant, drop_connections: bool, clock_jump: Duration);

    /// The client crashed: what the server kept for its connections goes (subscriptions...).
    /// Sessions with a server-side timeout are left to expire.
    fn client_crashed(&mut self, _client: ClientId) {}

    /// The client crashed at `now` (what the harness calls; models whose sessions count from
    /// the client's last heartbeat need the instant).
    fn client_crashed_at(&mut self, client: ClientId, _now: Instant) {
        self.client_crashed(client);
    }

    /// The client process stops at `now` (SIGSTOP, a long GC) until `until`: it sends nothing
    /// and handles nothing meanwhile (the harness defers what reaches it).
    fn client_paused(&mut self, _client: ClientId, _now: Instant, _until: Instant) {}

    /// `req` leaves the client at `now` (before any loss the harness applies): for models
    /// whose connections fail every request sent on them when they drop.
    fn on_send(&mut self, _now: Instant, _client: ClientId, _req: &Self::Request) {}

    /// The client's session connection broke.
    fn session_dropped(&mut self, _client: ClientId) {}

    /// The server's own next timer (a session timeout), if any.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Runs the server timers due at `now`.
    fn on_timeout(&mut self, _now: Instant, _pushes: &mut Vec<(ClientId, Self::Push)>) {}

    /// The name beliefs about `primitive` named `name` are filed under (one per lock).
    fn belief_key(&self, name: &str, primitive: &Primitive) -> String;

    /// What the server granted with `fence` on `key` was: `'w'` (exclusive) or `'r'` (shared),
    /// and its shared-hold limit (0: none). A grant the model does not know is exclusive.
    fn hold_mode(&self, _key: &str, _fence: Option<u64>) -> (char, u64) {
        ('w', 0)
    }

    /// Keys, nodes or rows still on the servers that must not outlive their users (empty once
    /// everything was released and cleaned up).
    fn lock_state_left(&mut self, now: Instant) -> Vec<String>;
}

/// A backend's reply, made from what the model answered or the transport failure the harness
/// reports instead (a lost request or reply, a reset connection). Every backend whose reply is
/// `Result<Answer, Error>` has it as is; a backend with failures of its own (ZooKeeper's
/// `ZkFailure`) says how a transport error reads in its words (`zk.rs`).
pub trait WireReply<A>: Sized {
    /// The reply the engine gets.
    fn from_sim(result: Result<A, Error>) -> Self;
}

impl<A> WireReply<A> for Result<A, Error> {
    fn from_sim(result: Result<A, Error>) -> Self {
        result
    }
}

/// A backend's outcome type, read in the engine's generic words ([`Done`]).
pub trait SimOutcome: Clone + Debug {
    /// The same outcome as the engine recorded it.
    fn done(&self) -> Done;
}

impl SimOutcome for Done {
    fn done(&self) -> Done {
        self.clone()
    }
}

impl SimOutcome for Outcome {
    fn done(&self) -> Done {
        match self.clone() {
            Outcome::Acquired { lease, fencing_token, valid_until } => {
                Done::Acquired { lease, fencing_token: Some(fencing_token), valid_until }
            }
            Outcome::NotAcquired => Done::NotAcquired,
            Outcome::Released { was_held } => Done::Released { was_held },
            Outcome::Extended { valid_until } => Done::Extended { valid_until },
            Outcome::Observed(leader) => Done::Observed(leader),
            Outcome::Inspected(s) => Done::Inspected(s),
            Outcome::Broken(b) => Done::Broken(b),
            Outcome::Listed(p) => Done::Listed(p),
            Outcome::Failed(e) => Done::Failed(e),
        }
    }
}

impl SimOutcome for RedlockOutcome {
    fn done(&self) -> Done {
        match self.clone() {
            RedlockOutcome::Acquired { lease, valid_until } => {
                Done::Acquired { lease, fencing_token: None, valid_until }
            }
            RedlockOutcome::NotAcquired => Done::NotAcquired,
            RedlockOutcome::Released { was_held } => Done::Released { was_held },
            RedlockOutcome::Extended { valid_until } => Done::Extended { valid_until },
            RedlockOutcome::Inspected(s) => Done::Inspected(s),
            RedlockOutcome::Broken(b) => Done::Broken(b),
            RedlockOutcome::Listed(p) => Done::Listed(p),
            RedlockOutcome::Failed(e) => Done::Failed(e),
        }
    }
}
