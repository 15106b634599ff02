//! Where a lock lives in etcd's key space and how its keys are named (PROTOCOL.md §10).
//!
//! - A name starting with `/` is a key prefix used exactly as given, the way `etcdctl lock
//!   NAME` and `etcdctl elect NAME` use NAME (`concurrency.NewMutex(s, NAME)`), and so is
//!   whatever follows `etcd:` (any prefix, `/` or not: `etcd:mutex1` is `etcdctl lock mutex1`'s
//!   prefix); any other name lives under `/lockgate/<kind>/<name>`, kind `mutex`, `rw`, `semaphore` or `election`, so
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

/// The parent of every lock whose name does not start with `/` or [`EXACT`].
pub const ROOT: &str = "/lockgate";

/// The name form of an exact key prefix: `etcd:<prefix>` is `<prefix>` as given, the way
/// `etcdctl lock <prefix>` and `concurrency.NewMutex(s, "<prefix>")` use it, for prefixes that
/// do not start with `/` (`etcd:mutex1`, as etcd's own documentation names locks). A ZooKeeper
/// path is always absolute, so there a leading `/` alone says "exactly this path"; etcd keys
/// need not start with `/`, hence a marker.
pub const EXACT: &str = "etcd:";

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

/// The base of lock `name` of kind `primitive`: `name` itself if it starts with `/`, what
/// follows [`EXACT`] if it starts with that, else `/lockgate/<kind>/<name>`. `INVALID_ARGUMENT`
/// for a name ending with `/` (its keys would hold an empty segment), a bare `/` or `etcd:`,
/// control characters, or more than [`MAX_BASE_BYTES`].
pub fn base(name: &str, primitive: &Primitive) -> Result<String> {
    let (base, what) = match name.strip_prefix(EXACT) {
        Some(prefix) => (prefix.to_string(), "a lock name starting with 'etcd:' names the etcd key prefix after it, which"),
        None if name.starts_with('/') => (name.to_string(), "a lock name starting with '/' is an etcd key prefix and"),
        None => (format!("{ROOT}/{}/{name}", kind_dir(primitive)), "a lock name"),
    };
    let name = if name.starts_with(EXACT) { base.as_str() } else { name };
    if name.is_empty() || name == "/" {
        return Err(Error::invalid(
            "a lock name must name a key prefix (\"orders\", \"/locks/orders\" or \"etcd:mutex1\" as etcdctl lock takes them)",
        ));
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
        // `etcd:` names any prefix exactly, with or without a leading `/`.
        assert_eq!(base("etcd:mutex1", &Primitive::Mutex).unwrap(), "mutex1");
        assert_eq!(base("etcd:my-lock", &Primitive::Semaphore { permits: 2 }).unwrap(), "my-lock");
        assert_eq!(base("etcd:/locks/orders", &Primitive::Mutex).unwrap(), "/locks/orders");
        assert_eq!(base("etcd:a:b", &Primitive::Mutex).unwrap(), "a:b");
        for bad in ["", "/", "a/", "/a/", "a\nb", "etcd:", "etcd:/", "etcd:a/", "etcd:a\tb"] {
            assert_eq!(base(bad, &Primitive::Mutex).unwrap_err().kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert!(base(&"x".repeat(MAX_BASE_BYTES + 1), &Primitive::Mutex).is_err());
    }
}
