//! Key and channel names. Every key of one lock shares the hash tag `{name}`, so one script
//! touches one Redis Cluster slot.

/// The keys of one mutex, in the order the scripts take them (`KEYS[1..4]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutexKeys {
    /// `<prefix>{<name>}`: the owner token, with the lease as its expiry.
    pub lock: String,
    /// `<prefix>{<name>}:fence`: the last fencing token issued.
    pub fence: String,
    /// `<prefix>{<name>}:queue`: sorted set of waiter tokens scored by arrival order.
    pub queue: String,
    /// `<prefix>{<name>}:waiters`: hash of waiter token → `deadline_ms|lease_ms|channel`.
    pub waiters: String,
}

impl MutexKeys {
    /// The keys for lock `name` under `prefix` (both already validated).
    pub fn new(prefix: &str, name: &str) -> Self {
        let base = format!("{prefix}{{{name}}}");
        MutexKeys {
            fence: format!("{base}:fence"),
            queue: format!("{base}:queue"),
            waiters: format!("{base}:waiters"),
            lock: base,
        }
    }

    /// All four keys, in script order.
    pub fn all(&self) -> [&str; 4] {
        [&self.lock, &self.fence, &self.queue, &self.waiters]
    }
}

/// The keys of one shared-holder primitive (semaphore, read-write lock, leader election), in the
/// order the shared scripts take them (`KEYS[1..5]`). `kind` (`sem`, `rw`, `elect`) keeps the
/// primitives of one name apart; every key carries the hash tag `{name}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedKeys {
    /// `<prefix>{<name>}:<kind>:holders`: sorted set of holder tokens scored by lease expiry
    /// (server time, ms).
    pub holders: String,
    /// `<prefix>{<name>}:<kind>:fence`: the last fencing token issued.
    pub fence: String,
    /// `<prefix>{<name>}:<kind>:queue`: sorted set of waiter tokens scored by arrival order.
    pub queue: String,
    /// `<prefix>{<name>}:<kind>:waiters`: hash of waiter token →
    /// `deadline_ms|handoff_ms|r-or-w|limit|channel`.
    pub waiters: String,
    /// `<prefix>{<name>}:<kind>:info`: hash with `mode` (`r`/`w`), `f:<token>` (a holder's
    /// fencing token) and `v:<token>` (a holder's or waiter's published value).
    pub info: String,
}

impl SharedKeys {
    /// The keys of primitive `kind` named `name` under `prefix` (all already validated).
    pub fn new(prefix: &str, kind: &str, name: &str) -> Self {
        let base = format!("{prefix}{{{name}}}:{kind}");
        SharedKeys {
            holders: format!("{base}:holders"),
            fence: format!("{base}:fence"),
            queue: format!("{base}:queue"),
            waiters: format!("{base}:waiters"),
            info: format!("{base}:info"),
        }
    }

    /// All five keys, in script order.
    pub fn all(&self) -> [&str; 5] {
        [&self.holders, &self.fence, &self.queue, &self.waiters, &self.info]
    }
}

/// The pub/sub channel on which one client receives its grants: `<prefix>client:<client_id>`.
pub fn client_channel(prefix: &str, client_id: &str) -> String {
    format!("{prefix}client:{client_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let k = MutexKeys::new("lockgate:", "orders:{42}");
        for key in k.all() {
            let open = key.find('{').unwrap();
            let close = open + key[open..].find('}').unwrap();
            assert_eq!(&key[open + 1..close], "orders:{42");
        }
        assert_eq!(k.lock, "lockgate:{orders:{42}}");
        let s = SharedKeys::new("lockgate:", "sem", "orders:{42}");
        for key in s.all() {
            assert!(key.starts_with("lockgate:{orders:{42}}:sem:"), "{key}");
        }
    }
}
