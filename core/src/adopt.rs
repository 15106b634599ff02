//! Handing a lease to another process (issue 25, PROTOCOL.md §17): the holder exports its
//! lease's identity — the lock's name and kind, its owner token and fencing token, as one opaque
//! string — and another client adopts it: from then on that client renews, extends and releases
//! the same hold and gets its loss signal, without a second grant (redis-py's `Lock(token=…)`,
//! python-redis-lock's `Lock(id=…)`, redis-semaphore's "externally acquired" locks).
//!
//! The identity is a capability: whoever has it can release the lock, exactly as the holder
//! can. It is therefore never logged or shown by lockgate, and it carries no credential.
//!
//! The format is written and read only here: `lockgate-lease/1/<kind>/<fence>/<token>/<name>`,
//! `<kind>` one of `mutex`, `semaphore.<permits>`, `read`, `read.readers-first`, `write`;
//! `<fence>` the grant's fencing token in decimal or `-` where the backend issues none; the
//! name last, so it may hold any character a name may (slashes too).

use crate::error::{Error, Result};
use crate::options;
use crate::primitive::Primitive;

/// The version tag every identity starts with.
const TAG: &str = "lockgate-lease/1/";

/// The longest owner token an identity may carry (lockgate's are 32 to 48 characters).
const MAX_TOKEN: usize = 128;

/// What a lease holds: its lock's name and primitive (with the owner token and fencing token,
/// what an [`Identity`] names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    /// The lock's name.
    pub name: String,
    /// What the lease holds of it.
    pub primitive: Primitive,
}

/// A lease's identity: everything another client needs to adopt it.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    /// The lock's name.
    pub name: String,
    /// What the lease holds (a mutex, a semaphore permit, a read or write hold).
    pub primitive: Primitive,
    /// The owner token stored on the server.
    pub(crate) token: String,
    /// The grant's fencing token, where the backend issues them.
    pub fencing_token: Option<u64>,
}

// The owner token is a secret: never printed.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").field("name", &self.name).field("primitive", &self.primitive).field("fencing_token", &self.fencing_token).finish_non_exhaustive()
    }
}

impl Identity {
    /// The identity of a lease holding `held` under owner token `token`; `UNSUPPORTED` for
    /// leadership (an election's entry carries its published value, which a renewal of another
    /// client could not keep).
    pub(crate) fn of(held: &Held, token: &str, fencing_token: Option<u64>) -> Result<Identity> {
        if matches!(held.primitive, Primitive::Leader { .. }) {
            return Err(Error::unsupported("leadership cannot be handed to another process: campaign there instead"));
        }
        Ok(Identity { name: held.name.clone(), primitive: held.primitive.clone(), token: token.to_string(), fencing_token })
    }

    /// The opaque string form (see the module's documentation).
    pub fn encode(&self) -> String {
        let kind = match &self.primitive {
            Primitive::Mutex => "mutex".to_string(),
            Primitive::Semaphore { permits } => format!("semaphore.{permits}"),
            Primitive::Read { writers_first: true } => "read".to_string(),
            Primitive::Read { writers_first: false } => "read.readers-first".to_string(),
            Primitive::Write => "write".to_string(),
            Primitive::Leader { .. } => "leader".to_string(),
        };
        let fence = self.fencing_token.map_or_else(|| "-".to_string(), |f| f.to_string());
        format!("{TAG}{kind}/{fence}/{}/{}", self.token, self.name)
    }

    /// Reads an identity made by [`encode`](Self::encode). Anything else is `INVALID_ARGUMENT`
    /// (the message never repeats the string: it holds an owner token).
    pub fn parse(s: &str) -> Result<Identity> {
        let bad = |why: &str| Error::invalid(format!("identity is not a lockgate lease identity: {why}"));
        let rest = s.strip_prefix(TAG).ok_or_else(|| bad("it does not start with 'lockgate-lease/1/'"))?;
        let mut parts = rest.splitn(4, '/');
        let (Some(kind), Some(fence), Some(token), Some(name)) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad("it has too few parts"));
        };
        let primitive = match kind.split_once('.') {
            None if kind == "mutex" => Primitive::Mutex,
            None if kind == "read" => Primitive::Read { writers_first: true },
            None if kind == "write" => Primitive::Write,
            Some(("read", "readers-first")) => Primitive::Read { writers_first: false },
            Some(("semaphore", n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                Primitive::Semaphore { permits: n.parse().map_err(|_| bad("its semaphore permits are out of range"))? }
            }
            _ => return Err(bad("its kind is unknown")),
        };
        options::validate_primitive(&primitive)?;
        let fencing_token = match fence {
            "-" => None,
            f if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => Some(f.parse().map_err(|_| bad("its fencing token is out of range"))?),
            _ => return Err(bad("its fencing token is not a number")),
        };
        let token_ok = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b':';
        if token.is_empty() || token.len() > MAX_TOKEN || !token.bytes().all(token_ok) {
            return Err(bad("its owner token is malformed"));
        }
        options::validate_name(name)?;
        Ok(Identity { name: name.to_string(), primitive, token: token.to_string(), fencing_token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn every_kind_round_trips_and_the_name_may_hold_slashes() {
        for primitive in [
            Primitive::Mutex,
            Primitive::Semaphore { permits: 3 },
            Primitive::Read { writers_first: true },
            Primitive::Read { writers_first: false },
            Primitive::Write,
        ] {
            for fencing_token in [None, Some(42)] {
                let held = Held { name: "jobs/orders:42".into(), primitive: primitive.clone() };
                let id = Identity::of(&held, "0123abcd:3", fencing_token).unwrap();
                let s = id.encode();
                assert_eq!(Identity::parse(&s).unwrap(), id, "{s}");
            }
        }
        let leader = Held { name: "e".into(), primitive: Primitive::Leader { value: "v".into() } };
        assert_eq!(Identity::of(&leader, "t", None).unwrap_err().kind(), ErrorKind::Unsupported);
    }

    #[test]
    fn malformed_identities_are_invalid_and_never_echo_the_token() {
        let good = "lockgate-lease/1/mutex/7/abc123/orders";
        assert!(Identity::parse(good).is_ok());
        for s in [
            "",
            "abc123",
            "lockgate-lease/2/mutex/7/abc123/orders",
            "lockgate-lease/1/mutex/7/abc123",
            "lockgate-lease/1/lock/7/abc123/orders",
            "lockgate-lease/1/semaphore./7/abc123/orders",
            "lockgate-lease/1/semaphore.0/7/abc123/orders",
            "lockgate-lease/1/semaphore.99999999999/7/abc123/orders",
            "lockgate-lease/1/mutex/x/abc123/orders",
            "lockgate-lease/1/mutex/99999999999999999999999/abc123/orders",
            "lockgate-lease/1/mutex/7//orders",
            "lockgate-lease/1/mutex/7/abc 123/orders",
            "lockgate-lease/1/mutex/7/abc123/",
            "lockgate-lease/1/mutex/7/abc123/}x",
        ] {
            let e = Identity::parse(s).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{s}");
            assert!(!e.message().contains("abc123"), "{e}");
        }
        let d = format!("{:?}", Identity::parse(good).unwrap());
        assert!(!d.contains("abc123"), "{d}");
    }
}
