//! The heartbeat's watch: what a client's batched refresh (on its refresh connection) also reads
//! of the rows its queued waiters wait behind, and what that tells each waiter.
//!
//! A waiter must look again once what it waits behind may have died: a crashed predecessor is
//! found only by reading its row, at the latest at the expiry last read. Each waiter doing that
//! with its own re-check costs one round trip on the client's statement connection per waiter
//! and predecessor's refresh period — for a burst of 1,500 waiters with a 4 s entry lease,
//! hundreds of re-checks a second (five statements each on MySQL), queued behind the hand-over's
//! own work. The predecessors are refreshed by their clients all the same, so one read by
//! primary key per heartbeat tells every waiter of the client at once how long its
//! predecessors live on (their refreshed expiries), and which are gone (deleted, or expired and
//! not reaped yet). A live predecessor puts the waiter's timed re-check off to its new expiry;
//! a gone one wakes it. Nothing else changes: a crashed predecessor is read as live no longer
//! than its row lives, so its waiter still looks again by its expiry, and the server alone
//! decides grants.

use std::collections::{HashMap, HashSet};

/// What one heartbeat read of the watched rows.
#[derive(Debug, Default)]
pub struct Seen {
    /// The rows asked about.
    watched: HashSet<i64>,
    /// Those read live, with their remaining milliseconds on the server's clock.
    live: HashMap<i64, i64>,
}

/// What a heartbeat tells one waiter of the rows it waits behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// Not all of them were watched (its place changed after the heartbeat left): nothing.
    Unknown,
    /// All live: the soonest of them expires no earlier than this many milliseconds after the
    /// heartbeat was sent (the server read them after the send).
    Live {
        /// The least remaining time read.
        remaining_ms: i64,
    },
    /// At least one is gone (deleted, or dead by the server's clock): the waiter may hold now.
    Gone,
}

impl Seen {
    /// A heartbeat's read: `watched` asked about, `live` its `(id, remaining_ms)` rows.
    pub fn new(watched: &[i64], live: &[(i64, i64)]) -> Seen {
        Seen { watched: watched.iter().copied().collect(), live: live.iter().copied().collect() }
    }

    /// What it tells a waiter waiting behind the rows `behind` (none: nothing to tell). A row
    /// read is never revived, and a live one's expiry only moves on, so the answer holds
    /// whenever the waiter started waiting behind them.
    pub fn look(&self, behind: &[i64]) -> Look {
        if behind.is_empty() || !behind.iter().all(|id| self.watched.contains(id)) {
            return Look::Unknown;
        }
        let mut soonest = i64::MAX;
        for id in behind {
            match self.live.get(id) {
                Some(&remaining) if remaining > 0 => soonest = soonest.min(remaining),
                _ => return Look::Gone,
            }
        }
        Look::Live { remaining_ms: soonest }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter learns its predecessors' refreshed expiry (the soonest, for a semaphore's
    /// several), is woken when one is gone, and learns nothing from a read that did not cover
    /// all of them.
    #[test]
    fn a_heartbeat_tells_each_waiter_what_it_waits_behind() {
        let seen = Seen::new(&[3, 5, 8, 9], &[(3, 3900), (5, 2700), (9, 0)]);
        assert_eq!(seen.look(&[3]), Look::Live { remaining_ms: 3900 });
        assert_eq!(seen.look(&[5, 3]), Look::Live { remaining_ms: 2700 });
        // Not read live: deleted or expired, and a row never comes back.
        assert_eq!(seen.look(&[8]), Look::Gone);
        assert_eq!(seen.look(&[3, 8]), Look::Gone);
        // Read with no time left: dead by the server's clock.
        assert_eq!(seen.look(&[9]), Look::Gone);
        // Not asked about: the read says nothing of it.
        assert_eq!(seen.look(&[4]), Look::Unknown);
        assert_eq!(seen.look(&[3, 4]), Look::Unknown);
        assert_eq!(seen.look(&[]), Look::Unknown);
    }
}
