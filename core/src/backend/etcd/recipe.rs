//! Who holds, by the recipes' rules, given what etcd answered: the lowest create revision under
//! the queue prefix holds a mutex, a write lock or an election (`concurrency.Mutex`); a reader
//! holds while no writer was created before it; a semaphore's key holds while it is among the
//! first `permits` keys. A waiter waits for the deletion of the one key that can change that:
//! the key with the greatest create revision below its own (`waitDeletes`) — among every key
//! for a writer, among the writers for a reader — or, for a semaphore, any key before it.

use super::layout::{self, Family};
use super::request::{KeyValue, Order, Range};
use super::target::{EtcdTarget, Recipe};

/// The read, run in the same transaction as the key's create (or its check), that says
/// whether the key holds: `concurrency.Mutex`'s `getOwner`, one request on the uncontended
/// path.
pub fn owner_range(target: &EtcdTarget) -> Range {
    match target.recipe {
        Recipe::Read => Range::prefix(layout::family_prefix(&target.base, Family::Write), Order::CreateAscending, 1),
        Recipe::Semaphore { permits } => Range::prefix(target.queue_prefix(), Order::CreateAscending, i64::from(permits)),
        _ => Range::prefix(target.queue_prefix(), Order::CreateAscending, 1),
    }
}

/// Whether the key created at `ours` holds, from [`owner_range`]'s keys.
pub fn holds(target: &EtcdTarget, owners: &[KeyValue], ours: i64) -> bool {
    match target.recipe {
        Recipe::Read => owners.first().is_none_or(|w| w.create_revision > ours),
        Recipe::Semaphore { .. } => owners.iter().any(|kv| kv.create_revision == ours),
        _ => owners.first().is_none_or(|kv| kv.create_revision == ours),
    }
}

/// What a waiter whose key was created at `ours` waits behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The deletion of one key: the one found by this read (the last key created before ours
    /// in the family that blocks it); none found means it holds now.
    Predecessor(Range),
    /// The deletion of any key under the prefix (a semaphore: any earlier holder's release
    /// may free a permit).
    AnyUnder(String),
}

/// How a waiter of `target` whose key was created at `ours` waits.
pub fn wait(target: &EtcdTarget, ours: i64) -> Wait {
    let blocking = match target.recipe {
        Recipe::Read => layout::family_prefix(&target.base, Family::Write),
        Recipe::Semaphore { .. } => return Wait::AnyUnder(target.queue_prefix()),
        _ => target.queue_prefix(),
    };
    let mut range = Range::prefix(blocking, Order::CreateDescending, 1);
    range.max_create_revision = ours - 1;
    Wait::Predecessor(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitive::Primitive;

    fn kv(rev: i64) -> KeyValue {
        KeyValue { create_revision: rev, ..KeyValue::default() }
    }

    #[test]
    fn the_lowest_create_revision_holds() {
        let m = EtcdTarget::new("m", &Primitive::Mutex).unwrap();
        assert!(holds(&m, &[kv(5)], 5) && !holds(&m, &[kv(4)], 5));
        assert_eq!(owner_range(&m).limit, 1);
        let Wait::Predecessor(r) = wait(&m, 9) else { panic!() };
        assert_eq!((r.key, r.order, r.limit, r.max_create_revision), (b"/lockgate/mutex/m/".to_vec(), Order::CreateDescending, 1, 8));
        let r = EtcdTarget::new("rw", &Primitive::Read { writers_first: true }).unwrap();
        assert!(holds(&r, &[], 5) && holds(&r, &[kv(7)], 5) && !holds(&r, &[kv(3)], 5));
        assert_eq!(owner_range(&r).key, b"/lockgate/rw/rw/write/".to_vec());
        let s = EtcdTarget::new("s", &Primitive::Semaphore { permits: 2 }).unwrap();
        assert!(holds(&s, &[kv(3), kv(5)], 5) && !holds(&s, &[kv(3), kv(4)], 5));
        assert_eq!(wait(&s, 5), Wait::AnyUnder("/lockgate/semaphore/s/".into()));
    }
}
