//! A ZooKeeper client's settings and the one number they decide: how long a confirmation of
//! the session counts for ([`safe_validity`]). Kept apart from the backend so the connect
//! options can check a session timeout without knowing how the recipes run.

use crate::error::{Error, Result};
use crate::time::Duration;

/// The session timeout a client asks for unless told otherwise: the default lock lease (30 s),
/// since a crashed client's nodes go only when its session expires, so the default lock's crash
/// bound is the 30 s its lease promises (Curator's default is 60 s). The ensemble may grant
/// less (by default at most 20 ticks: 40 s with a 2 s tick) or more (at least 2 ticks).
pub const DEFAULT_SESSION_TIMEOUT: Duration = crate::options::DEFAULT_LEASE;
/// The shortest session timeout a client may ask for.
pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest session timeout a client may ask for (ZooKeeper counts it in an `int` of ms).
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Settings of one ZooKeeper client's engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkConfig {
    /// The session timeout asked for; the ensemble's answer (the negotiated timeout) is what
    /// validity is counted from.
    pub session_timeout: Duration,
    /// The holder label written as the data of every queue and lease node this client creates
    /// (a leader's node carries its published value instead), as Curator writes the holder's
    /// IP there; empty: none.
    pub label: String,
    /// Whether the nodes of a lock whose lease is shorter than the session live in an extra
    /// session sized from that lease, so a crashed holder frees it within its lease (the
    /// default, PROTOCOL.md §9 "Sessions sized from the lock"). Off, every node lives in the
    /// client's one session and a crash frees a lock only when that session expires (what the
    /// deterministic simulator, which models one session per client, runs).
    pub extra_sessions: bool,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig { session_timeout: DEFAULT_SESSION_TIMEOUT, label: String::new(), extra_sessions: true }
    }
}

impl ZkConfig {
    /// Checks the session timeout's range.
    pub fn validate(&self) -> Result<()> {
        if self.session_timeout < MIN_SESSION_TIMEOUT || self.session_timeout > MAX_SESSION_TIMEOUT {
            return Err(Error::invalid(format!(
                "session_timeout must be between {MIN_SESSION_TIMEOUT:?} and {MAX_SESSION_TIMEOUT:?}, got {:?}",
                self.session_timeout
            )));
        }
        Ok(())
    }
}

/// The part of the negotiated session timeout one confirmation is counted for: half. The
/// leader learns of a client's requests through its follower's next ping report (up to half a
/// tick later), and the client may have been silent for a third of the timeout before (the
/// client library's ping period), so a session confirmed at `t` may expire as early as
/// `t + T − T/3 − tick/2`; half of `T` stays below that while `tick ≤ T/4`. PROTOCOL.md §9,
/// "Sessions are leases".
pub fn safe_validity(session_timeout: Duration) -> Duration {
    session_timeout / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn session_timeouts_are_checked_and_half_counts() {
        assert_eq!(ZkConfig::default().session_timeout, crate::options::DEFAULT_LEASE);
        ZkConfig::default().validate().unwrap();
        for bad in [Duration::from_millis(99), MAX_SESSION_TIMEOUT + Duration::from_millis(1)] {
            let e = ZkConfig { session_timeout: bad, ..ZkConfig::default() }.validate().expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert_eq!(safe_validity(Duration::from_secs(6)), Duration::from_secs(3));
    }
}
