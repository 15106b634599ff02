//! Who holds, given a lock name's live rows in id order — the predicates of the ZooKeeper
//! recipes (`zookeeper/recipe.rs`) and etcd's (`etcd/recipe.rs`) over rows: the lowest id holds
//! a mutex, a write lock or an election; a reader holds while no writer precedes it; a
//! semaphore entry holds while fewer than `permits` entries precede it. A waiter waits behind
//! the one row whose deletion can change that: the row just before it (a reader: the last
//! writer before it); a semaphore waiter behind the `permits` rows just before it (while they
//! all live, at least `permits` precede it, whatever happens further ahead). So a re-check
//! needs those rows only, never the whole queue ahead.

use super::request::{EntryKind, EntryRow};

/// Where an entry stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    /// It holds; the row is its own.
    Holds(&'a EntryRow),
    /// It waits behind these rows (any one's deletion may let it hold).
    Waits {
        /// Its own row.
        own: &'a EntryRow,
        /// The rows it waits behind, nearest first.
        behind: Vec<&'a EntryRow>,
    },
    /// Its row is not among the live rows (expired, deleted).
    Missing,
}

/// Whether `row` blocks an entry of `kind` that comes after it.
fn blocks(kind: EntryKind, row: &EntryRow) -> bool {
    match kind {
        // A kind this version does not know blocks like a writer.
        EntryKind::Read => row.kind != Some(EntryKind::Read),
        _ => true,
    }
}

/// The place of `owner`'s entry of `kind` among `rows` (live, in id order).
pub fn place<'a>(kind: EntryKind, permits: u32, rows: &'a [EntryRow], owner: &str) -> Place<'a> {
    let Some(i) = rows.iter().position(|r| r.owner == owner) else {
        return Place::Missing;
    };
    let own = &rows[i];
    let ahead: Vec<&EntryRow> = rows[..i].iter().rev().filter(|r| blocks(kind, r)).collect();
    let below = if kind == EntryKind::Semaphore { permits.max(1) as usize } else { 1 };
    if ahead.len() < below {
        return Place::Holds(own);
    }
    Place::Waits { own, behind: ahead.into_iter().take(below).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, owner: &str, kind: EntryKind) -> EntryRow {
        EntryRow { id, owner: owner.into(), kind: Some(kind), permits: 1, value: None, remaining_ms: 1000 }
    }

    #[test]
    fn the_recipes_predicates() {
        let m = [row(3, "a", EntryKind::Mutex), row(5, "b", EntryKind::Mutex), row(9, "c", EntryKind::Mutex)];
        assert_eq!(place(EntryKind::Mutex, 1, &m, "a"), Place::Holds(&m[0]));
        assert_eq!(place(EntryKind::Mutex, 1, &m, "c"), Place::Waits { own: &m[2], behind: vec![&m[1]] });
        assert_eq!(place(EntryKind::Mutex, 1, &m, "z"), Place::Missing);
        let rw = [row(1, "r1", EntryKind::Read), row(2, "w", EntryKind::Write), row(3, "r2", EntryKind::Read), row(4, "r3", EntryKind::Read)];
        assert_eq!(place(EntryKind::Read, 1, &rw, "r1"), Place::Holds(&rw[0]));
        assert_eq!(place(EntryKind::Read, 1, &rw, "r3"), Place::Waits { own: &rw[3], behind: vec![&rw[1]] });
        assert_eq!(place(EntryKind::Write, 1, &rw, "w"), Place::Waits { own: &rw[1], behind: vec![&rw[0]] });
        let s = [row(1, "a", EntryKind::Semaphore), row(2, "b", EntryKind::Semaphore), row(3, "c", EntryKind::Semaphore)];
        assert_eq!(place(EntryKind::Semaphore, 2, &s, "b"), Place::Holds(&s[1]));
        assert_eq!(place(EntryKind::Semaphore, 2, &s, "c"), Place::Waits { own: &s[2], behind: vec![&s[1], &s[0]] });
        // Only the nearest `permits` rows: a read of those alone places the entry the same.
        let s4 = [row(1, "a", EntryKind::Semaphore), row(2, "b", EntryKind::Semaphore), row(3, "c", EntryKind::Semaphore), row(4, "d", EntryKind::Semaphore)];
        assert_eq!(place(EntryKind::Semaphore, 2, &s4, "d"), Place::Waits { own: &s4[3], behind: vec![&s4[2], &s4[1]] });
        assert_eq!(place(EntryKind::Semaphore, 2, &s4[1..], "d"), place(EntryKind::Semaphore, 2, &s4, "d"));
    }
}
