//! One setter for every client option, by a binding's name for it: a binding turns its
//! keyword arguments, builder calls or options object into `(key, value)` pairs and hands each
//! to [`ClientOptions::set`], with no code per option; types, ranges and defaults are checked
//! here, with messages in the binding's names and unit. Rules that involve several options or
//! the backend (a Redlock setting on a Redis URL, a replica-ack timeout without a count) are
//! [`ClientOptions::validate_as`]'s.

use std::fmt;

use super::options::{ClientOptions, DEFAULT_REPLICA_ACK_TIMEOUT, DEFAULT_TIMEOUT, MIN_REPLICA_ACK_TIMEOUT};
use super::spelling::{ClientOption, Spelling};
use crate::backend::redis::{EngineConfig, ReplicaAcks};
use crate::error::{Error, Result};
use crate::options::{self, duration_in_range, MAX_DURATION, MIN_LEASE};
use crate::time::Duration;
use super::registry::session_timeout_range;

/// A value as a binding received it, before the core checks it.
#[derive(Clone, PartialEq)]
pub enum OptionValue {
    /// A boolean.
    Bool(bool),
    /// An integer (a count).
    Int(i64),
    /// A number; for a duration, in the spelling's unit (seconds, or milliseconds in Node).
    Number(f64),
    /// A string.
    Str(String),
    /// Bytes (a PEM certificate read by the binding).
    Bytes(Vec<u8>),
    /// Not given (Python `None`, Java `null`, JS `undefined`/`null`): the option's default.
    None,
    /// A value of no kind above, as the binding describes it for messages (`an object`).
    Other(String),
}

impl OptionValue {
    /// What the value is, for messages (never the value itself: it may be a secret).
    pub(crate) fn describe(&self) -> &str {
        match self {
            OptionValue::Bool(_) => "a boolean",
            OptionValue::Int(_) => "an integer",
            OptionValue::Number(_) => "a number",
            OptionValue::Str(_) => "a string",
            OptionValue::Bytes(_) => "bytes",
            OptionValue::None => "nothing",
            OptionValue::Other(what) => what,
        }
    }
}

impl fmt::Debug for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Bool(b) => write!(f, "Bool({b})"),
            OptionValue::Int(i) => write!(f, "Int({i})"),
            OptionValue::Number(n) => write!(f, "Number({n})"),
            // Strings and bytes may be key material: shown by length only.
            OptionValue::Str(s) => write!(f, "Str({} bytes)", s.len()),
            OptionValue::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            OptionValue::None => f.write_str("None"),
            OptionValue::Other(what) => write!(f, "Other({what})"),
        }
    }
}

