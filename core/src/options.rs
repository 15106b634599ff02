//! Options and the validation every entry point applies before touching the network.

use crate::error::{Error, Result};
use crate::time::Duration;

/// Longest lock name accepted, in bytes (keys stay well under Redis's practical limits).
pub const MAX_NAME_BYTES: usize = 512;
/// Longest key prefix accepted, in bytes.
pub const MAX_PREFIX_BYTES: usize = 128;
/// Shortest lease accepted: below this a renewal round trip cannot keep up.
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease, wait timeout or entry lease accepted (30 days).
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Shortest waiter-entry lease accepted.
pub const MIN_ENTRY_TTL: Duration = Duration::from_millis(100);

/// The lease a lock gets when the caller does not fix one; renewed every third of it.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// How long a waiter's queue entry survives without a heartbeat.
pub const DEFAULT_ENTRY_TTL: Duration = Duration::from_secs(10);

/// How a lock behaves once acquired and while waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockOptions {
    /// Lease on the server; with `auto_renew` it is renewed every `lease / 3` while held.
    pub lease: Duration,
    /// Whether a watchdog keeps the lease alive until release (Redisson's default behaviour).
    pub auto_renew: bool,
    /// Wait used by `acquire_default` / context managers; `None` waits until acquired.
    pub wait_timeout: Option<Duration>,
    /// Lease of a waiter's queue entry: a crashed waiter is skipped after at most this long.
    pub entry_ttl: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            lease: DEFAULT_LEASE,
            auto_renew: true,
            wait_timeout: None,
            entry_ttl: DEFAULT_ENTRY_TTL,
        }
    }
}

impl LockOptions {
    /// A fixed lease that is not renewed: the lock frees itself `lease` after acquisition.
    pub fn fixed_lease(lease: Duration) -> Self {
        LockOptions {
            lease,
            auto_renew: false,
            ..Default::default()
        }
    }

    /// A renewed lease of `lease` (the watchdog renews every `lease / 3`).
    pub fn renewed_lease(lease: Duration) -> Self {
        LockOptions {
            lease,
            auto_renew: true,
            ..Default::default()
        }
    }

    /// Sets the default wait used by `acquire_default`.
    pub fn with_wait_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Sets the waiter-entry lease.
    pub fn with_entry_ttl(mut self, ttl: Duration) -> Self {
        self.entry_ttl = ttl;
        self
    }

    /// Checks every field against the documented limits.
    pub fn validate(&self) -> Result<()> {
        validate_lease(self.lease)?;
        if let Some(t) = self.wait_timeout {
            validate_wait(t)?;
        }
        check_range("entry_ttl", self.entry_ttl, MIN_ENTRY_TTL, MAX_DURATION)
    }
}

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000;

/// Longest value a leader may publish, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Checks the parameters of a primitive (permit count, published value).
pub fn validate_primitive(p: &crate::engine::Primitive) -> Result<()> {
    use crate::engine::Primitive;
    match p {
        Primitive::Semaphore { permits } if *permits == 0 || *permits > MAX_PERMITS => Err(
            Error::invalid(format!("permits must be between 1 and {MAX_PERMITS}, got {permits}")),
        ),
        Primitive::Leader { value } if value.len() > MAX_VALUE_BYTES => Err(Error::invalid(
            format!("leader value is {} bytes; the limit is {MAX_VALUE_BYTES}", value.len()),
        )),
        _ => Ok(()),
    }
}

/// Rejects empty names, names longer than [`MAX_NAME_BYTES`] and names starting with `}`.
///
/// Every key of a lock carries the hash tag `{name}` (PROTOCOL.md §1). Redis hashes the text
/// between a key's first `{` and the first `}` after it; for a name starting with `}` that text
/// is empty, so Redis would hash each whole key instead and the keys of one lock would land in
/// different Redis Cluster slots (every script a CROSSSLOT error). Any other name keeps a
/// non-empty tag inside `{name}`, common to all of the lock's keys.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    if name.starts_with('}') {
        return Err(Error::invalid(
            "lock name must not start with '}' (its keys' hash tag would be empty)",
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

/// Rejects prefixes that are too long or contain `{`/`}` (they would break the hash tag).
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() > MAX_PREFIX_BYTES {
        return Err(Error::invalid(format!(
            "key prefix is longer than {MAX_PREFIX_BYTES} bytes"
        )));
    }
    if prefix.contains(['{', '}']) {
        return Err(Error::invalid(
            "key prefix must not contain '{' or '}' (reserved for the hash tag)",
        ));
    }
    Ok(())
}

/// A lease must be between [`MIN_LEASE`] and [`MAX_DURATION`].
pub fn validate_lease(lease: Duration) -> Result<()> {
    check_range("lease", lease, MIN_LEASE, MAX_DURATION)
}

/// A wait timeout may be zero (try once) up to [`MAX_DURATION`].
pub fn validate_wait(timeout: Duration) -> Result<()> {
    check_range("timeout", timeout, Duration::ZERO, MAX_DURATION)
}

fn check_range(what: &str, d: Duration, min: Duration, max: Duration) -> Result<()> {
    if d < min {
        return Err(Error::invalid(format!(
            "{what} must be at least {min:?}, got {d:?}"
        )));
    }
    if d > max {
        return Err(Error::invalid(format!(
            "{what} must be at most {max:?}, got {d:?}"
        )));
    }
    Ok(())
}

/// Converts seconds as a float (the Python/Java convention) into a [`Duration`],
/// rejecting NaN, infinities, negatives and values beyond [`MAX_DURATION`].
pub fn duration_from_secs_f64(what: &str, secs: f64) -> Result<Duration> {
    if secs.is_nan() {
        return Err(Error::invalid(format!("{what} must be a number, got NaN")));
    }
    if secs < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must not be negative, got {secs}"
        )));
    }
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err(Error::invalid(format!(
            "{what} must be at most {} s, got {secs}",
            MAX_DURATION.as_secs()
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Converts milliseconds as a float (the JavaScript convention) into a [`Duration`].
pub fn duration_from_millis_f64(what: &str, ms: f64) -> Result<Duration> {
    duration_from_secs_f64(what, ms / 1000.0)
}

/// Whole milliseconds for a `PX`/`PEXPIRE` argument, rounding sub-millisecond parts up.
pub(crate) fn whole_millis(d: Duration) -> u64 {
    let ms = d.as_millis() as u64;
    if Duration::from_millis(ms) < d {
        ms + 1
    } else {
        ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("").is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
        assert!(validate_name(&"x".repeat(MAX_NAME_BYTES + 1)).is_err());
        for bad in ["}", "}{", "}x{y}"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        for ok in ["{}", "a{b}c", "x}{", "{"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn float_durations_are_checked() {
        for bad in [f64::NAN, -1.0, f64::INFINITY, 1e12] {
            let e = duration_from_secs_f64("lease", bad).unwrap_err();
            assert_eq!(e.code(), "INVALID_ARGUMENT");
        }
        assert_eq!(
            duration_from_secs_f64("t", 1.5).unwrap(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn leases_are_checked() {
        assert!(LockOptions::fixed_lease(Duration::ZERO).validate().is_err());
        assert!(LockOptions::fixed_lease(Duration::from_millis(9))
            .validate()
            .is_err());
        assert!(LockOptions::default().validate().is_ok());
        assert!(validate_prefix("a{b").is_err());
        assert_eq!(whole_millis(Duration::from_micros(1500)), 2);
    }
}
