//! Listing the locks under a name prefix on etcd (PROTOCOL.md §16): one linearizable range read
//! per page, in key order, of at most `limit` keys under `/lockgate/<kind>/<prefix>` (the kinds
//! one after the other), or under the prefix itself when it starts with `/` (an exact key
//! prefix, as `etcdctl lock` takes it: every name there is read as a mutex). A lock's keys are
//! `<base>/<lease>` (a read-write lock's `<base>/read|write/<lease>`), so its name is its key
//! without the last segments.
//!
//! The cursor is `<kind index>:<key to start from>`. A full page may have cut the last name's
//! keys short: that name is left to the next page, which starts at its first key.

use super::layout::ROOT;
use super::request::{KeyValue, Order, Range};
use crate::error::Result;
use crate::inspect::Kind;
use crate::listing::{bad_cursor, Found, Query};

/// The kinds a page walks through, in order, with their directories under [`ROOT`].
const KINDS: [(Kind, &str); 4] = [(Kind::Mutex, "mutex"), (Kind::ReadWrite, "rw"), (Kind::Semaphore, "semaphore"), (Kind::Election, "election")];

/// Where a page reads: the kind's index and the key it starts from (`None`: the kind's first).
struct Position {
    kind: usize,
    from: Option<String>,
}

/// The range read of a page of `query`, with the kind it reads.
pub fn range(query: &Query) -> Result<(Range, usize)> {
    let at = position(query)?;
    let mut r = Range::prefix(dir(query, at.kind).into_bytes(), Order::Key, i64::from(query.limit));
    r.from = at.from.map(String::into_bytes);
    Ok((r, at.kind))
}

