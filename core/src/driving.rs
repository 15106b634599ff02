//! What every driver of an engine does the same, written once for the native tokio driver and
//! the Node binding's JavaScript driver (through its WebAssembly engine): [`Drive`], the
//! engine's driving contract with backend-neutral outcomes whatever the backend, and
//! [`Awaiting`], who waits for each operation together with the rule for what nobody waits for:
//! a grant whose caller is gone (its acquire cancelled, its future dropped, its client closed) is
//! released at once, so no lease is held for nobody until it expires.

use std::collections::HashMap;

use crate::engine::{Backend, Done, Event, LeaseId, LockEngine, OpId, Primitive, Wait};
use crate::data::DynEngine;
use crate::error::Result;
use crate::options::LockOptions;
use crate::time::{Duration, Instant};

/// Longest time a client's close waits for its releases and withdrawals to be answered before
/// it stops its driver anyway (what is left expires on the servers).
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The driving contract of `LockEngine` (see there), object-safe and with every outcome in the
/// backend-neutral [`Done`]: a driver holds any backend's engine as one `Box<dyn Drive>`-like
/// value and needs no branch per backend. Requests and replies stay each engine's own.
pub trait Drive {
    /// See `LockEngine::acquire_primitive`.
    fn acquire(&mut self, now: Instant, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> Result<OpId>;
    /// See `LockEngine::reacquire`.
    fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId;
    /// See `LockEngine::observe_leader`.
    fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId>;
    /// See `LockEngine::inspect_as`.
    fn inspect_as(&mut self, now: Instant, name: &str, primitive: &Primitive) -> Result<OpId>;
    /// See `LockEngine::break_lock`.
    fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId>;
    /// See `LockEngine::list`.
    fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId>;
    /// See `LockEngine::adopt`.
    fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId>;
    /// See `LockEngine::export`.
    fn export(&self, now: Instant, lease: LeaseId) -> Result<String>;
    /// See `LockEngine::release`.
    fn release(&mut self, now: Instant, lease: LeaseId) -> OpId;
    /// See `LockEngine::extend`.
    fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId>;
    /// See `LockEngine::cancel`.
    fn cancel(&mut self, now: Instant, op: OpId);
    /// See `LockEngine::shutdown`.
    fn shutdown(&mut self, now: Instant);
    /// See `LockEngine::lease_valid_until`.
    fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant>;
    /// See `LockEngine::is_held`.
    fn is_held(&self, now: Instant, lease: LeaseId) -> bool;
    /// See `LockEngine::is_idle`.
    fn is_idle(&self) -> bool;
    /// See `LockEngine::handle_timeout`.
    fn handle_timeout(&mut self, now: Instant);
    /// See `LockEngine::poll_timeout`.
    fn poll_timeout(&self) -> Option<Instant>;
    /// See `LockEngine::handle_disconnect`.
    fn handle_disconnect(&mut self, now: Instant);
    /// The next event, its outcome in [`Done`].
    fn poll_event(&mut self) -> Option<Event<Done>>;
}

/// Forwards every [`Drive`] method to the same-named method of `$e`.
macro_rules! forward_drive {
    ($T:ty, $acquire:ident, $neutral:expr, $($deref:tt)+) => {
        fn acquire(&mut self, now: Instant, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> Result<OpId> {
            <$T>::$acquire(&mut $($deref)+ self, now, name, primitive, options, wait)
        }
        fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
            <$T>::reacquire(&mut $($deref)+ self, now, lease)
        }
        fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
            <$T>::observe_leader(&mut $($deref)+ self, now, name)
        }
        fn inspect_as(&mut self, now: Instant, name: &str, primitive: &Primitive) -> Result<OpId> {
            <$T>::inspect_as(&mut $($deref)+ self, now, name, primitive)
        }
        fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId> {
            <$T>::break_lock(&mut $($deref)+ self, now, name, kind, fencing_token)
        }

        fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId> {
            <$T>::list(&mut $($deref)+ self, now, prefix, limit, cursor)
        }
        fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId> {
            <$T>::adopt(&mut $($deref)+ self, now, identity, options)
        }
        fn export(&self, now: Instant, lease: LeaseId) -> Result<String> {
            <$T>::export(&$($deref)+ self, now, lease)
        }
        fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
            <$T>::release(&mut $($deref)+ self, now, lease)
        }
        fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
            <$T>::extend(&mut $($deref)+ self, now, lease, duration)
        }
        fn cancel(&mut self, now: Instant, op: OpId) {
            <$T>::cancel(&mut $($deref)+ self, now, op)
        }
        fn shutdown(&mut self, now: Instant) {
            <$T>::shutdown(&mut $($deref)+ self, now)
        }
        fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
            <$T>::lease_valid_until(&$($deref)+ self, lease)
        }
        fn is_held(&self, now: Instant, lease: LeaseId) -> bool {
            <$T>::is_held(&$($deref)+ self, now, lease)
        }
        fn is_idle(&self) -> bool {
            <$T>::is_idle(&$($deref)+ self)
        }
        fn handle_timeout(&mut self, now: Instant) {
            <$T>::handle_timeout(&mut $($deref)+ self, now)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            <$T>::poll_timeout(&$($deref)+ self)
        }
        fn handle_disconnect(&mut self, now: Instant) {
            <$T>::handle_disconnect(&mut $($deref)+ self, now)
        }
        fn poll_event(&mut self) -> Option<Event<Done>> {
            <$T>::poll_event(&mut $($deref)+ self).map($neutral)
        }
    };
}