impl ClientOptions {
    /// Sets the option a binding calls `key` (in `spelling`) to `value`; `OptionValue::None`
    /// restores its default. `INVALID_ARGUMENT` for an unknown key (the message lists the
    /// valid ones), a value of the wrong type, or one out of range; nothing changes then.
    pub fn set(&mut self, key: &str, value: OptionValue, spelling: &Spelling) -> Result<()> {
        let option = spelling.option(key).ok_or_else(|| {
            Error::invalid(format!("unknown client option {key:?}; the options are: {}", spelling.all_keys()))
        })?;
        let unset = matches!(value, OptionValue::None);
        let number = |min: Duration, max: Duration| -> Result<Duration> {
            let v = match &value {
                OptionValue::Number(v) => *v,
                OptionValue::Int(v) => *v as f64,
                other => {
                    return Err(Error::invalid(format!(
                        "{key} must be a number of {}, got {}",
                        spelling.unit.noun(),
                        other.describe()
                    )))
                }
            };
            duration_in_range(key, v, spelling.unit, min, max)
        };
        let wrong = |what: &str| Error::invalid(format!("{key} must be {what}, got {}", value.describe()));
        let positive = |d: Duration| -> Result<Duration> {
            if d.is_zero() {
                return Err(Error::invalid(format!("{key} must be positive, got 0 {}", spelling.unit.symbol())));
            }
            Ok(d)
        };
        match option {
            ClientOption::KeyPrefix => {
                let prefix = match &value {
                    OptionValue::None => EngineConfig::default().key_prefix,
                    OptionValue::Str(s) => s.clone(),
                    _ => return Err(wrong("a string")),
                };
                options::validate_prefix(&prefix)?;
                self.key_prefix = prefix;
            }
            ClientOption::TlsCa => {
                self.tls_ca_pem = match &value {
                    OptionValue::None => None,
                    OptionValue::Bytes(b) => Some(b.clone()),
                    OptionValue::Str(s) => Some(s.clone().into_bytes()),
                    _ => return Err(wrong("PEM certificate bytes or text")),
                };
            }
            ClientOption::ConnectTimeout => {
                self.connect_timeout = if unset { DEFAULT_TIMEOUT } else { positive(number(Duration::ZERO, MAX_DURATION)?)? }
            }
            ClientOption::ResponseTimeout => {
                self.response_timeout = if unset { DEFAULT_TIMEOUT } else { positive(number(Duration::ZERO, MAX_DURATION)?)? }
            }
            ClientOption::Cluster => {
                self.cluster = match &value {
                    OptionValue::None => false,
                    OptionValue::Bool(b) => *b,
                    _ => return Err(wrong("a boolean")),
                };
            }
            ClientOption::ReplicaAcks => {
                let count = match &value {
                    OptionValue::None => {
                        self.replica_acks = None;
                        return Ok(());
                    }
                    OptionValue::Int(n) => Some(*n),
                    // Node's numbers are floats: a whole one is a count.
                    OptionValue::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Some(*n as i64),
                    OptionValue::Number(_) => None,
                    _ => return Err(wrong("a whole number of replicas")),
                };
                let replicas = count.and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1).ok_or_else(|| {
                    let got = match &value {
                        OptionValue::Int(n) => n.to_string(),
                        OptionValue::Number(n) => n.to_string(),
                        _ => String::new(),
                    };
                    Error::invalid(format!("{key} must be a whole number of at least 1, got {got}"))
                })?;
                let timeout = self
                    .replica_acks
                    .map(|r| r.timeout)
                    .or(self.replica_ack_timeout_alone.take())
                    .unwrap_or(DEFAULT_REPLICA_ACK_TIMEOUT);
                self.replica_acks = Some(ReplicaAcks { replicas, timeout });
            }
            ClientOption::ReplicaAckTimeout => {
                let timeout = if unset { None } else { Some(number(MIN_REPLICA_ACK_TIMEOUT, MAX_DURATION)?) };
                match &mut self.replica_acks {
                    Some(r) => r.timeout = timeout.unwrap_or(DEFAULT_REPLICA_ACK_TIMEOUT),
                    None => self.replica_ack_timeout_alone = timeout,
                }
            }
            ClientOption::MaxLease => {
                self.max_lease = if unset { None } else { Some(number(MIN_LEASE, MAX_DURATION)?) }
            }
            ClientOption::DriftFactor => {
                self.drift_factor = match &value {
                    OptionValue::None => None,
                    OptionValue::Number(f) if (0.0..0.5).contains(f) => Some(*f),
                    OptionValue::Int(0) => Some(0.0),
                    OptionValue::Number(f) => {
                        return Err(Error::invalid(format!("{key} must be at least 0 and below 0.5, got {f}")))
                    }
                    OptionValue::Int(i) => {
                        return Err(Error::invalid(format!("{key} must be at least 0 and below 0.5, got {i}")))
                    }
                    _ => return Err(wrong("a number (a fraction of the lease)")),
                }
            }
            ClientOption::DriftFixed => {
                self.drift_fixed = if unset { None } else { Some(number(Duration::ZERO, Duration::from_secs(10))?) }
            }
            ClientOption::NodeTimeout => {
                self.node_timeout = if unset { None } else { Some(number(Duration::from_millis(1), MAX_DURATION)?) }
            }
            ClientOption::RetryDelay => {
                self.retry_delay = if unset { None } else { Some(number(Duration::from_millis(1), MAX_DURATION)?) }
            }
            ClientOption::RetryJitter => {
                self.retry_jitter = if unset { None } else { Some(number(Duration::ZERO, MAX_DURATION)?) }
            }
            ClientOption::SessionTimeout => {
                self.session_timeout = if unset { None } else { Some(number(session_timeout_range().0, session_timeout_range().1)?) }
            }
            ClientOption::HeldTooLong => {
                self.held_too_long = if unset { None } else { Some(number(Duration::from_millis(1), MAX_DURATION)?) }
            }
            ClientOption::TelemetryLockNames => {
                self.telemetry_lock_names = match &value {
                    OptionValue::None => false,
                    OptionValue::Bool(b) => *b,
                    _ => return Err(wrong("a boolean")),
                };
            }
            ClientOption::Label => {
                self.label = match &value {
                    OptionValue::None => None,
                    OptionValue::Str(s) => {
                        crate::label::check_label(s, key)?;
                        Some(s.clone())
                    }
                    _ => return Err(wrong("a string")),
                };
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::Backend;

    fn refused(o: &mut ClientOptions, key: &str, value: OptionValue, spelling: &Spelling) -> String {
        let before = format!("{o:?}");
        let e = o.set(key, value, spelling).expect_err(key);
        assert_eq!(e.code(), "INVALID_ARGUMENT", "{key}");
        assert_eq!(format!("{o:?}"), before, "a refused value changes nothing");
        e.message().to_string()
    }

    #[test]
    fn every_key_of_every_spelling_sets_its_option() {
        use OptionValue::*;
        for s in [Spelling::RUST, Spelling::PYTHON, Spelling::JAVA, Spelling::JS] {
            let ms = |millis: f64| if s.unit == crate::options::Unit::Millis { Number(millis) } else { Number(millis / 1000.0) };
            let mut o = ClientOptions::new("redis://h");
            let k = |opt| s.key(opt);
            o.set(k(ClientOption::KeyPrefix), Str("app:".into()), &s).unwrap();
            o.set(k(ClientOption::ConnectTimeout), ms(1500.0), &s).unwrap();
            o.set(k(ClientOption::ResponseTimeout), ms(3000.0), &s).unwrap();
            o.set(k(ClientOption::ReplicaAckTimeout), ms(250.0), &s).unwrap();
            o.set(k(ClientOption::ReplicaAcks), Int(2), &s).unwrap();
            o.set(k(ClientOption::Label), Str("worker-7".into()), &s).unwrap();
            assert_eq!(o.label(), "worker-7");
            assert_eq!(o.key_prefix, "app:");
            assert_eq!((o.connect_timeout, o.response_timeout), (Duration::from_millis(1500), Duration::from_secs(3)));
            assert_eq!(o.replica_acks, Some(ReplicaAcks { replicas: 2, timeout: Duration::from_millis(250) }));
            o.validate_as(&s).unwrap();
            assert!(o.capabilities().unwrap().replica_acks);
            // None restores each default.
            for opt in ClientOption::ALL {
                o.set(k(opt), None, &s).unwrap();
            }
            assert_eq!(format!("{o:?}"), format!("{:?}", ClientOptions::new("redis://h")));
            assert_eq!((o.connect_timeout, o.replica_acks), (DEFAULT_TIMEOUT, Option::None));

            let mut r = ClientOptions::new("redlock://a,b,c");
            r.set(k(ClientOption::MaxLease), ms(10_000.0), &s).unwrap();
            r.set(k(ClientOption::DriftFactor), Number(0.02), &s).unwrap();
            r.set(k(ClientOption::DriftFixed), ms(5.0), &s).unwrap();
            r.set(k(ClientOption::NodeTimeout), ms(20.0), &s).unwrap();
            r.set(k(ClientOption::RetryDelay), ms(100.0), &s).unwrap();
            r.set(k(ClientOption::RetryJitter), ms(0.0), &s).unwrap();
            r.set(k(ClientOption::TlsCa), Bytes(b"pem".to_vec()), &s).unwrap();
            r.url = "rediss+redlock://a,b,c".into();
            r.validate_as(&s).unwrap();
            let c = r.redlock_config().unwrap();
            assert_eq!(
                (c.masters, c.max_lease, c.drift_factor, c.drift_fixed, c.node_timeout, c.retry_delay, c.retry_jitter),
                (
                    3,
                    Duration::from_secs(10),
                    0.02,
                    Duration::from_millis(5),
                    Duration::from_millis(20),
                    Duration::from_millis(100),
                    Duration::ZERO
                )
            );
            assert_eq!(r.tls_ca_pem.as_deref(), Some(&b"pem"[..]));
        }
        // Node's whole-number floats are counts.
        let mut o = ClientOptions::new("redis://h");
        o.set("replicaAcks.replicas", Number(1.0), &Spelling::JS).unwrap();
        assert_eq!(o.replica_acks.map(|r| (r.replicas, r.timeout)), Some((1, DEFAULT_REPLICA_ACK_TIMEOUT)));
    }

    #[test]
    fn unknown_keys_wrong_types_and_ranges() {
        use OptionValue::*;
        let mut o = ClientOptions::new("redis://h");
        let m = refused(&mut o, "connectTimeout", Number(1.0), &Spelling::PYTHON);
        assert!(m.starts_with("unknown client option \"connectTimeout\"; the options are: key_prefix, tls_ca_file, connect_timeout"), "{m}");
        assert!(m.ends_with("retry_jitter, session_timeout, label, telemetry_lock_names, held_too_long"), "{m}");
        assert!(refused(&mut o, "bogus", Bool(true), &Spelling::JS).contains("keyPrefix, tlsCaPem, connectTimeoutMs, commandTimeoutMs"));
        for (key, value, spelling, says) in [
            ("connectTimeoutMs", Str("5".into()), Spelling::JS, "connectTimeoutMs must be a number of milliseconds, got a string"),
            ("connect_timeout", Bool(true), Spelling::PYTHON, "connect_timeout must be a number of seconds, got a boolean"),
            ("connect_timeout", Number(0.0), Spelling::PYTHON, "connect_timeout must be positive, got 0 s"),
            ("responseTimeout", Number(-1.0), Spelling::JAVA, "responseTimeout must not be negative, got -1 s"),
            ("commandTimeoutMs", Number(f64::NAN), Spelling::JS, "commandTimeoutMs must be a number of milliseconds, got NaN"),
            ("commandTimeoutMs", Number(3e12), Spelling::JS, "commandTimeoutMs must be at most 2592000000 ms, got 3000000000000 ms"),
            ("cluster", Int(1), Spelling::RUST, "cluster must be a boolean, got an integer"),
            ("telemetryLockNames", Str("yes".into()), Spelling::JS, "telemetryLockNames must be a boolean, got a string"),
            ("heldTooLongMs", Number(0.0), Spelling::JS, "heldTooLongMs must be at least 1 ms, got 0 ms"),
            ("keyPrefix", Str("a{b".into()), Spelling::JAVA, "key prefix must not contain"),
            ("keyPrefix", Int(3), Spelling::JS, "keyPrefix must be a string, got an integer"),
            ("replica_acks", Int(0), Spelling::PYTHON, "replica_acks must be a whole number of at least 1, got 0"),
            ("replicaAcks", Int(-2), Spelling::JAVA, "replicaAcks must be a whole number of at least 1, got -2"),
            ("replicaAcks.replicas", Number(1.5), Spelling::JS, "replicaAcks.replicas must be a whole number of at least 1, got 1.5"),
            ("replica_acks", Int(1 << 40), Spelling::RUST, "got 1099511627776"),
            ("replica_acks", Str("2".into()), Spelling::RUST, "replica_acks must be a whole number of replicas, got a string"),
            ("replicaAckTimeout", Number(0.0005), Spelling::JAVA, "replicaAckTimeout must be at least 0.001 s, got 0.0005 s"),
            ("maxLeaseMs", Number(5.0), Spelling::JS, "maxLeaseMs must be at least 10 ms, got 5 ms"),
            ("drift_factor", Number(0.5), Spelling::PYTHON, "drift_factor must be at least 0 and below 0.5, got 0.5"),
            ("driftFactor", Str("x".into()), Spelling::JAVA, "driftFactor must be a number (a fraction of the lease), got a string"),
            ("driftFixedMs", Number(20_000.0), Spelling::JS, "driftFixedMs must be at most 10000 ms"),
            ("nodeTimeout", Number(0.0), Spelling::JAVA, "nodeTimeout must be at least 0.001 s, got 0 s"),
            ("tls_ca_file", Int(1), Spelling::PYTHON, "tls_ca_file must be PEM certificate bytes or text, got an integer"),
            ("label", Int(1), Spelling::JS, "label must be a string, got an integer"),
            ("label", Str("x".repeat(257)), Spelling::JAVA, "label must be at most 256 bytes of UTF-8, got 257 bytes"),
            ("label", Str("a\u{1b}[31m".into()), Spelling::PYTHON, "label must not contain control characters"),
        ] {
            let m = refused(&mut o, key, value, &spelling);
            assert!(m.contains(says), "{key}: {m}");
        }
        // A secret given to the wrong option is not echoed.
        let m = refused(&mut o, "connect_timeout", Str("hunter2".into()), &Spelling::RUST);
        assert!(!m.contains("hunter2"), "{m}");
        assert!(!format!("{:?}", Str("hunter2".into())).contains("hunter2"));
    }

    #[test]
    fn settings_a_backend_does_not_have_are_refused() {
        use OptionValue::*;
        let message = |o: &ClientOptions, s: &Spelling| {
            let e = o.validate_as(s).unwrap_err();
            assert_eq!(e.code(), "INVALID_ARGUMENT");
            e.message().to_string()
        };
        let mut o = ClientOptions::new("redis://h");
        o.set("maxLeaseMs", Number(10_000.0), &Spelling::JS).unwrap();
        assert_eq!(
            message(&o, &Spelling::JS),
            "maxLeaseMs is a Redlock setting (redlock:// URLs); a Redis client has no such setting"
        );
        let mut o = ClientOptions::new("redis+cluster://h");
        o.set("retry_delay", Number(1.0), &Spelling::PYTHON).unwrap();
        assert_eq!(
            message(&o, &Spelling::PYTHON),
            "retry_delay is a Redlock setting (redlock:// URLs); a Redis Cluster client has no such setting"
        );
        let mut o = ClientOptions::new("redlock://a,b,c");
        o.set("replicaAcks", Int(1), &Spelling::JAVA).unwrap();
        assert!(message(&o, &Spelling::JAVA).starts_with("replicaAcks is not supported on a Redlock"));
        let mut o = ClientOptions::new("rediss+cluster://h");
        o.set("replica_acks", Int(1), &Spelling::RUST).unwrap();
        assert_eq!(
            message(&o, &Spelling::RUST),
            "replica_acks is not supported on a Redis Cluster (WAIT must reach the lock's primary)"
        );
        let mut o = ClientOptions::new("redlock://a,b,c");
        o.set("cluster", Bool(true), &Spelling::RUST).unwrap();
        assert_eq!(
            message(&o, &Spelling::RUST),
            "cluster applies to redis:// URLs (or write redis+cluster://); a redlock:// URL is a Redlock"
        );
        // A timeout alone, in either order of setting.
        let mut o = ClientOptions::new("redis://h");
        o.set("replicaAcks.timeoutMs", Number(200.0), &Spelling::JS).unwrap();
        assert_eq!(message(&o, &Spelling::JS), "replicaAcks.timeoutMs needs replicaAcks.replicas (the number of replicas WAIT must reach)");
        o.set("replicaAcks.replicas", Int(1), &Spelling::JS).unwrap();
        assert_eq!(o.replica_acks, Some(ReplicaAcks { replicas: 1, timeout: Duration::from_millis(200) }));
        o.validate_as(&Spelling::JS).unwrap();
        // `cluster` on a redis:// URL is the cluster scheme.
        let mut o = ClientOptions::new("redis://h");
        o.cluster = true;
        assert_eq!(o.backend().unwrap(), Backend::RedisCluster);
        assert_eq!(o.capabilities().unwrap().scheme, "redis+cluster");
    }
}
