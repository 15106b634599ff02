//! What a non-reentrant handle holds: at most one live lease per [`Owner`], so that no caller
//! ever waits for itself while other callers sharing the handle queue their turn. Plain data
//! (no clock, no task): the native handles keep a [`Holding`] behind a tokio watch
//! (`native::holder`), the Node binding keeps one per handle in its WebAssembly engine.
//!
//! An owner is the caller's identity as its binding knows it: a thread (Python's sync API, a
//! Java thread), an asyncio task, or the handle itself (the Rust API by default, and Node,
//! where async flows have no identity). Acquiring through a non-reentrant handle (or a clone
//! of it) whose live lease belongs to the *same* owner would queue behind that owner's own
//! lease and wait until its timeout (for ever without one). Instead the acquire fails at once
//! with `ALREADY_HELD` and sends nothing. An acquire that is still waiting when another acquire
//! of the same owner through the same handle wins ends the same way (its wait is withdrawn), so
//! an owner never holds two leases through one handle either. Other owners are not refused:
//! they wait their turn like any other contender (as with `threading.Lock`, kazoo's `Lock` or
//! redis-py's thread-local token). A lease that is released, dropped, lost or past its validity
//! frees its owner's place.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::LeaseId;
use crate::error::{Error, ErrorKind, Result};
use crate::primitive::Primitive;

/// Who acquires through a shared lock handle: the unit that must never wait for its own lease.
/// Bindings pass the caller's identity; the id only needs to be unique among live callers of
/// the same kind (a thread id, a task's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    kind: OwnerKind,
    id: u64,
}

/// What kind of caller an [`Owner`] is (the error message names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OwnerKind {
    Handle,
    Thread,
    Task,
}

impl Owner {
    /// The handle itself: every caller of the handle (and of its clones) is one owner. The
    /// default of the Rust API, and of bindings whose callers have no identity (Node).
    pub const HANDLE: Owner = Owner { kind: OwnerKind::Handle, id: 0 };

    /// A thread, by an id unique among the process's live threads.
    pub fn thread(id: u64) -> Owner {
        Owner { kind: OwnerKind::Thread, id }
    }

    /// A task (an asyncio task, a tokio task), by an id unique among live tasks.
    pub fn task(id: u64) -> Owner {
        Owner { kind: OwnerKind::Task, id }
    }

    /// The calling thread, by an id this process never hands out twice (a thread's own id or
    /// address may be reused, and a dead thread's live lease must not pass for a new thread's).
    pub fn current_thread() -> Owner {
        thread_local! {
            static ID: u64 = next_id();
        }
        Owner::thread(ID.with(|id| *id))
    }

    /// A new task, by an id this process never hands out twice ([`Owner::id`] to find it again).
    pub fn new_task() -> Owner {
        Owner::task(next_id())
    }

    /// The id this owner was made with.
    pub fn id(self) -> u64 {
        self.id
    }
}

/// Ids for [`Owner::current_thread`] and [`Owner::new_task`], from one counter.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The leases one handle holds, one per owner, each with what tells whether it is still live
/// (`S`: a lease watch natively, nothing in Node, whose engine answers that).
#[derive(Debug)]
pub struct Holding<S> {
    held: Vec<(LeaseId, Owner, S)>,
}

impl<S> Default for Holding<S> {
    fn default() -> Self {
        Holding { held: Vec::new() }
    }
}

impl<S> Holding<S> {
    /// Whether `owner` holds a live lease through the handle (`live` says which are).
    pub fn holds(&self, owner: Owner, live: impl Fn(LeaseId, &S) -> bool) -> bool {
        self.held.iter().any(|(id, o, s)| *o == owner && live(*id, s))
    }

    /// `ALREADY_HELD` if `owner` holds a live lease through the handle of `primitive` `name`.
    pub fn check(&self, name: &str, primitive: &Primitive, owner: Owner, live: impl Fn(LeaseId, &S) -> bool) -> Result<()> {
        if self.holds(owner, live) {
            return Err(already_held(name, primitive, owner));
        }
        Ok(())
    }

