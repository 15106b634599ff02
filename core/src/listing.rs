//! Listing the locks under a name prefix (issue 25): a bounded page of [`Entry`]s — each a lock
//! someone holds or waits on, with its kind, holder and waiter counts and its first holder's
//! label — and a cursor for the next page. PROTOCOL.md §16 says what each backend reads.
//!
//! The paging rule is written once here and in the engine (`engine/listing.rs`): a backend
//! answers one request per page with the names it found ([`Found`], at most the page size) and
//! its own position; the engine then inspects each found name (one read each, §14) and keeps
//! the ones with a holder or a waiter. A page may therefore be shorter than its limit, even
//! empty, with a cursor: only a page without a cursor is the last. A lock taken or freed while
//! a listing pages on may or may not show; one that exists throughout shows exactly once.

use crate::data::Data;
use crate::error::{Error, Result};
use crate::inspect::{Kind, Snapshot};
use crate::options::MAX_NAME_BYTES;

/// The most entries one page returns: a larger limit is capped to it (one constant for every
/// backend and binding).
pub const MAX_PAGE: u32 = 1000;

/// The page size when the caller gives none.
pub const DEFAULT_PAGE: u32 = 100;

/// The longest cursor a caller may hand back, in bytes (a backend's position: a name and a
/// few numbers).
pub const MAX_CURSOR_BYTES: usize = 2 * MAX_NAME_BYTES + 64;

/// One listed lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The lock's name, as `lock()` takes it.
    pub name: String,
    /// Which primitive it is (a name may show once per kind: each kind keeps its own entries).
    pub kind: Kind,
    /// How many hold it (a semaphore's permits taken, the readers, 1 for a mutex, a writer or
    /// a leader).
    pub holders: u32,
    /// How many wait in its queue (an election's other candidates); 0 where the backend keeps
    /// no queue.
    pub waiters: u32,
    /// The first holder's label (PROTOCOL.md §12), where it stored one.
    pub label: Option<String>,
}

impl Entry {
    /// The entry for lock `name` read as `snapshot`; `None` when nobody holds or waits (a name
    /// whose entries are all gone, or whose keys are only a retained fence).
    pub fn of(name: String, snapshot: &Snapshot) -> Option<Entry> {
        if snapshot.holders.is_empty() && snapshot.waiters.is_empty() {
            return None;
        }
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Some(Entry {
            name,
            kind: snapshot.kind,
            holders: count(snapshot.holders.len()),
            waiters: count(snapshot.waiters.len()),
            label: snapshot.holders.first().and_then(|h| h.label.clone()),
        })
    }
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The locks found, in the backend's order (PROTOCOL.md §16).
    pub entries: Vec<Entry>,
    /// Where the next page starts, to pass back as `cursor`; `None` when this page is the last.
    pub cursor: Option<String>,
}

impl Page {
    /// The page as plain [`Data`], for a binding to convert generically: a map with `entries`
    /// (each `name`, `kind`, `holders`, `waiters`, `label` or `Null`) and `cursor` (or `Null`).
    pub fn to_data(&self) -> Data {
        let entries = self.entries.iter().map(|e| {
            Data::map([
                ("name", Data::Str(e.name.clone())),
                ("kind", Data::Str(e.kind.as_str().into())),
                ("holders", Data::Int(e.holders.into())),
                ("waiters", Data::Int(e.waiters.into())),
                ("label", e.label.clone().map_or(Data::Null, Data::Str)),
            ])
        });
        Data::map([
            ("entries", Data::List(entries.collect())),
            ("cursor", self.cursor.clone().map_or(Data::Null, Data::Str)),
        ])
    }
}

/// One page asked of a backend, already checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// The name prefix: every listed name starts with it (empty: every name).
    pub prefix: String,
    /// The most names the backend may answer (1 ..= [`MAX_PAGE`]).
    pub limit: u32,
    /// The backend's position from the previous page, `None` for the first.
    pub cursor: Option<String>,
}

