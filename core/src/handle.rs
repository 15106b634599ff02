//! A lock handle as a binding that takes options by key builds it (Node's options objects): the
//! handle's options by key, an acquire's wait by key, and what the handle shows of itself, all
//! by the client's rules and in the binding's spelling, so that binding restates none of them.

use crate::capabilities::Capability;
use crate::connect::{ClientOptions, OptionValue, Spelling};
use crate::data::{millis, Data};
use crate::engine::Wait;
use crate::error::{Error, Result};
use crate::options::{duration_in_range, LockOptions, MAX_DURATION, MAX_PERMITS, MIN_ENTRY_TTL, MIN_LEASE};
use crate::primitive::Primitive;
use crate::time::Duration;

/// An option only some handles take, beyond the lease options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// Whether the handle re-enters its own lease (mutexes and read-write locks).
    Reentrant,
    /// Whether a queued writer blocks later readers (read-write locks).
    WritersFirst,
}

/// The options of one lock handle: the lease options, plus the flags some handles take.
#[derive(Clone, Debug)]
pub struct HandleOptions {
    /// The lease options, with the backend's defaults.
    pub lock: LockOptions,
    /// Whether the handle is reentrant (default false).
    pub reentrant: bool,
    /// Whether writers go first (default true).
    pub writers_first: bool,
    /// Whether waiters' queue entries have a lease of their own (the entry TTL applies: Redis).
    pub entry_ttl: bool,
}

/// `value` as a boolean named `key`.
fn boolean(key: &str, value: &OptionValue) -> Result<bool> {
    match value {
        OptionValue::Bool(b) => Ok(*b),
        other => Err(Error::invalid(format!("{key} must be a boolean, got {}", other.describe()))),
    }
}

/// `value` as a duration named `key` in the spelling's unit, between `min` and `max`.
fn duration(key: &str, value: &OptionValue, spelling: &Spelling, min: Duration, max: Duration) -> Result<Duration> {
    match value {
        OptionValue::Number(n) => duration_in_range(key, *n, spelling.unit, min, max),
        OptionValue::Int(n) => duration_in_range(key, *n as f64, spelling.unit, min, max),
        other => Err(Error::invalid(format!("{key} must be a number of {}, got {}", spelling.unit.noun(), other.describe()))),
    }
}

/// A wait named `key`: `None` (not given) or an infinite number waits without limit.
fn wait(key: &str, value: &OptionValue, spelling: &Spelling) -> Result<Option<Duration>> {
    match value {
        OptionValue::None => Ok(None),
        OptionValue::Number(n) if *n == f64::INFINITY => Ok(None),
        v => duration(key, v, spelling, Duration::ZERO, MAX_DURATION).map(Some),
    }
}

/// `Err` naming the first key of `given` not in `known` (a misspelt option silently falling
/// back to its default would be worse than an error); `what` names the options.
fn only_known(what: &str, given: &[(String, OptionValue)], known: &[&str]) -> Result<()> {
    match given.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        Some((key, _)) => Err(Error::invalid(format!("unknown {what} key {key:?}; expected one of {}", known.join(", ")))),
        None => Ok(()),
    }
}

impl ClientOptions {
    /// A handle's options given by key (the lease options, plus the keys of `flags`), with this
    /// client's backend's defaults and rules ([`lock_options`](Self::lock_options),
    /// [`lock_holds`](Self::lock_holds)); `what` names the options in errors. A reentrant handle
    /// needs a backend that re-enters.
    pub fn handle_options(&self, what: &str, given: &[(String, OptionValue)], flags: &[Flag], spelling: &Spelling) -> Result<HandleOptions> {
        let s = spelling;
        let mut known = vec![s.lease, s.auto_renew, s.wait_timeout, s.entry_ttl, s.min_hold, s.max_hold];
        known.extend(flags.iter().map(|f| match f {
            Flag::Reentrant => s.reentrant,
            Flag::WritersFirst => s.writers_first,
        }));
        only_known(what, given, &known)?;
        let (mut lease, mut renew, mut wait_timeout, mut ttl, mut min_hold, mut max_hold) = (None, None, None, None, None, None);
        let (mut reentrant, mut writers_first) = (false, true);
        for (key, v) in given {
            let key = key.as_str();
            match key {
                k if k == s.reentrant => reentrant = boolean(k, v)?,
                k if k == s.writers_first => writers_first = boolean(k, v)?,
                k if k == s.lease => lease = Some(duration(k, v, s, MIN_LEASE, MAX_DURATION)?),
                k if k == s.auto_renew => renew = Some(boolean(k, v)?),
                k if k == s.wait_timeout => wait_timeout = wait(k, v, s)?,
                k if k == s.entry_ttl => ttl = Some(duration(k, v, s, MIN_ENTRY_TTL, MAX_DURATION)?),
                // Ranges and rules are `lock_holds`'s; here only a duration.
                k if k == s.min_hold => min_hold = Some(duration(k, v, s, Duration::ZERO, MAX_DURATION)?),
                _ => max_hold = Some(duration(key, v, s, Duration::ZERO, MAX_DURATION)?),
            }
        }
        let lock = self.lock_options(lease, renew, wait_timeout, ttl, s)?;
        let lock = self.lock_holds(lock, min_hold, max_hold, s)?;
        let capabilities = self.capabilities()?;
        if reentrant {
            capabilities.require(Capability::Reentrant)?;
        }
        Ok(HandleOptions { lock, reentrant, writers_first, entry_ttl: capabilities.entry_ttl })
    }
}