impl<B: Backend> Drive for LockEngine<B>
where
    B::Outcome: Into<Done>,
{
    forward_drive!(LockEngine<B>, acquire_primitive, crate::data::neutral, *);
}

/// A data engine (every backend the Node binding drives through plain data).
impl Drive for Box<dyn DynEngine> {
    forward_drive!(dyn DynEngine, acquire, std::convert::identity, **);
}

/// Who waits for each operation a driver started (`W`: a promise's settle functions, a oneshot
/// sender), keyed by op id.
#[derive(Debug)]
pub struct Awaiting<W> {
    waiting: HashMap<OpId, W>,
}

impl<W> Default for Awaiting<W> {
    fn default() -> Self {
        Awaiting { waiting: HashMap::new() }
    }
}

/// What came of an operation's completion (see [`Awaiting::claim`]).
#[derive(Debug)]
pub enum Claim<W> {
    /// Its waiter, to hand the outcome to.
    Waiter(W),
    /// Nobody waited and it granted `lease`, which `release` (an op nobody waits for yet) gives back.
    GaveBack {
        /// The lease nobody will hold.
        lease: LeaseId,
        /// The operation releasing it.
        release: OpId,
    },
    /// Nobody waited (an operation started by shutdown, or by a driver itself): nothing to do.
    Nobody,
}

impl<W> Awaiting<W> {
    /// Records `waiter` as who waits for `op`.
    pub fn wait(&mut self, op: OpId, waiter: W) {
        self.waiting.insert(op, waiter);
    }

    /// The waiter of `op`, left waiting.
    pub fn get_mut(&mut self, op: OpId) -> Option<&mut W> {
        self.waiting.get_mut(&op)
    }

    /// Takes the waiter of `op`, which completed with `done`; where nobody waits for a grant,
    /// `engine` releases it at once.
    pub fn claim(&mut self, engine: &mut (impl Drive + ?Sized), now: Instant, op: OpId, done: &Done) -> Claim<W> {
        if let Some(w) = self.waiting.remove(&op) {
            return Claim::Waiter(w);
        }
        match done {
            Done::Acquired { lease, .. } => Claim::GaveBack { lease: *lease, release: engine.release(now, *lease) },
            _ => Claim::Nobody,
        }
    }

    /// Takes every waiter (the driver stops: each is told why).
    pub fn take_all(&mut self) -> impl Iterator<Item = W> + '_ {
        self.waiting.drain().map(|(_, w)| w)
    }
}
