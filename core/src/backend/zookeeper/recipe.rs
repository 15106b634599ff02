//! Who holds, by Curator's rules, given a lock's children: the lowest sequence holds a mutex, a
//! write lock or an election, and each waiter watches only the node just before it
//! (`StandardLockInternalsDriver.getsTheLock`); a reader holds while no writer precedes it and
//! watches the first writer (`InterProcessReadWriteLock.ReadLock`); a semaphore holder's lease
//! counts while the leases number at most the permits (`InterProcessSemaphoreV2`).

use super::layout::{sort_children, sort_names, NodeKind, WRITE_NAME};

/// Where a node stands among its siblings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// It holds the lock.
    Holds,
    /// It waits; `watch` (a sibling's name) is the one node whose deletion can change that.
    Waits {
        /// The sibling to watch.
        watch: String,
    },
    /// It is not among the children (deleted, or its session expired).
    Missing,
}

/// The place of node `ours` of `kind` among `children` (names, any order).
pub fn place(kind: NodeKind, mut children: Vec<String>, ours: &str) -> Place {
    sort_children(&mut children, sort_names(kind));
    if kind == NodeKind::Read {
        return reader_place(&children, ours);
    }
    match children.iter().position(|c| c == ours) {
        None => Place::Missing,
        Some(0) => Place::Holds,
        Some(i) => Place::Waits { watch: children[i - 1].clone() },
    }
}

/// `InterProcessReadWriteLock.ReadLock`'s predicate over sorted children: the reader holds if
/// it comes before every writer, else it watches the first writer.
fn reader_place(sorted: &[String], ours: &str) -> Place {
    let mut first_write: Option<usize> = None;
    for (i, node) in sorted.iter().enumerate() {
        if node.contains(WRITE_NAME) {
            first_write.get_or_insert(i);
        } else if node == ours {
            return match first_write {
                None => Place::Holds,
                Some(w) => Place::Waits { watch: sorted[w].clone() },
            };
        }
    }
    Place::Missing
}

/// Whether a semaphore lease holds: it is among the leases and they number at most `permits`.
pub fn lease_holds(leases: &[String], ours: &str, permits: u32) -> Option<bool> {
    if !leases.iter().any(|l| l == ours) {
        return None;
    }
    Some(leases.len() <= permits as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_lowest_holds_and_each_waiter_watches_its_predecessor() {
        let kids = v(&["_c_b-lock-0000000003", "_c_a-lock-0000000001", "_c_c-lock-0000000002"]);
        assert_eq!(place(NodeKind::Lock, kids.clone(), "_c_a-lock-0000000001"), Place::Holds);
        assert_eq!(
            place(NodeKind::Lock, kids.clone(), "_c_b-lock-0000000003"),
            Place::Waits { watch: "_c_c-lock-0000000002".into() }
        );
        assert_eq!(place(NodeKind::Lock, kids, "_c_d-lock-0000000004"), Place::Missing);
    }

    #[test]
    fn readers_wait_only_behind_writers() {
        let kids = v(&["_c_r1-__READ__0000000001", "_c_w-__WRIT__0000000002", "_c_r2-__READ__0000000003", "_c_r0-__READ__0000000000"]);
        assert_eq!(place(NodeKind::Read, kids.clone(), "_c_r1-__READ__0000000001"), Place::Holds);
        assert_eq!(place(NodeKind::Read, kids.clone(), "_c_r0-__READ__0000000000"), Place::Holds);
        assert_eq!(
            place(NodeKind::Read, kids.clone(), "_c_r2-__READ__0000000003"),
            Place::Waits { watch: "_c_w-__WRIT__0000000002".into() }
        );
        // The writer waits behind the reader just before it.
        assert_eq!(
            place(NodeKind::Write, kids.clone(), "_c_w-__WRIT__0000000002"),
            Place::Waits { watch: "_c_r1-__READ__0000000001".into() }
        );
        assert_eq!(place(NodeKind::Read, kids, "_c_x-__READ__0000000009"), Place::Missing);
    }

    #[test]
    fn leases_count_up_to_the_permits() {
        let leases = v(&["a", "b", "c"]);
        assert_eq!(lease_holds(&leases, "c", 3), Some(true));
        assert_eq!(lease_holds(&leases, "c", 2), Some(false));
        assert_eq!(lease_holds(&leases, "d", 5), None);
    }
}