impl Query {
    /// Checks a caller's listing arguments: `prefix` as a lock name's start (at most
    /// `MAX_NAME_BYTES`, not starting with `}`; empty allowed), `limit` 1 or more (`None`:
    /// [`DEFAULT_PAGE`]; above [`MAX_PAGE`]: capped), `cursor` non-empty and bounded (its
    /// content is checked by the backend that made it). `INVALID_ARGUMENT` otherwise.
    pub fn new(prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<Query> {
        if prefix.starts_with('}') {
            return Err(Error::invalid("prefix must not start with '}' (no lock name does)"));
        }
        if prefix.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(format!("prefix is {} bytes; the limit is {MAX_NAME_BYTES}", prefix.len())));
        }
        if prefix.chars().any(char::is_control) {
            return Err(Error::invalid("prefix must not contain control characters"));
        }
        let limit = match limit {
            None => DEFAULT_PAGE,
            Some(0) => return Err(Error::invalid("limit must be at least 1")),
            Some(n) => u32::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
        };
        if let Some(c) = cursor {
            if c.is_empty() || c.len() > MAX_CURSOR_BYTES {
                return Err(Error::invalid("cursor is not one a listing returned"));
            }
        }
        Ok(Query { prefix: prefix.to_string(), limit, cursor: cursor.map(String::from) })
    }
}

/// What a backend's list request answered: the names it found under the prefix (at most the
/// query's limit; names with no live entry are allowed, the engine drops them) and its position
/// for the next page (`None`: nothing is left).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Each name with its kind, in the backend's order.
    pub locks: Vec<(String, Kind)>,
    /// The backend's position after these names.
    pub next: Option<String>,
}

/// The error for a cursor a backend cannot read (another backend's, edited, truncated).
pub fn bad_cursor() -> Error {
    Error::invalid("cursor is not one a listing on this backend returned")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{Holder, Mode, Waiter};

    #[test]
    fn queries_are_checked_and_capped() {
        assert_eq!(Query::new("", None, None).unwrap().limit, DEFAULT_PAGE);
        assert_eq!(Query::new("a", Some(1_000_000), None).unwrap().limit, MAX_PAGE);
        assert_eq!(Query::new("a", Some(u64::MAX), None).unwrap().limit, MAX_PAGE);
        assert_eq!(Query::new("a", Some(7), Some("x")).unwrap().cursor.as_deref(), Some("x"));
        for bad in [Query::new("a", Some(0), None), Query::new("}a", None, None), Query::new("a\n", None, None), Query::new("a", None, Some(""))] {
            assert_eq!(bad.unwrap_err().code(), "INVALID_ARGUMENT");
        }
        assert_eq!(Query::new(&"x".repeat(MAX_NAME_BYTES + 1), None, None).unwrap_err().code(), "INVALID_ARGUMENT");
    }

    #[test]
    fn entries_count_a_snapshot_and_skip_idle_names() {
        let mut s = Snapshot::empty(Kind::Semaphore);
        assert_eq!(Entry::of("s".into(), &s), None);
        s.holders.push(Holder::new(None, Some("host:1".into()), Some(3), Mode::Shared));
        s.holders.push(Holder::new(None, None, Some(4), Mode::Shared));
        s.waiters.push(Waiter { label: None, waiting_for: None, mode: Mode::Shared });
        let e = Entry::of("s".into(), &s).unwrap();
        assert_eq!((e.kind, e.holders, e.waiters, e.label.as_deref()), (Kind::Semaphore, 2, 1, Some("host:1")));
        let d = Page { entries: vec![e], cursor: None }.to_data();
        assert!(d.get("cursor").is_none());
        let first = &d.get("entries").and_then(Data::as_list).unwrap()[0];
        assert_eq!(first.get("kind").and_then(Data::as_str), Some("semaphore"));
        assert_eq!(first.get("waiters").and_then(Data::as_int), Some(1));
    }
}
