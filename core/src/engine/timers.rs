//! One ordered timer table: every deadline an engine keeps, so finding the next one and the due
//! ones costs O(log n) however many acquires, leases and cleanups are pending.
//!
//! Backend-agnostic (it knows only [`Instant`] and an opaque key); both the single-instance
//! engine and the Redlock engine schedule through it.
//!
//! Each key has at most one entry: setting it again moves it, and an index from key to instant
//! lets a reschedule or a cancel find the old entry without scanning. An entry is only a hint
//! that its owner may have work at that instant; the owner checks its own state when the entry
//! comes due, so a wake-up that finds nothing to do (the driver calling early, a state that
//! changed after scheduling) is a harmless no-op.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::time::Instant;

/// Deadlines keyed by `K`, ordered by instant (ties by key, so the order is deterministic).
#[derive(Debug)]
pub(crate) struct Timers<K> {
    order: BTreeSet<(Instant, K)>,
    index: HashMap<K, Instant, BuildHasherDefault<IdHasher>>,
}

impl<K: Copy + Ord + Hash> Default for Timers<K> {
    fn default() -> Self {
        Timers { order: BTreeSet::new(), index: HashMap::default() }
    }
}

/// Hashes the engine's own ids (a counter, never input from a user or a server, so there is
/// no flooding to defend against): a multiply per word instead of SipHash, on the path of every
/// timer change.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl<K: Copy + Ord + Hash> Timers<K> {
    /// Schedules `key` at `at`, replacing its previous instant; `None` cancels it.
    pub fn set(&mut self, key: K, at: Option<Instant>) {
        match at {
            Some(at) => {
                if let Some(old) = self.index.insert(key, at) {
                    if old == at {
                        return;
                    }
                    self.order.remove(&(old, key));
                }
                self.order.insert((at, key));
            }
            None => self.cancel(key),
        }
    }

    /// Removes `key`'s entry, if any.
    pub fn cancel(&mut self, key: K) {
        if let Some(old) = self.index.remove(&key) {
            self.order.remove(&(old, key));
        }
    }

    /// The earliest scheduled instant.
    pub fn next(&self) -> Option<Instant> {
        self.order.first().map(|&(at, _)| at)
    }

    /// Removes and returns the earliest key due at `now` (scheduled at or before it).
    pub fn pop_due(&mut self, now: Instant) -> Option<K> {
        let &(at, key) = self.order.first()?;
        if at > now {
            return None;
        }
        self.order.pop_first();
        self.index.remove(&key);
        Some(key)
    }

    /// Removes every key due at `now` and returns them in ascending key order (the order the
    /// engines used to visit them when they scanned their tables).
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        let mut due = Vec::new();
        while let Some(key) = self.pop_due(now) {
            due.push(key);
        }
        due.sort_unstable();
        due
    }

    /// The instant `key` is scheduled at.
    #[cfg(test)]
    pub fn get(&self, key: K) -> Option<Instant> {
        self.index.get(&key).copied()
    }

    /// How many keys are scheduled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        debug_assert_eq!(self.order.len(), self.index.len());
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Timers;
    use crate::time::{Duration, Instant};

    fn ms(n: u64) -> Instant {
        Instant::from_origin(Duration::from_millis(n))
    }

    #[test]
    fn next_is_the_earliest_and_due_keys_come_out_in_key_order() {
        let mut t = Timers::default();
        t.set(3u64, Some(ms(30)));
        t.set(1, Some(ms(50)));
        t.set(2, Some(ms(10)));
        t.set(4, Some(ms(10)));
        assert_eq!(t.next(), Some(ms(10)));
        assert_eq!(t.take_due(ms(9)), Vec::<u64>::new());
        // Due at 30: keys 2, 4 (at 10) and 3 (at 30), reported by key, not by instant.
        assert_eq!(t.take_due(ms(30)), vec![2, 3, 4]);
        assert_eq!(t.next(), Some(ms(50)));
        assert_eq!(t.pop_due(ms(49)), None);
        assert_eq!(t.pop_due(ms(50)), Some(1));
        assert_eq!(t.next(), None);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn pop_due_returns_the_earliest_first() {
        let mut t = Timers::default();
        t.set(9u64, Some(ms(5)));
        t.set(1, Some(ms(7)));
        t.set(5, Some(ms(5)));
        assert_eq!(t.pop_due(ms(100)), Some(5), "ties go by key");
        assert_eq!(t.pop_due(ms(100)), Some(9));
        assert_eq!(t.pop_due(ms(100)), Some(1));
        assert_eq!(t.pop_due(ms(100)), None);
    }

    #[test]
    fn rescheduling_moves_the_single_entry_of_a_key() {
        let mut t = Timers::default();
        t.set(1u64, Some(ms(10)));
        t.set(2, Some(ms(20)));
        t.set(1, Some(ms(30)));
        assert_eq!(t.len(), 2, "a key has one entry however often it is set");
        assert_eq!(t.get(1), Some(ms(30)));
        assert_eq!(t.next(), Some(ms(20)));
        assert_eq!(t.take_due(ms(25)), vec![2], "the old instant of key 1 no longer fires");
        // Earlier again, and setting the same instant twice changes nothing.
        t.set(1, Some(ms(5)));
        t.set(1, Some(ms(5)));
        assert_eq!(t.len(), 1);
        assert_eq!(t.next(), Some(ms(5)));
    }

    #[test]
    fn cancelling_removes_the_entry_and_unknown_keys_are_ignored() {
        let mut t = Timers::default();
        t.set(1u64, Some(ms(10)));
        t.set(2, Some(ms(10)));
        t.cancel(1);
        t.set(2, None);
        t.cancel(7);
        assert_eq!(t.len(), 0);
        assert_eq!(t.next(), None);
        assert_eq!(t.take_due(ms(1_000)), Vec::<u64>::new());
    }

    #[test]
    fn a_wake_up_before_anything_is_due_takes_nothing() {
        let mut t = Timers::default();
        t.set(1u64, Some(ms(10)));
        for now in [0, 1, 9] {
            assert_eq!(t.take_due(ms(now)), Vec::<u64>::new(), "spurious wake-up at {now} ms");
            assert_eq!(t.pop_due(ms(now)), None);
        }
        assert_eq!(t.get(1), Some(ms(10)), "an early wake-up leaves the entry in place");
        assert_eq!(t.take_due(ms(10)), vec![1]);
    }
}