/// The page the read of kind `kind` answered: its names (the last left out when the read was
/// cut short and it is not alone), and where the next page starts.
pub fn found(query: &Query, kind: usize, kvs: &[KeyValue], count: i64) -> Found {
    let exact = query.prefix.starts_with('/');
    let mut names: Vec<String> = Vec::new();
    for kv in kvs {
        let Ok(key) = std::str::from_utf8(&kv.key) else { continue };
        if let Some(name) = name_of(key, &dir(query, kind), &query.prefix, exact, KINDS[kind].0) {
            if names.last() != Some(&name) && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let cut = count > kvs.len() as i64;
    let next = if cut {
        // The last name may have more keys: the next page starts at its first (or after all
        // of them when it filled the page alone).
        let last = names.last().cloned().unwrap_or_default();
        let base = if exact { last.clone() } else { format!("{ROOT}/{}/{last}", KINDS[kind].1) };
        if names.len() > 1 {
            names.pop();
            Some(format!("{kind}:{base}/"))
        } else {
            let after = String::from_utf8(prefix_end(format!("{base}/").as_bytes())).unwrap_or_default();
            Some(format!("{kind}:{after}"))
        }
    } else if !exact && kind + 1 < KINDS.len() {
        Some(format!("{}:", kind + 1))
    } else {
        None
    };
    let kind = KINDS[kind].0;
    Found { locks: names.into_iter().map(|n| (n, if exact { Kind::Mutex } else { kind })).collect(), next }
}

/// The key prefix a page of kind `kind` reads.
fn dir(query: &Query, kind: usize) -> String {
    if query.prefix.starts_with('/') {
        query.prefix.clone()
    } else {
        format!("{ROOT}/{}/{}", KINDS[kind].1, query.prefix)
    }
}

/// The lock name of `key`, read under `dir`: the key without its lease segment (and a
/// read-write lock's `read`/`write`), after the kind's directory.
fn name_of(key: &str, dir: &str, prefix: &str, exact: bool, kind: Kind) -> Option<String> {
    key.strip_prefix(dir)?;
    let (base, _lease) = key.rsplit_once('/')?;
    let base = if kind == Kind::ReadWrite && !exact {
        base.strip_suffix("/read").or_else(|| base.strip_suffix("/write"))?
    } else {
        base
    };
    let name = if exact { base } else { base.strip_prefix(dir.strip_suffix(prefix)?)? };
    (!name.is_empty() && name.starts_with(prefix)).then(|| name.to_string())
}

/// `<kind index>:<key>`; none is the first kind from its start.
fn position(query: &Query) -> Result<Position> {
    let Some(c) = &query.cursor else { return Ok(Position { kind: 0, from: None }) };
    let (kind, from) = c.split_once(':').ok_or_else(bad_cursor)?;
    let kind: usize = kind.parse().map_err(|_| bad_cursor())?;
    if kind >= KINDS.len() || (query.prefix.starts_with('/') && kind != 0) {
        return Err(bad_cursor());
    }
    let start = dir(query, kind);
    if !from.is_empty() && from < start.as_str() {
        return Err(bad_cursor());
    }
    Ok(Position { kind, from: (!from.is_empty()).then(|| from.to_string()) })
}

/// The end of the range of every key starting with `prefix` (clientv3's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str) -> KeyValue {
        KeyValue { key: key.as_bytes().to_vec(), value: Vec::new(), create_revision: 1, mod_revision: 1, version: 1, lease: 0 }
    }

    #[test]
    fn names_come_from_keys_of_each_kind_and_pages_resume() {
        let q = Query::new("o", Some(3), None).unwrap();
        let (r, kind) = range(&q).unwrap();
        assert_eq!((r.key.as_slice(), kind, r.limit, r.from.clone()), (b"/lockgate/mutex/o".as_slice(), 0, 3, None));
        let f = found(&q, 0, &[kv("/lockgate/mutex/o1/a1"), kv("/lockgate/mutex/o1/a2"), kv("/lockgate/mutex/o2/b")], 5);
        assert_eq!(f.locks, vec![("o1".into(), Kind::Mutex)]);
        assert_eq!(f.next.as_deref(), Some("0:/lockgate/mutex/o2/"));
        let q2 = Query::new("o", Some(3), f.next.as_deref()).unwrap();
        assert_eq!(range(&q2).unwrap().0.from.as_deref(), Some(b"/lockgate/mutex/o2/".as_slice()));
        let f = found(&q2, 0, &[kv("/lockgate/mutex/o2/b")], 1);
        assert_eq!((f.locks, f.next.as_deref()), (vec![("o2".into(), Kind::Mutex)], Some("1:")));
        let q3 = Query::new("o", Some(3), Some("1:")).unwrap();
        let (r, kind) = range(&q3).unwrap();
        assert_eq!((r.key.as_slice(), kind), (b"/lockgate/rw/o".as_slice(), 1));
        let f = found(&q3, 1, &[kv("/lockgate/rw/o3/read/a"), kv("/lockgate/rw/o3/write/b")], 2);
        assert_eq!(f.locks, vec![("o3".into(), Kind::ReadWrite)]);
        let f = found(&Query::new("o", Some(3), Some("3:")).unwrap(), 3, &[], 0);
        assert_eq!(f, Found { locks: vec![], next: None });
    }

    #[test]
    fn a_name_filling_a_page_alone_is_passed_and_peers_are_mutexes() {
        let q = Query::new("o", Some(2), None).unwrap();
        let f = found(&q, 0, &[kv("/lockgate/mutex/o1/a1"), kv("/lockgate/mutex/o1/a2")], 9);
        assert_eq!((f.locks.len(), f.next.as_deref()), (1, Some("0:/lockgate/mutex/o10")));
        let q = Query::new("/locks/", Some(10), None).unwrap();
        let f = found(&q, 0, &[kv("/locks/job/694d7a"), kv("/locks/job/694d7b")], 2);
        assert_eq!((f.locks, f.next), (vec![("/locks/job".into(), Kind::Mutex)], None));
        for bad in ["x", "9:", "1:/locks/", "0:/a"] {
            let q = Query::new("/locks/", Some(10), Some(bad)).unwrap();
            assert_eq!(range(&q).unwrap_err().code(), "INVALID_ARGUMENT", "{bad}");
        }
        assert_eq!(prefix_end(b"a/"), b"a0".to_vec());
    }
}
