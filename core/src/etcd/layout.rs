//! Where a lock lives in etcd's key space and how its keys are named (PROTOCOL.md §10).
//!
//! - A name starting with `/` is a key prefix used exactly as given, the way `etcdctl lock
//!   NAME` and `etcdctl elect NAME` use NAME (`concurrency.NewMutex(s, NAME)`); any other name
//!   lives under `/lockgate/<kind>/<name>`, kind `mutex`, `rw`, `semaphore` or `election`, so
//!   primitives of one name stay apart as they do on Redis. `etcdctl lock /lockgate/mutex/NAME`
//!   contends with lockgate's mutex `NAME`.
//! - A mutex's and an election's keys are `concurrency.Mutex`'s and `concurrency.Election`'s:
//!   `<base>/<lease id in lower-case hex>`, created with that lease.
//! - lockgate's own layouts: a read-write lock's readers are `<base>/read/<lease>` and its
//!   writers `<base>/write/<lease>`; a semaphore's holders and waiters `<base>/<lease>`. Every
//!   key under `<base>/` queues in one order, by create revision.

use crate::error::{Error, Result};
use crate::primitive::Primitive;

use super::request::LeaseId;

/// The parent of every lock whose name does not start with `/`.
pub const ROOT: &str = "/lockgate";

/// The longest base a lock may have, in bytes (a key adds `/write/` and 16 hex digits).
pub const MAX_BASE_BYTES: usize = 1024;

/// The part of the key space under [`ROOT`] for a primitive's kind.
pub fn kind_dir(primitive: &Primitive) -> &'static str {
    match primitive {
        Primitive::Mutex => "mutex",
        Primitive::Read { .. } | Primitive::Write => "rw",
        Primitive::Semaphore { .. } => "semaphore",
        Primitive::Leader { .. } => "election",
    }
}

/// The base of lock `name` of kind `primitive`: `name` itself if it starts with `/`, else
/// `/lockgate/<kind>/<name>`. `INVALID_ARGUMENT` for a name ending with `/` (its keys would
/// hold an empty segment), a bare `/`, control characters, or more than [`MAX_BASE_BYTES`].
pub fn base(name: &str, primitive: &Primitive) -> Result<String> {
    let base = if name.starts_with('/') { name.to_string() } else { format!("{ROOT}/{}/{name}", kind_dir(primitive)) };
    let what = if name.starts_with('/') { "a lock name starting with '/' is an etcd key prefix and" } else { "a lock name" };
    if name.is_empty() || name == "/" {
        return Err(Error::invalid("a lock name must name a key prefix (\"orders\", or \"/locks/orders\" as etcdctl lock takes it)"));
    }
    if name.ends_with('/') {
        return Err(Error::invalid(format!("{what} must not end with '/' (etcd key prefix {base:?})")));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::invalid(format!("{what} must not contain control characters")));
    }
    if base.len() > MAX_BASE_BYTES {
        return Err(Error::invalid(format!("{what} must be at most {MAX_BASE_BYTES} bytes as a key prefix")));
    }
    Ok(base)
}

/// A lease id as `concurrency.Mutex` writes it in a key: lower-case hex, no leading zeros.
pub fn lease_hex(lease: LeaseId) -> String {
    format!("{lease:x}")
}

/// Which of a lock's key families a key belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `<base>/<lease>`: a mutex, an election, a semaphore.
    Plain,
    /// `<base>/read/<lease>`.
    Read,
    /// `<base>/write/<lease>`.
    Write,
}

/// The prefix a family's keys share: `<base>/`, `<base>/read/` or `<base>/write/`. One client
/// has at most one key per family prefix and lease.
pub fn family_prefix(base: &str, family: Family) -> String {
    match family {
        Family::Plain => format!("{base}/"),
        Family::Read => format!("{base}/read/"),
        Family::Write => format!("{base}/write/"),
    }
}

/// The key of `lease` in a family: `<family prefix><lease hex>`.
pub fn key(family_prefix: &str, lease: LeaseId) -> String {
    format!("{family_prefix}{}", lease_hex(lease))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn names_follow_etcdctl_and_lockgates_own_tree() {
        assert_eq!(base("orders", &Primitive::Mutex).unwrap(), "/lockgate/mutex/orders");
        assert_eq!(base("/locks/orders", &Primitive::Write).unwrap(), "/locks/orders");
        assert_eq!(base("svc", &Primitive::Leader { value: "a".into() }).unwrap(), "/lockgate/election/svc");
        assert_eq!(base("p", &Primitive::Semaphore { permits: 2 }).unwrap(), "/lockgate/semaphore/p");
        assert_eq!(key(&family_prefix("/locks/orders", Family::Plain), 0x694d_7a1b_2c3d), "/locks/orders/694d7a1b2c3d");
        assert_eq!(family_prefix("/x", Family::Write), "/x/write/");
        for bad in ["", "/", "a/", "/a/", "a\nb"] {
            assert_eq!(base(bad, &Primitive::Mutex).unwrap_err().kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert!(base(&"x".repeat(MAX_BASE_BYTES + 1), &Primitive::Mutex).is_err());
    }
}