    /// Records `id` as `owner`'s lease; `ALREADY_HELD` (nothing recorded) if another live lease
    /// of the same owner got there first: the caller gives its new lease back. Leases no longer
    /// live free their owners' places here too (a lost lease is never released through the
    /// handle).
    pub fn hold(
        &mut self,
        name: &str,
        primitive: &Primitive,
        owner: Owner,
        id: LeaseId,
        state: S,
        live: impl Fn(LeaseId, &S) -> bool,
    ) -> Result<()> {
        self.check(name, primitive, owner, &live)?;
        self.held.retain(|(id, _, s)| live(*id, s));
        self.held.push((id, owner, state));
        Ok(())
    }

    /// Frees `id`'s place (the lease is being released or dropped); whether it had one.
    pub fn free(&mut self, id: LeaseId) -> bool {
        let before = self.held.len();
        self.held.retain(|(h, _, _)| *h != id);
        self.held.len() != before
    }

    /// How many of the recorded leases are live.
    pub fn live(&self, live: impl Fn(LeaseId, &S) -> bool) -> usize {
        self.held.iter().filter(|(id, _, s)| live(*id, s)).count()
    }
}

/// How the error names what a handle of each primitive holds.
fn held_what(primitive: &Primitive) -> &'static str {
    match primitive {
        Primitive::Mutex => "lock",
        Primitive::Semaphore { .. } => "semaphore permit of",
        Primitive::Read { .. } => "read lock",
        Primitive::Write => "write lock",
        Primitive::Leader { .. } => "leadership of",
    }
}

/// The `ALREADY_HELD` error of `owner` acquiring `name` again through a non-reentrant handle.
pub fn already_held(name: &str, primitive: &Primitive, owner: Owner) -> Error {
    let what = held_what(primitive);
    let message = match owner.kind {
        OwnerKind::Handle => format!(
            "this handle already holds the {what} {name:?} and is not reentrant: acquiring again through it would \
             wait for itself (a handle is one owner for every async flow, thread or task that shares it); release \
             its lease first, use a reentrant lock, or take another handle for a second hold"
        ),
        OwnerKind::Thread => format!(
            "this thread already holds the {what} {name:?} through this handle; it is not reentrant, so acquiring it \
             again from the same thread would wait for itself (other threads sharing the handle wait their turn; \
             release the lease first, or use a reentrant lock)"
        ),
        OwnerKind::Task => format!(
            "this task already holds the {what} {name:?} through this handle; it is not reentrant, so acquiring it \
             again from the same task would wait for itself (other tasks sharing the handle wait their turn; \
             release the lease first, or use a reentrant lock)"
        ),
    };
    Error::new(ErrorKind::AlreadyHeld, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_live_lease_per_owner_and_other_owners_pass() {
        let mut h = Holding::<bool>::default();
        let live = |_: LeaseId, s: &bool| *s;
        let (a, b) = (Owner::thread(1), Owner::thread(2));
        h.hold("n", &Primitive::Mutex, a, LeaseId(1), true, live).unwrap();
        let e = h.check("n", &Primitive::Mutex, a, live).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyHeld);
        assert!(e.message().contains("this thread already holds the lock \"n\""), "{}", e.message());
        assert!(h.hold("n", &Primitive::Mutex, a, LeaseId(2), true, live).is_err());
        h.check("n", &Primitive::Mutex, b, live).unwrap();
        assert!(h.free(LeaseId(1)));
        assert!(!h.free(LeaseId(1)));
        h.hold("n", &Primitive::Mutex, a, LeaseId(3), true, live).unwrap();
        assert_eq!(h.live(live), 1);
    }

    #[test]
    fn a_lease_no_longer_live_frees_its_place() {
        let mut h = Holding::<bool>::default();
        let live = |_: LeaseId, s: &bool| *s;
        h.hold("n", &Primitive::Write, Owner::HANDLE, LeaseId(1), false, live).unwrap();
        h.check("n", &Primitive::Write, Owner::HANDLE, live).unwrap();
        h.hold("n", &Primitive::Write, Owner::HANDLE, LeaseId(2), true, live).unwrap();
        assert_eq!(h.held.len(), 1, "the dead lease was dropped");
        let e = h.check("n", &Primitive::Write, Owner::HANDLE, live).unwrap_err();
        assert!(e.message().contains("already holds the write lock \"n\" and is not reentrant"), "{}", e.message());
    }
}