/// How an acquire waits: one attempt (`try_once`), else the timeout given by key (the
/// spelling's `timeout`; the keys in `also` are the binding's own and pass) or, absent, the
/// lock's `default` wait.
pub fn acquire_wait(given: &[(String, OptionValue)], also: &[&str], try_once: bool, default: Option<Duration>, spelling: &Spelling) -> Result<Wait> {
    let known: Vec<&str> = std::iter::once(spelling.timeout).chain(also.iter().copied()).collect();
    only_known("acquire option", given, &known)?;
    let mut timeout = default;
    if let Some((key, v)) = given.iter().find(|(k, _)| k == spelling.timeout) {
        timeout = wait(key, v, spelling)?;
    }
    Ok(match (try_once, timeout) {
        (true, _) => Wait::Try,
        (false, Some(d)) => Wait::For(d),
        (false, None) => Wait::Forever,
    })
}

/// A semaphore's permit count: a whole number (the range is [`validate_primitive`]'s).
///
/// [`validate_primitive`]: crate::options::validate_primitive
pub fn permits(value: &OptionValue) -> Result<u32> {
    let n = match value {
        OptionValue::Int(n) => *n as f64,
        OptionValue::Number(n) => *n,
        other => return Err(Error::invalid(format!("permits must be a number, got {}", other.describe()))),
    };
    if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
        return Ok(n as u32);
    }
    Err(Error::invalid(format!("permits must be a whole number between 1 and {MAX_PERMITS}, got {n}")))
}

/// A break's fencing token: none, or a non-negative integer (a number within 2^53).
pub fn fencing_token(value: &OptionValue) -> Result<Option<u64>> {
    let bad = || Error::invalid(format!("token must be a non-negative integer fencing token, got {}", value.describe()));
    match value {
        OptionValue::None => Ok(None),
        OptionValue::Int(n) => u64::try_from(*n).map(Some).map_err(|_| bad()),
        OptionValue::Number(n) if n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(n) => Ok(Some(*n as u64)),
        _ => Err(bad()),
    }
}

/// A listing's arguments: the prefix (none: every lock), the page size and the cursor (the core
/// checks and caps the size).
pub fn list_args(prefix: &OptionValue, limit: &OptionValue, cursor: &OptionValue) -> Result<(String, Option<u64>, Option<String>)> {
    let prefix = match prefix {
        OptionValue::Str(p) => p.clone(),
        OptionValue::None => String::new(),
        _ => return Err(Error::invalid("prefix must be a string")),
    };
    let limit = match limit {
        OptionValue::None => None,
        OptionValue::Int(n) if *n >= 0 => Some(*n as u64),
        OptionValue::Number(n) if n.is_finite() && *n >= 0.0 && n.fract() == 0.0 => Some(*n as u64),
        OptionValue::Int(_) | OptionValue::Number(_) => return Err(Error::invalid("limit must be a whole number of at least 1")),
        _ => return Err(Error::invalid("limit must be a number")),
    };
    let cursor = match cursor {
        OptionValue::Str(c) => Some(c.clone()),
        OptionValue::None => None,
        _ => return Err(Error::invalid("cursor must be a string returned by listLocks")),
    };
    Ok((prefix, limit, cursor))
}

