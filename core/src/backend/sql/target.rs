//! A lock as the SQL backend names it: its `lock_key` (`<kind>/<name>`, kinds as etcd's tree:
//! `mutex`, `rw`, `semaphore`, `election`, so primitives of one name stay apart as they do on
//! Redis) and what its entries are.

use super::request::{AcquireOp, EntryKind, MAX_LOCK_KEY_CHARS};
use crate::error::{Error, Result};
use crate::primitive::Primitive;
use crate::time::Duration;

/// A lock as the SQL backend names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlTarget {
    /// `<kind>/<name>`.
    pub lock_key: String,
    /// The kind of this acquire's entry.
    pub kind: EntryKind,
    /// A semaphore's permits (1 otherwise).
    pub permits: u32,
    /// An election candidate's value.
    pub value: Option<String>,
}

impl SqlTarget {
    /// The target of lock `name` as `primitive`; refuses what the recipes cannot do and names
    /// longer than the column.
    pub fn new(name: &str, primitive: &Primitive) -> Result<SqlTarget> {
        let (dir, kind, permits, value) = match primitive {
            Primitive::Mutex => ("mutex", EntryKind::Mutex, 1, None),
            Primitive::Read { writers_first: true } => ("rw", EntryKind::Read, 1, None),
            Primitive::Read { writers_first: false } => {
                return Err(Error::unsupported(
                    "readers-first read-write locks are not supported by a SQL client: its read-write lock queues \
                     every reader behind the writers before it (use writers_first)",
                ))
            }
            Primitive::Write => ("rw", EntryKind::Write, 1, None),
            Primitive::Semaphore { permits } => ("semaphore", EntryKind::Semaphore, *permits, None),
            Primitive::Leader { value } => ("election", EntryKind::Leader, 1, Some(value.clone())),
        };
        if name.is_empty() {
            return Err(Error::invalid("a lock name must not be empty"));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::invalid("a lock name must not contain control characters"));
        }
        let lock_key = format!("{dir}/{name}");
        if lock_key.chars().count() > MAX_LOCK_KEY_CHARS {
            return Err(Error::invalid(format!(
                "a lock name must be at most {} characters on a SQL backend (lock_key {dir}/<name> is a VARCHAR({MAX_LOCK_KEY_CHARS}))",
                MAX_LOCK_KEY_CHARS - dir.len() - 1
            )));
        }
        Ok(SqlTarget { lock_key, kind, permits, value })
    }

    /// The acquire operation of `owner` with these leases.
    pub fn acquire(&self, owner: &str, lease: Duration, entry_ttl: Duration) -> AcquireOp {
        AcquireOp {
            lock_key: self.lock_key.clone(),
            owner: owner.to_string(),
            kind: self.kind,
            permits: self.permits,
            value: self.value.clone(),
            lease_ms: lease.as_millis() as u64,
            entry_ttl_ms: entry_ttl.as_millis() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn keys_name_the_kind_and_fit_the_column() {
        assert_eq!(SqlTarget::new("orders", &Primitive::Mutex).unwrap().lock_key, "mutex/orders");
        assert_eq!(SqlTarget::new("x", &Primitive::Write).unwrap().lock_key, "rw/x");
        let e = SqlTarget::new("e", &Primitive::Leader { value: "me".into() }).unwrap();
        assert_eq!((e.lock_key.as_str(), e.value.as_deref()), ("election/e", Some("me")));
        assert_eq!(SqlTarget::new("x", &Primitive::Read { writers_first: false }).unwrap_err().kind(), ErrorKind::Unsupported);
        assert!(SqlTarget::new(&"n".repeat(249), &Primitive::Mutex).is_ok());
        assert_eq!(SqlTarget::new(&"n".repeat(250), &Primitive::Mutex).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(SqlTarget::new("a\0b", &Primitive::Mutex).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
