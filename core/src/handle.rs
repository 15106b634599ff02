//! A lock handle as a binding whose handles live beside a sans-IO engine keeps it (the Node
//! binding, whose engine is WebAssembly): its options and an acquire's wait given by key (Node's
//! options objects), what it shows of itself, and what it holds ([`Handle`]: which lease a
//! reentrant handle re-enters, the one lease a non-reentrant handle may hold, and its waits that
//! another acquire through it beat), all by the client's rules and in the binding's spelling, so
//! that binding restates none of them. The native handles keep the same rules in
//! `native::lock` and `native::holder`, on the same [`Holding`].

use crate::capabilities::Capability;
use crate::connect::{ClientOptions, OptionValue, Spelling};
use crate::data::{millis, Data};
use crate::driving::Drive;
use crate::engine::{Done, LeaseId, OpId, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::holding::{already_held, Holding, Owner};
use crate::options::{duration_in_range, LockOptions, MAX_DURATION, MAX_PERMITS, MIN_ENTRY_TTL, MIN_LEASE};
use crate::primitive::Primitive;
use crate::time::{Duration, Instant};

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

/// What messages call the options of a handle of `kind` (see [`Handle::make`]).
pub fn options_name(kind: &str) -> &'static str {
    match kind {
        "semaphore" => "semaphore option",
        "read" | "write" => "read-write lock option",
        "election" => "election option",
        _ => "lock option",
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
fn permits_of(value: &OptionValue) -> Result<u32> {
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

/// The new remaining lease of `lease.extend(ms)`, named `what`: a duration of 10 ms (one
/// lease's least) to 30 days in the spelling's unit.
pub fn extension(what: &str, value: &OptionValue, spelling: &Spelling) -> Result<Duration> {
    duration(what, value, spelling, MIN_LEASE, MAX_DURATION)
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

/// One lock handle of a sans-IO driver: what it acquires, with which options, and what it holds.
/// A Node handle is one [`Owner`] for every async flow that uses it (JavaScript cannot tell two
/// flows from one flow acquiring twice).
#[derive(Debug)]
pub struct Handle {
    /// The lock's name.
    pub name: String,
    /// What the handle acquires.
    pub primitive: Primitive,
    /// Its lease options.
    pub options: LockOptions,
    /// Whether acquiring through it while it holds re-enters its lease.
    pub reentrant: bool,
    /// Whether queue entries have a lease of their own (shown as `entryTtlMs`).
    entry_ttl: bool,
    /// The lease a reentrant handle last acquired (re-entered while held).
    current: Option<LeaseId>,
    /// The lease a non-reentrant handle holds.
    holding: Holding<()>,
    /// A non-reentrant handle's acquires in flight.
    waiting: Vec<OpId>,
    /// Those withdrawn because another acquire through the handle won: they end `ALREADY_HELD`.
    withdrawn: Vec<OpId>,
}

impl Handle {
    /// The handle of `primitive` `name` (a validated name) with `options`; `INVALID_ARGUMENT` for
    /// a primitive out of range (a semaphore's permits, a leader's value).
    pub fn new(name: String, primitive: Primitive, options: &HandleOptions) -> Result<Handle> {
        crate::options::validate_primitive(&primitive)?;
        Ok(Handle {
            name,
            primitive,
            options: options.lock.clone(),
            reentrant: options.reentrant,
            entry_ttl: options.entry_ttl,
            current: None,
            holding: Holding::default(),
            waiting: Vec::new(),
            withdrawn: Vec::new(),
        })
    }

    /// The handle a binding makes by the name it calls it — `mutex`, `semaphore` (of `permits`
    /// permits), `read` or `write` (a half of a read-write lock), `election` (leadership with an
    /// empty value until a candidate publishes one) — for lock `name` (validated) with `given`
    /// options by `client`'s rules, in `spelling`; `UNSUPPORTED` where the backend lacks it.
    pub fn make(client: &ClientOptions, kind: &str, name: String, given: &[(String, OptionValue)], permits: &OptionValue, spelling: &Spelling) -> Result<Handle> {
        crate::options::validate_name(&name)?;
        let (flags, needs): (&[Flag], _) = match kind {
            "mutex" => (&[Flag::Reentrant], None),
            "semaphore" => (&[], Some(Capability::Semaphore)),
            "read" | "write" => (&[Flag::Reentrant, Flag::WritersFirst], Some(Capability::ReadWrite)),
            "election" => (&[], Some(Capability::Election)),
            other => return Err(Error::invalid(format!("no handle of kind {other:?}"))),
        };
        let what = options_name(kind);
        if let Some(c) = needs {
            client.capabilities()?.require(c)?;
        }
        let permits = if kind == "semaphore" { permits_of(permits)? } else { 0 };
        let o = client.handle_options(what, given, flags, spelling)?;
        let primitive = match kind {
            "mutex" => Primitive::Mutex,
            "semaphore" => Primitive::Semaphore { permits },
            "read" => Primitive::Read { writers_first: o.writers_first },
            "write" => Primitive::Write,
            _ => Primitive::Leader { value: String::new() },
        };
        Handle::new(name, primitive, &o)
    }

    /// The handle of the lease `identity` names (`lease.identity()` of another client): its
    /// name and primitive, `given` lease options. `INVALID_ARGUMENT` for a malformed identity,
    /// `UNSUPPORTED` where the backend cannot adopt.
    pub fn adopted(client: &ClientOptions, identity: &str, given: &[(String, OptionValue)], spelling: &Spelling) -> Result<Handle> {
        client.capabilities()?.require(Capability::Adopt)?;
        let identity = crate::adopt::Identity::parse(identity)?;
        let o = client.handle_options("adopt option", given, &[], spelling)?;
        Handle::new(identity.name, identity.primitive, &o)
    }

    /// This election handle's candidate publishing `value`: a handle of its own (never reentrant).
    pub fn candidate(&self, value: String) -> Result<Handle> {
        let options = HandleOptions { lock: self.options.clone(), reentrant: false, writers_first: true, entry_ttl: self.entry_ttl };
        Handle::new(self.name.clone(), Primitive::Leader { value }, &options)
    }

    /// What the handle shows of itself, in camelCase with durations in milliseconds: `{ name,
    /// kind, reentrant, options }` plus `permits` (a semaphore), `writersFirst` (a read half) or
    /// `value` (leadership); `kind` is `mutex`, `semaphore`, `read`, `write` or `leader`;
    /// `options` the effective `{ leaseMs, autoRenew, waitTimeoutMs, entryTtlMs, minHoldMs,
    /// maxHoldMs }` (`entryTtlMs` only where queue entries have a lease of their own; a wait
    /// without limit is `Infinity`; a hold only where given).
    pub fn info(&self) -> Data {
        let o = &self.options;
        let mut options = vec![
            ("leaseMs", millis(o.lease).into()),
            ("autoRenew", o.auto_renew.into()),
            ("waitTimeoutMs", o.wait_timeout.map_or(f64::INFINITY, millis).into()),
        ];
        if self.entry_ttl {
            options.push(("entryTtlMs", millis(o.entry_ttl).into()));
        }
        options.extend(o.min_hold.map(|d| ("minHoldMs", millis(d).into())));
        options.extend(o.max_hold.map(|d| ("maxHoldMs", millis(d).into())));
        let (kind, extra) = match &self.primitive {
            Primitive::Mutex => ("mutex", None),
            Primitive::Semaphore { permits } => ("semaphore", Some(("permits", i64::from(*permits).into()))),
            Primitive::Read { writers_first } => ("read", Some(("writersFirst", (*writers_first).into()))),
            Primitive::Write => ("write", None),
            Primitive::Leader { value } => ("leader", Some(("value", value.as_str().into()))),
        };
        let mut out: Vec<(&str, Data)> = extra.into_iter().collect();
        let name = self.name.as_str().into();
        out.extend([("name", name), ("kind", kind.into()), ("reentrant", self.reentrant.into()), ("options", Data::map(options))]);
        Data::map(out)
    }

    /// Starts an acquire through the handle; the driver hands its completion to
    /// [`settle`](Self::settle). A reentrant handle whose lease is held re-enters it (one more
    /// hold, at once); a non-reentrant one that holds a live lease refuses with `ALREADY_HELD`
    /// and sends nothing.
    pub fn acquire(&mut self, engine: &mut (impl Drive + ?Sized), now: Instant, wait: Wait) -> Result<OpId> {
        if self.reentrant {
            match self.current.take() {
                Some(lease) if engine.is_held(now, lease) => return Ok(engine.reacquire(now, lease)),
                _ => return engine.acquire(now, &self.name, &self.primitive, &self.options, wait),
            }
        }
        self.holding.check(&self.name, &self.primitive, Owner::HANDLE, |id, _| engine.is_held(now, id))?;
        let op = engine.acquire(now, &self.name, &self.primitive, &self.options, wait)?;
        self.waiting.push(op);
        Ok(op)
    }

    /// What came of `op`, an acquire started through the handle, before its waiter learns it:
    /// a reentrant handle re-enters the lease next time; a non-reentrant one holds it and
    /// withdraws its other waits (each then ends `ALREADY_HELD`), or, if another acquire through
    /// it won first, gives the lease back and `done` becomes that `ALREADY_HELD`.
    pub fn settle(&mut self, engine: &mut (impl Drive + ?Sized), now: Instant, op: OpId, done: &mut Done) {
        self.waiting.retain(|w| *w != op);
        let withdrawn = self.withdrawn.iter().position(|w| *w == op).map(|i| self.withdrawn.swap_remove(i)).is_some();
        let lease = match done {
            Done::Acquired { lease, .. } => *lease,
            Done::Failed(e) if withdrawn && e.kind() == ErrorKind::Cancelled => {
                *done = Done::Failed(already_held(&self.name, &self.primitive, Owner::HANDLE));
                return;
            }
            _ => return,
        };
        if self.reentrant {
            self.current = Some(lease);
            return;
        }
        let live = |id, _: &()| engine.is_held(now, id);
        match self.holding.hold(&self.name, &self.primitive, Owner::HANDLE, lease, (), live) {
            Ok(()) => {
                for w in std::mem::take(&mut self.waiting) {
                    engine.cancel(now, w);
                    self.withdrawn.push(w);
                }
            }
            Err(e) => {
                engine.release(now, lease);
                *done = Done::Failed(e);
            }
        }
    }

    /// Frees the place of `lease`, released through the handle: it may acquire again.
    pub fn free(&mut self, lease: LeaseId) {
        self.holding.free(lease);
    }
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
        assert_eq!(permits_of(&OptionValue::Number(3.0)).unwrap(), 3);
        assert!(message(permits_of(&OptionValue::Number(1.5))).starts_with("permits must be a whole number"));
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
        let o = HandleOptions { lock: LockOptions::default(), reentrant: false, writers_first: true, entry_ttl: false };
        let info = Handle::new("a".into(), Primitive::Semaphore { permits: 3 }, &o).unwrap().info();
        assert_eq!(info.get("kind").and_then(Data::as_str), Some("semaphore"));
        assert_eq!(info.get("permits").and_then(Data::as_int), Some(3));
        let options = info.get("options").unwrap();
        assert_eq!(options.get("waitTimeoutMs"), Some(&Data::Float(f64::INFINITY)));
        assert_eq!(options.get("entryTtlMs"), None);
    }
}
