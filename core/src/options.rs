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
    /// The shortest hold (ShedLock's `lockAtLeastFor`): a release sooner than this after the
    /// grant leaves the lock held on the server until then (its expiry is set to what is left
    /// instead of deleting it), even if this process exits. Only where the backend keeps an
    /// entry after its process is gone ([`Capability::MinHold`](crate::capabilities::Capability::MinHold)).
    pub min_hold: Option<Duration>,
    /// The longest hold (ShedLock's `lockAtMostFor`): renewals never carry the lease past this
    /// long after the grant, and the lease ends then (lost, with a loss reason saying so) and
    /// is removed from the server for the next waiter.
    pub max_hold: Option<Duration>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            lease: DEFAULT_LEASE,
            auto_renew: true,
            wait_timeout: None,
            entry_ttl: DEFAULT_ENTRY_TTL,
            min_hold: None,
            max_hold: None,
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
        check_range("entry_ttl", self.entry_ttl, MIN_ENTRY_TTL, MAX_DURATION)?;
        validate_holds(self.min_hold, self.max_hold, "min_hold", "max_hold")
    }
}

/// The rules of a lock's shortest and longest hold (named `min`/`max` in messages, as the
/// caller spells them): each at least [`MIN_LEASE`] (a shorter hold is below what a server
/// expiry can keep) and at most [`MAX_DURATION`], and the shortest not longer than the longest.
pub fn validate_holds(min_hold: Option<Duration>, max_hold: Option<Duration>, min: &str, max: &str) -> Result<()> {
    if let Some(d) = min_hold {
        check_range(min, d, MIN_LEASE, MAX_DURATION)?;
    }
    if let Some(d) = max_hold {
        check_range(max, d, MIN_LEASE, MAX_DURATION)?;
    }
    if let (Some(lo), Some(hi)) = (min_hold, max_hold) {
        if lo > hi {
            return Err(Error::invalid(format!("{min} ({lo:?}) must not be longer than {max} ({hi:?})")));
        }
    }
    Ok(())
}

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000;

/// Longest value a leader may publish, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Checks the parameters of a primitive (permit count, published value).
pub fn validate_primitive(p: &crate::primitive::Primitive) -> Result<()> {
    use crate::primitive::Primitive;
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

/// The unit a binding's user gives durations in; conversion errors speak in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds as a float (Python, the JVM's `Duration` as passed over FFI).
    Seconds,
    /// Milliseconds as a float (JavaScript).
    Millis,
}

impl Unit {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Millis => "ms",
        }
    }

    pub(crate) fn of(self, d: Duration) -> f64 {
        match self {
            Unit::Seconds => d.as_secs_f64(),
            Unit::Millis => d.as_secs_f64() * 1000.0,
        }
    }

    pub(crate) fn noun(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Millis => "milliseconds",
        }
    }
}

/// Converts `value` (in `unit`) into a [`Duration`] between `min` and `max`. Every message
/// names the option as `what` (the caller's spelling, e.g. `leaseMs`) and gives limits and the
/// value in `unit`: `leaseMs must be at most 2592000000 ms, got 3e12`.
pub fn duration_in_range(what: &str, value: f64, unit: Unit, min: Duration, max: Duration) -> Result<Duration> {
    let sym = unit.symbol();
    if value.is_nan() {
        return Err(Error::invalid(format!("{what} must be a number of {}, got NaN", unit.noun())));
    }
    if value < 0.0 {
        return Err(Error::invalid(format!("{what} must not be negative, got {value} {sym}")));
    }
    if !value.is_finite() || value > unit.of(max) {
        return Err(Error::invalid(format!("{what} must be at most {} {sym}, got {value} {sym}", unit.of(max))));
    }
    let d = match unit {
        Unit::Seconds => Duration::from_secs_f64(value),
        Unit::Millis => Duration::from_secs_f64(value / 1000.0),
    };
    if d < min {
        return Err(Error::invalid(format!("{what} must be at least {} {sym}, got {value} {sym}", unit.of(min))));
    }
    Ok(d.min(max))
}

/// A wait timeout or other duration from zero up to [`MAX_DURATION`], in `unit`.
pub fn duration_from_f64(what: &str, value: f64, unit: Unit) -> Result<Duration> {
    duration_in_range(what, value, unit, Duration::ZERO, MAX_DURATION)
}

/// A lease (between [`MIN_LEASE`] and [`MAX_DURATION`]) in `unit`, checked under the
/// caller's name for it (`lease`, `leaseMs`, `seconds` of `extend`, ...).
pub fn lease_from_f64(what: &str, value: f64, unit: Unit) -> Result<Duration> {
    duration_in_range(what, value, unit, MIN_LEASE, MAX_DURATION)
}

