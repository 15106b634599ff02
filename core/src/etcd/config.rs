//! An etcd client's settings and the one number they decide: how long an acknowledged
//! keepalive of the session lease counts for ([`safe_validity`]). Kept apart from the backend
//! so the connect options can check a TTL without knowing how the recipes run.

use crate::error::{Error, Result};
use crate::time::Duration;

/// The session lease's TTL unless told otherwise: `concurrency.NewSession`'s default (60 s).
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(60);
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
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig { session_ttl: DEFAULT_SESSION_TTL }
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
        let ms = self.session_ttl.as_millis() as i64;
        (ms + 999) / 1000
    }
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
        assert_eq!(EtcdConfig::default().ttl_secs(), 60);
        EtcdConfig::default().validate().unwrap();
        for bad in [Duration::from_millis(999), MAX_SESSION_TTL + Duration::from_millis(1)] {
            let e = EtcdConfig { session_ttl: bad }.validate().expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert_eq!(EtcdConfig { session_ttl: Duration::from_millis(1500) }.ttl_secs(), 2);
        assert_eq!(EtcdConfig { session_ttl: Duration::from_secs(2) }.ttl_secs(), 2);
        assert_eq!(safe_validity(Duration::from_secs(6)), Duration::from_secs(4));
    }
}
