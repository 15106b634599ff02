//! Where a lock lives in the ZooKeeper tree and how its child nodes are named and ordered:
//! Apache Curator's layouts (PROTOCOL.md "ZooKeeper"), so a lockgate process and a Curator one
//! contending on one path exclude each other and are served in arrival order.
//!
//! - A name starting with `/` is an absolute path within the URL's chroot, used exactly as
//!   given (Curator's `InterProcessMutex("/locks/orders")` is lockgate's `"/locks/orders"`);
//!   any other name lives under `/lockgate/<kind>/<name>`, kind `mutex`, `rw`, `semaphore` or
//!   `election`, so primitives of one name stay apart as they do on Redis.
//! - Every node lockgate creates carries Curator's protected-mode prefix `_c_<uuid>-`, the uuid
//!   being the owner token: a create whose reply was lost is found again by it.
//! - Children are ordered as Curator orders them: by what follows the last occurrence of the
//!   recipe's lock name(s) (`lock-`, `__READ__`/`__WRIT__`, `latch-`), i.e. the 10-digit
//!   sequence number the server appended.

use crate::error::{Error, Result};
use crate::primitive::Primitive;

use super::address::check_path;

/// The parent of every lock whose name is not an absolute path.
pub const ROOT: &str = "/lockgate";

/// Curator's protected-mode marker, at the start of a node name (`CreateBuilderImpl`).
pub const PROTECTED_PREFIX: &str = "_c_";

/// A mutex node's lock name (`InterProcessMutex`: `lock-`).
pub const LOCK_NAME: &str = "lock-";
/// A reader's node name (`InterProcessReadWriteLock.READ_LOCK_NAME`).
pub const READ_NAME: &str = "__READ__";
/// A writer's node name (`InterProcessReadWriteLock.WRITE_LOCK_NAME`: `__WRIT__`, as long as
/// `__READ__` on purpose, so Curator's sort cuts both names at the same place).
pub const WRITE_NAME: &str = "__WRIT__";
/// A semaphore lease's node name (`InterProcessSemaphoreV2.LEASE_BASE_NAME`).
pub const LEASE_NAME: &str = "lease-";
/// An election candidate's node name (`LeaderLatch.LOCK_NAME`).
pub const LATCH_NAME: &str = "latch-";
/// The semaphore's internal mutex, under its path (`InterProcessSemaphoreV2.LOCK_PARENT`).
pub const SEMAPHORE_LOCKS: &str = "locks";
/// The semaphore's leases, under its path (`InterProcessSemaphoreV2.LEASE_PARENT`).
pub const SEMAPHORE_LEASES: &str = "leases";

/// The directory under [`ROOT`] for a primitive's kind (`mutex`, `rw`, `semaphore`, `election`).
pub fn kind_dir(primitive: &Primitive) -> &'static str {
    match primitive {
        Primitive::Mutex => "mutex",
        Primitive::Read { .. } | Primitive::Write => "rw",
        Primitive::Semaphore { .. } => "semaphore",
        Primitive::Leader { .. } => "election",
    }
}

/// The znode under which lock `name` of kind `primitive` keeps its children: `name` itself if
/// it starts with `/`, else `/lockgate/<kind>/<name>`. `INVALID_ARGUMENT` if that is not a
/// ZooKeeper path lockgate may use (empty, `.`/`..` or empty segments, a trailing `/`, control
/// characters, the root itself, or ZooKeeper's reserved `/zookeeper` tree).
pub fn base_path(name: &str, primitive: &Primitive) -> Result<String> {
    let path = if name.starts_with('/') { name.to_string() } else { format!("{ROOT}/{}/{name}", kind_dir(primitive)) };
    let what = if name.starts_with('/') { "a lock name starting with '/' is a ZooKeeper path and" } else { "a lock name" };
    check_path(&path).map_err(|why| Error::invalid(format!("{what} {why} (ZooKeeper path {path:?})")))?;
    if path == "/" {
        return Err(Error::invalid("a lock name must not be the root '/' (name a node: \"/locks/orders\")"));
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(Error::invalid("a lock name must not be under /zookeeper (ZooKeeper reserves it)"));
    }
    Ok(path)
}

/// The owner token for 32 random hex digits: a UUID's text (8-4-4-4-12), as Curator's
/// protected mode writes it. Anything else is returned unchanged.
pub fn owner_uuid(random_hex: &str) -> String {
    if random_hex.len() != 32 || !random_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return random_hex.to_string();
    }
    let h = random_hex;
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// The protected prefix of every node owned by `token`: `_c_<token>-`.
pub fn protected_prefix(token: &str) -> String {
    format!("{PROTECTED_PREFIX}{token}-")
}

/// The path a sequential node of `token` is created at under `parent` (the server appends the
/// sequence number): `<parent>/_c_<token>-<lock_name>`.
pub fn create_path(parent: &str, token: &str, lock_name: &str) -> String {
    format!("{parent}/{}{lock_name}", protected_prefix(token))
}