/// A waiter-entry lease (between [`MIN_ENTRY_TTL`] and [`MAX_DURATION`]) in `unit`.
pub fn entry_ttl_from_f64(what: &str, value: f64, unit: Unit) -> Result<Duration> {
    duration_in_range(what, value, unit, MIN_ENTRY_TTL, MAX_DURATION)
}

/// A duration that must be positive (a connect or response timeout), in `unit`.
pub fn positive_duration_from_f64(what: &str, value: f64, unit: Unit) -> Result<Duration> {
    if value == 0.0 {
        return Err(Error::invalid(format!("{what} must be positive, got 0 {}", unit.symbol())));
    }
    duration_in_range(what, value, unit, Duration::from_nanos(1), MAX_DURATION)
}

/// Converts seconds as a float (the Python/Java convention) into a [`Duration`],
/// rejecting NaN, infinities, negatives and values beyond [`MAX_DURATION`]; messages speak
/// in seconds.
pub fn duration_from_secs_f64(what: &str, secs: f64) -> Result<Duration> {
    duration_from_f64(what, secs, Unit::Seconds)
}

/// Converts milliseconds as a float (the JavaScript convention) into a [`Duration`];
/// messages speak in milliseconds.
pub fn duration_from_millis_f64(what: &str, ms: f64) -> Result<Duration> {
    duration_from_f64(what, ms, Unit::Millis)
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
    fn messages_name_the_option_in_its_unit() {
        let msg = |r: Result<Duration>| {
            let e = r.unwrap_err();
            assert_eq!(e.code(), "INVALID_ARGUMENT");
            e.message().to_string()
        };
        // The report of issue 13: a millisecond option must not be told its limit in seconds.
        assert_eq!(
            msg(duration_from_millis_f64("leaseMs", 3e12)),
            "leaseMs must be at most 2592000000 ms, got 3000000000000 ms"
        );
        assert_eq!(msg(duration_from_secs_f64("timeout", 3e9)), "timeout must be at most 2592000 s, got 3000000000 s");
        assert_eq!(msg(duration_from_millis_f64("timeoutMs", f64::INFINITY)), "timeoutMs must be at most 2592000000 ms, got inf ms");
        assert_eq!(msg(duration_from_millis_f64("timeoutMs", f64::NAN)), "timeoutMs must be a number of milliseconds, got NaN");
        assert_eq!(msg(duration_from_secs_f64("timeout", f64::NAN)), "timeout must be a number of seconds, got NaN");
        assert_eq!(msg(duration_from_millis_f64("timeoutMs", -5.0)), "timeoutMs must not be negative, got -5 ms");
        assert_eq!(msg(duration_from_secs_f64("timeout", -0.5)), "timeout must not be negative, got -0.5 s");
        // Leases: zero and too short, in the caller's unit and spelling.
        assert_eq!(msg(lease_from_f64("leaseMs", 0.0, Unit::Millis)), "leaseMs must be at least 10 ms, got 0 ms");
        assert_eq!(msg(lease_from_f64("leaseMs", 9.5, Unit::Millis)), "leaseMs must be at least 10 ms, got 9.5 ms");
        assert_eq!(msg(lease_from_f64("lease", 0.005, Unit::Seconds)), "lease must be at least 0.01 s, got 0.005 s");
        assert_eq!(msg(lease_from_f64("lease", 1e7, Unit::Seconds)), "lease must be at most 2592000 s, got 10000000 s");
        assert_eq!(msg(entry_ttl_from_f64("entryTtlMs", 50.0, Unit::Millis)), "entryTtlMs must be at least 100 ms, got 50 ms");
        assert_eq!(msg(positive_duration_from_f64("connect_timeout", 0.0, Unit::Seconds)), "connect_timeout must be positive, got 0 s");
        assert_eq!(msg(positive_duration_from_f64("connectTimeoutMs", -1.0, Unit::Millis)), "connectTimeoutMs must not be negative, got -1 ms");
        // In range: converted exactly; the limits themselves are accepted.
        assert_eq!(lease_from_f64("leaseMs", 10.0, Unit::Millis).unwrap(), MIN_LEASE);
        assert_eq!(duration_from_millis_f64("t", 2_592_000_000.0).unwrap(), MAX_DURATION);
        assert_eq!(duration_from_secs_f64("t", 2_592_000.0).unwrap(), MAX_DURATION);
        assert_eq!(duration_from_millis_f64("t", 0.0).unwrap(), Duration::ZERO);
        assert_eq!(duration_from_millis_f64("t", 1500.0).unwrap(), Duration::from_millis(1500));
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
