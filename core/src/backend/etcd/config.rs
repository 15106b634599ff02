//! An etcd client's settings and the one number they decide: how long an acknowledged
//! keepalive of the session lease counts for ([`safe_validity`]). Kept apart from the backend
//! so the connect options can check a TTL without knowing how the recipes run.

use crate::error::{Error, Result};
use crate::time::Duration;

/// The session lease's TTL unless told otherwise: the default lock lease (30 s), so the
/// default lock's key lives on the client's own lease and a crashed holder's key goes within
/// the 30 s that lease promises (`concurrency.NewSession`'s default is 60 s).
pub const DEFAULT_SESSION_TTL: Duration = crate::options::DEFAULT_LEASE;
/// The shortest TTL a client may ask for (etcd counts whole seconds; a server grants at least
/// its own minimum, 1.5 election timeouts rounded up: 2 s with the defaults).
pub const MIN_SESSION_TTL: Duration = Duration::from_secs(1);
/// The longest TTL a client may ask for (the bindings' common range for a session setting).
pub const MAX_SESSION_TTL: Duration = Duration::from_millis(i32::MAX as u64);

/// Settings of one etcd client's engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// The TTL asked for the session lease(s), rounded up to whole seconds on the wire; the
    /// TTL the server grants is what validity is counted from.
    pub session_ttl: Duration,
    /// The holder label written as the value of every key this client creates (a leader's key
    /// carries its published value instead); etcd's recipes never read a lock key's value.
    /// Empty: none.
    pub label: String,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig { session_ttl: DEFAULT_SESSION_TTL, label: String::new() }
    }
}

impl EtcdConfig {
    /// Checks the TTL's range.
    pub fn validate(&self) -> Result<()> {
        if self.session_ttl < MIN_SESSION_TTL || self.session_ttl > MAX_SESSION_TTL {
            return Err(Error::invalid(format!(
                "session_timeout (the etcd session lease's TTL) must be between {MIN_SESSION_TTL:?} and \
                 {MAX_SESSION_TTL:?}, got {:?}",
                self.session_ttl
            )));
        }
        Ok(())
    }

    /// The TTL asked for, in etcd's whole seconds (rounded up: never less than configured).
    pub fn ttl_secs(&self) -> i64 {
        whole_secs(self.session_ttl)
    }

    /// The TTL asked for the lease a key of a lock with lease `lease` is attached to: the lease
    /// in whole seconds (rounded up, at least 1), at most the session's. A SIGKILLed holder's
    /// key then goes when that lease expires, within the lock's lease (rounded up to whole
    /// seconds, and at least the server's minimum TTL) of its last keepalive, as a Redis key
    /// goes within its lease; `session_timeout` caps how long any key outlives its client.
    pub fn key_ttl_secs(&self, lease: Duration) -> i64 {
        whole_secs(lease).clamp(1, self.ttl_secs().max(1))
    }
}

/// `d` in whole seconds, rounded up.
fn whole_secs(d: Duration) -> i64 {
    let ms = d.as_millis().min(i64::MAX as u128 - 999) as i64;
    (ms + 999) / 1000
}

/// The part of a lease's granted TTL one acknowledged keepalive is counted for, from the
/// keepalive's send time: two thirds. The leader sets the lease to expire a whole TTL after it
/// takes the keepalive (no earlier than its send time), and a new leader extends every lease
/// rather than shortening it; the third left covers the TTL's whole-second granularity, the
/// rate difference of the two clocks and the revoke loop's slack, and is the room etcd's own
/// client leaves (it sends a keepalive every third of the TTL). PROTOCOL.md §10.
pub fn safe_validity(ttl: Duration) -> Duration {
    ttl * 2 / 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn ttls_are_checked_rounded_up_and_two_thirds_count() {
        assert_eq!(EtcdConfig::default().ttl_secs(), 30);
        EtcdConfig::default().validate().unwrap();
        for bad in [Duration::from_millis(999), MAX_SESSION_TTL + Duration::from_millis(1)] {
            let e = EtcdConfig { session_ttl: bad, ..EtcdConfig::default() }.validate().expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert_eq!(EtcdConfig { session_ttl: Duration::from_millis(1500), ..EtcdConfig::default() }.ttl_secs(), 2);
        assert_eq!(EtcdConfig { session_ttl: Duration::from_secs(2), ..EtcdConfig::default() }.ttl_secs(), 2);
        assert_eq!(safe_validity(Duration::from_secs(6)), Duration::from_secs(4));
    }

    #[test]
    fn a_keys_lease_is_the_locks_lease_in_whole_seconds_capped_by_the_session() {
        let c = EtcdConfig { session_ttl: Duration::from_secs(60), ..EtcdConfig::default() };
        assert_eq!(c.key_ttl_secs(Duration::from_millis(10)), 1);
        assert_eq!(c.key_ttl_secs(Duration::from_millis(2001)), 3);
        assert_eq!(c.key_ttl_secs(Duration::from_secs(3)), 3);
        assert_eq!(c.key_ttl_secs(crate::options::DEFAULT_LEASE), 30);
        assert_eq!(c.key_ttl_secs(Duration::from_secs(600)), 60);
        assert_eq!(EtcdConfig::default().key_ttl_secs(crate::options::DEFAULT_LEASE), EtcdConfig::default().ttl_secs());
    }
}