/// `<parent>/<child>`.
pub fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// The last segment of a path.
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The kind of a child node, by the lock name it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A mutex node (`lock-`), also a semaphore's internal mutex.
    Lock,
    /// A reader (`__READ__`).
    Read,
    /// A writer (`__WRIT__`).
    Write,
    /// A semaphore lease (`lease-`).
    Lease,
    /// An election candidate (`latch-`).
    Latch,
}

impl NodeKind {
    /// The lock name written in the node's name.
    pub fn lock_name(self) -> &'static str {
        match self {
            NodeKind::Lock => LOCK_NAME,
            NodeKind::Read => READ_NAME,
            NodeKind::Write => WRITE_NAME,
            NodeKind::Lease => LEASE_NAME,
            NodeKind::Latch => LATCH_NAME,
        }
    }
}

/// A child node's name, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    /// The whole name.
    pub name: String,
    /// The owner token of a protected name (`_c_<token>-...`), if it is one.
    pub owner: Option<String>,
    /// The recipe kind its name carries, if any (the last lock name found in it).
    pub kind: Option<NodeKind>,
    /// The sequence number the server appended (the digits after the lock name), if any.
    pub sequence: Option<i64>,
}

/// Takes a child name apart: owner token, kind, sequence. Never fails: a foreign name
/// (another library's, a hand-made node) is a [`Child`] with what could be read of it.
pub fn parse_child(name: &str) -> Child {
    // The owner token of a protected name is a UUID (36 characters) in lockgate and Curator.
    let owner = name
        .strip_prefix(PROTECTED_PREFIX)
        .and_then(|rest| rest.get(..37))
        .filter(|t| t.ends_with('-'))
        .map(|t| t[..36].to_string());
    let mut best: Option<(usize, NodeKind)> = None;
    for kind in [NodeKind::Lock, NodeKind::Read, NodeKind::Write, NodeKind::Lease, NodeKind::Latch] {
        if let Some(i) = name.rfind(kind.lock_name()) {
            let end = i + kind.lock_name().len();
            if best.is_none_or(|(e, _)| end > e) {
                best = Some((end, kind));
            }
        }
    }
    let (kind, sequence) = match best {
        Some((end, kind)) => (Some(kind), parse_sequence(&name[end..])),
        None => (None, None),
    };
    Child { name: name.to_string(), owner, kind, sequence }
}

/// A sequence suffix: ZooKeeper's `%010d` of a signed 32-bit counter.
fn parse_sequence(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if s.len() < 10 || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Curator's sort key (`StandardLockInternalsDriver.standardFixForSorting`): what follows the
/// last occurrence of `lock_name`, or the whole name if it has none.
pub fn fix_for_sorting<'a>(name: &'a str, lock_name: &str) -> &'a str {
    match name.rfind(lock_name) {
        Some(i) => &name[i + lock_name.len()..],
        None => name,
    }
}

/// Sorts `children` as Curator's recipe with lock names `lock_names` does: by the key left
/// after stripping through each lock name in turn (a read-write lock strips `__READ__` then
/// `__WRIT__`, as its `SortingLockInternalsDriver`), compared as strings; stable.
pub fn sort_children(children: &mut [String], lock_names: &[&str]) {
    children.sort_by(|a, b| sort_key(a, lock_names).cmp(sort_key(b, lock_names)));
}

/// A name ending in a 10-digit sequence sorts by it: for every name Curator (or lockgate)
/// makes that is exactly Curator's key, and it also orders kazoo's `<hex>__lock__NNNNNNNNNN`
/// contenders by their sequence (Curator would compare their whole names). Other names sort by
/// Curator's key.
fn sort_key<'a>(name: &'a str, lock_names: &[&str]) -> &'a str {
    match trailing_sequence(name) {
        Some(seq) => seq,
        None => lock_names.iter().fold(name, |key, lock| fix_for_sorting(key, lock)),
    }
}

/// The last 10 characters of `name` if they are digits not preceded by another digit.
fn trailing_sequence(name: &str) -> Option<&str> {
    let start = name.len().checked_sub(10)?;
    let seq = name.get(start..)?;
    let before_is_digit = name[..start].bytes().last().is_some_and(|b| b.is_ascii_digit());
    (seq.bytes().all(|b| b.is_ascii_digit()) && !before_is_digit).then_some(seq)
}

/// The lock names a recipe sorts its children by.
pub fn sort_names(kind: NodeKind) -> &'static [&'static str] {
    match kind {
        NodeKind::Read | NodeKind::Write => &[READ_NAME, WRITE_NAME],
        NodeKind::Lock => &[LOCK_NAME],
        NodeKind::Lease => &[LEASE_NAME],
        NodeKind::Latch => &[LATCH_NAME],
    }
}

/// The child of `children` owned by `token` (its name starts with `token`'s protected prefix
/// and carries `kind`'s lock name), if any.
pub fn find_owned<'a>(children: &'a [String], token: &str, kind: NodeKind) -> Option<&'a String> {
    let prefix = protected_prefix(token);
    children.iter().find(|c| c.starts_with(&prefix) && c[prefix.len()..].starts_with(kind.lock_name()))
}