/// What a handle shows of itself, in camelCase with durations in milliseconds: `{ name, kind,
/// reentrant, options }` plus `permits` (a semaphore), `writersFirst` (a read half) or `value`
/// (leadership); `kind` is `mutex`, `semaphore`, `read`, `write` or `leader`; `options` the
/// effective `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, minHoldMs, maxHoldMs }`
/// (`entryTtlMs` only where queue entries have a lease of their own, `entry_ttl`; a wait without
/// limit is `Infinity`; a hold only where given).
pub fn handle_info(name: &str, primitive: &Primitive, o: &LockOptions, reentrant: bool, entry_ttl: bool) -> Data {
    let mut options = vec![
        ("leaseMs", millis(o.lease).into()),
        ("autoRenew", o.auto_renew.into()),
        ("waitTimeoutMs", o.wait_timeout.map_or(f64::INFINITY, millis).into()),
    ];
    if entry_ttl {
        options.push(("entryTtlMs", millis(o.entry_ttl).into()));
    }
    options.extend(o.min_hold.map(|d| ("minHoldMs", millis(d).into())));
    options.extend(o.max_hold.map(|d| ("maxHoldMs", millis(d).into())));
    let (kind, extra) = match primitive {
        Primitive::Mutex => ("mutex", None),
        Primitive::Semaphore { permits } => ("semaphore", Some(("permits", i64::from(*permits).into()))),
        Primitive::Read { writers_first } => ("read", Some(("writersFirst", (*writers_first).into()))),
        Primitive::Write => ("write", None),
        Primitive::Leader { value } => ("leader", Some(("value", value.as_str().into()))),
    };
    let mut out: Vec<(&str, Data)> = extra.into_iter().collect();
    out.extend([("name", name.into()), ("kind", kind.into()), ("reentrant", reentrant.into()), ("options", Data::map(options))]);
    Data::map(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, OptionValue)]) -> Vec<(String, OptionValue)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn message<T: std::fmt::Debug>(r: Result<T>) -> String {
        r.unwrap_err().message().to_string()
    }

    #[test]
    fn handle_options_by_key_take_the_backends_rules() {
        let (redis, js) = (ClientOptions::new("redis://h"), &Spelling::JS);
        let o = redis.handle_options("lock option", &given(&[("leaseMs", OptionValue::Number(5000.0))]), &[], js).unwrap();
        assert_eq!((o.lock.lease, o.reentrant, o.writers_first, o.entry_ttl), (Duration::from_secs(5), false, true, true));
        let wait = given(&[("waitTimeoutMs", OptionValue::Number(f64::INFINITY)), ("reentrant", OptionValue::Bool(true))]);
        let o = redis.handle_options("lock option", &wait, &[Flag::Reentrant], js).unwrap();
        assert_eq!((o.lock.wait_timeout, o.reentrant), (None, true));
        assert_eq!(
            message(redis.handle_options("lock option", &given(&[("reentrant", OptionValue::Bool(true))]), &[], js)),
            "unknown lock option key \"reentrant\"; expected one of leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, minHoldMs, maxHoldMs"
        );
        let bad = given(&[("leaseMs", OptionValue::Number(5.0))]);
        assert_eq!(message(redis.handle_options("lock option", &bad, &[], js)), "leaseMs must be at least 10 ms, got 5 ms");
        let bad = given(&[("autoRenew", OptionValue::Other("an object".into()))]);
        assert_eq!(message(redis.handle_options("lock option", &bad, &[], js)), "autoRenew must be a boolean, got an object");
        let zk = ClientOptions::new("zookeeper://h");
        assert!(!zk.handle_options("lock option", &[], &[], js).unwrap().entry_ttl);
    }

    #[test]
    fn an_acquire_waits_as_given_or_as_its_lock_says() {
        let js = &Spelling::JS;
        let d = Some(Duration::from_secs(1));
        assert_eq!(acquire_wait(&[], &["signal"], false, d, js).unwrap(), Wait::For(Duration::from_secs(1)));
        assert_eq!(acquire_wait(&[], &[], true, None, js).unwrap(), Wait::Try);
        let forever = given(&[("timeoutMs", OptionValue::None), ("signal", OptionValue::Other("an object".into()))]);
        assert_eq!(acquire_wait(&forever, &["signal"], false, d, js).unwrap(), Wait::Forever);
        assert!(message(acquire_wait(&given(&[("timeout", OptionValue::Int(1))]), &["signal"], false, d, js))
            .starts_with("unknown acquire option key \"timeout\""));
    }

    #[test]
    fn counts_tokens_and_pages_are_whole_numbers() {
        assert_eq!(permits(&OptionValue::Number(3.0)).unwrap(), 3);
        assert!(message(permits(&OptionValue::Number(1.5))).starts_with("permits must be a whole number"));
        assert_eq!(fencing_token(&OptionValue::None).unwrap(), None);
        assert_eq!(fencing_token(&OptionValue::Int(7)).unwrap(), Some(7));
        assert!(fencing_token(&OptionValue::Number(-1.0)).is_err());
        assert!(fencing_token(&OptionValue::Str("7".into())).is_err());
        let (p, l, c) = list_args(&OptionValue::None, &OptionValue::Number(5.0), &OptionValue::None).unwrap();
        assert_eq!((p.as_str(), l, c), ("", Some(5), None));
        assert!(list_args(&OptionValue::None, &OptionValue::Number(0.5), &OptionValue::None).is_err());
    }

    #[test]
    fn a_handle_shows_its_kind_and_effective_options() {
        let o = LockOptions::default();
        let info = handle_info("a", &Primitive::Semaphore { permits: 3 }, &o, false, false);
        assert_eq!(info.get("kind").and_then(Data::as_str), Some("semaphore"));
        assert_eq!(info.get("permits").and_then(Data::as_int), Some(3));
        let options = info.get("options").unwrap();
        assert_eq!(options.get("waitTimeoutMs"), Some(&Data::Float(f64::INFINITY)));
        assert_eq!(options.get("entryTtlMs"), None);
    }
}
