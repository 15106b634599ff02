//! [`Holds`]: the leases a lock *object* keeps for the caller, for bindings whose lock objects
//! release and extend by themselves (redis-py's `lock.release()` after `lock.acquire()` with its
//! result ignored).

use std::sync::{Arc, Mutex, MutexGuard};

use crate::holding::Owner;
use super::lease::Lease;
use crate::error::{Error, ErrorKind, Result};

/// Every lease acquired through one lock object that the caller has not released yet, with the
/// owner that acquired it, most recent last.
///
/// An acquire whose result is dropped on the floor must leave the lock held, and the object's
/// `release()` / `extend()` / `owned()` then act on the leases it took. A lease leaves the list
/// when it is released; the lock is otherwise freed only when the object is dropped (or its
/// client closed). With owners sharing the object, `release()` and `extend()` act on the
/// caller's own most recent lease, else on the most recent one (as redis-py keeps its token per thread, while a lease may be released from any
/// thread).
#[derive(Default)]
pub struct Holds(Mutex<Vec<(Owner, Arc<Lease>)>>);

impl Holds {
    /// The list without the leases released meanwhile.
    fn live(&self) -> MutexGuard<'_, Vec<(Owner, Arc<Lease>)>> {
        let mut holds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        holds.retain(|(_, l)| !l.is_released());
        holds
    }

    /// Keeps `lease`, acquired by `owner`.
    pub fn push(&self, owner: Owner, lease: Arc<Lease>) {
        self.live().push((owner, lease));
    }

    /// Whether one of these leases is certainly still held now.
    pub fn owned(&self) -> bool {
        self.live().iter().any(|(_, l)| l.is_held())
    }

    /// Where the lease `owner` acts on is: its most recent one, else the most recent one.
    fn top(holds: &[(Owner, Arc<Lease>)], owner: Owner) -> Option<usize> {
        holds.iter().rposition(|(o, _)| *o == owner).or(holds.len().checked_sub(1))
    }

    /// Takes out the lease `owner`'s `release()` releases; `NOT_HELD` if the object holds none
    /// (as redis-py raises for an unlocked lock).
    pub fn take_top(&self, owner: Owner) -> Result<Arc<Lease>> {
        let mut holds = self.live();
        Self::top(&holds, owner).map(|i| holds.remove(i).1).ok_or_else(not_holding)
    }

    /// The lease `owner`'s `extend()` extends: the one [`take_top`](Self::take_top) would take.
    pub fn top_of(&self, owner: Owner) -> Result<Arc<Lease>> {
        let holds = self.live();
        Self::top(&holds, owner).map(|i| holds[i].1.clone()).ok_or_else(not_holding)
    }
}

fn not_holding() -> Error {
    Error::new(ErrorKind::NotHeld, "this lock handle holds no lease (never acquired, or already released)")
}