/// Every child of `children` owned by `token`, whatever its kind.
pub fn owned_by<'a>(children: &'a [String], token: &'a str) -> impl Iterator<Item = &'a String> + 'a {
    let prefix = protected_prefix(token);
    children.iter().filter(move |c| c.starts_with(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_paths() {
        assert_eq!(base_path("orders", &Primitive::Mutex).unwrap(), "/lockgate/mutex/orders");
        assert_eq!(base_path("orders", &Primitive::Write).unwrap(), "/lockgate/rw/orders");
        assert_eq!(base_path("orders", &Primitive::Read { writers_first: true }).unwrap(), "/lockgate/rw/orders");
        assert_eq!(base_path("a/b", &Primitive::Semaphore { permits: 2 }).unwrap(), "/lockgate/semaphore/a/b");
        assert_eq!(base_path("e", &Primitive::Leader { value: "x".into() }).unwrap(), "/lockgate/election/e");
        // An absolute name is used as given, whatever the kind (Curator's path).
        assert_eq!(base_path("/locks/orders", &Primitive::Mutex).unwrap(), "/locks/orders");
        assert_eq!(base_path("/locks/orders", &Primitive::Write).unwrap(), "/locks/orders");
        for bad in ["/", "/a/", "//a", "/a/./b", "/a/../b", "a//b", "a/", "/zookeeper", "/zookeeper/x", "a\u{1}b"] {
            let e = base_path(bad, &Primitive::Mutex).expect_err(bad);
            assert_eq!(e.code(), "INVALID_ARGUMENT", "{bad}");
        }
        assert!(base_path("/zookeeperish", &Primitive::Mutex).is_ok());
    }

    #[test]
    fn tokens_are_uuids_and_prefix_nodes() {
        let t = owner_uuid("0123456789abcdef0123456789abcdef");
        assert_eq!(t, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(protected_prefix(&t), "_c_01234567-89ab-cdef-0123-456789abcdef-");
        assert_eq!(create_path("/l", &t, LOCK_NAME), "/l/_c_01234567-89ab-cdef-0123-456789abcdef-lock-");
        assert_eq!(owner_uuid("xyz"), "xyz");
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(node_name("/a/b/c"), "c");
    }

    #[test]
    fn children_are_parsed_and_sorted_as_curator_does() {
        let c = parse_child("_c_01234567-89ab-cdef-0123-456789abcdef-lock-0000000012");
        assert_eq!(c.owner.as_deref(), Some("01234567-89ab-cdef-0123-456789abcdef"));
        assert_eq!((c.kind, c.sequence), (Some(NodeKind::Lock), Some(12)));
        let r = parse_child("_c_01234567-89ab-cdef-0123-456789abcdef-__READ__0000000003");
        assert_eq!((r.kind, r.sequence), (Some(NodeKind::Read), Some(3)));
        let w = parse_child("__WRIT__0000000004");
        assert_eq!((w.owner, w.kind, w.sequence), (None, Some(NodeKind::Write), Some(4)));
        let foreign = parse_child("x");
        assert_eq!((foreign.owner, foreign.kind, foreign.sequence), (None, None, None));
        assert_eq!(parse_child("_c_short-lock-0000000001").owner, None);

        let mut rw = vec![
            "_c_b-__WRIT__0000000007".to_string(),
            "_c_a-__READ__0000000002".to_string(),
            "__READ__0000000005".to_string(),
            "_c_c-__WRIT__0000000001".to_string(),
        ];
        sort_children(&mut rw, sort_names(NodeKind::Write));
        assert_eq!(rw, ["_c_c-__WRIT__0000000001", "_c_a-__READ__0000000002", "__READ__0000000005", "_c_b-__WRIT__0000000007"]);
        let mut m = vec!["_c_z-lock-0000000010".to_string(), "_c_a-lock-0000000009".to_string()];
        sort_children(&mut m, sort_names(NodeKind::Lock));
        assert_eq!(m, ["_c_a-lock-0000000009", "_c_z-lock-0000000010"]);
        // kazoo's contenders sort by their sequence among ours (Curator would misplace them).
        let mut k = vec!["f00d__lock__0000000003".to_string(), "_c_a-lock-0000000004".to_string(), "0abc__lock__0000000002".to_string()];
        sort_children(&mut k, sort_names(NodeKind::Lock));
        assert_eq!(k, ["0abc__lock__0000000002", "f00d__lock__0000000003", "_c_a-lock-0000000004"]);
        let mut odd = vec!["b".to_string(), "a".to_string(), "x-lock-12345678901".to_string()];
        sort_children(&mut odd, sort_names(NodeKind::Lock));
        assert_eq!(odd, ["x-lock-12345678901", "a", "b"]);
        let t = "01234567-89ab-cdef-0123-456789abcdef";
        let kids = vec![format!("_c_{t}-lease-0000000001"), format!("_c_{t}-lock-0000000002"), "other".to_string()];
        assert_eq!(find_owned(&kids, t, NodeKind::Lock), Some(&kids[1]));
        assert_eq!(find_owned(&kids, t, NodeKind::Latch), None);
        assert_eq!(owned_by(&kids, t).count(), 2);
    }
}
