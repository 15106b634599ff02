//! Listing the locks under a name prefix on ZooKeeper (PROTOCOL.md §16): one `getChildren` per
//! page, of `/lockgate/<kind>` (the kinds one after the other), or, for a prefix starting with
//! `/` (an absolute path, as Curator's recipes name theirs), of the prefix's parent node, whose
//! children under the prefix are read as mutexes. ZooKeeper lists a node's children whole (it has
//! no paged listing; the server bounds a reply by its `jute.maxbuffer`), so the page is cut
//! here: the matching children sorted, after the cursor, at most `limit`.
//!
//! The cursor is `<kind index>:<last name listed>`. A name with `/` in it lives below its
//! first segment, which is what the kind's listing shows (and drops: nobody holds or waits on
//! that node itself); list its path (`/lockgate/mutex/a/`) to see those.

use super::layout::ROOT;
use crate::error::Result;
use crate::inspect::Kind;
use crate::listing::{bad_cursor, Found, Query};

/// The kinds a listing walks through, in order, with their directories under [`ROOT`].
const KINDS: [(Kind, &str); 4] = [(Kind::Mutex, "mutex"), (Kind::ReadWrite, "rw"), (Kind::Semaphore, "semaphore"), (Kind::Election, "election")];

/// The node whose children a page of `query` reads, and the kind it reads.
pub fn dir(query: &Query) -> Result<(String, usize)> {
    let (kind, _) = position(query)?;
    let path = match parent(&query.prefix) {
        Some(parent) => parent.to_string(),
        None => format!("{ROOT}/{}", KINDS[kind].1),
    };
    Ok((path, kind))
}

/// The page the children of kind `kind`'s node make (`None`: the node does not exist).
pub fn found(query: &Query, kind: usize, children: Option<Vec<String>>) -> Result<Found> {
    let (_, after) = position(query)?;
    let exact = parent(&query.prefix);
    let mut names: Vec<String> = children
        .unwrap_or_default()
        .into_iter()
        .map(|c| match exact {
            Some("/") => format!("/{c}"),
            Some(p) => format!("{p}/{c}"),
            None => c,
        })
        .filter(|n| n.starts_with(&query.prefix) && after.as_deref().is_none_or(|a| n.as_str() > a))
        .collect();
    names.sort();
    let limit = query.limit as usize;
    let next = if names.len() > limit {
        names.truncate(limit);
        Some(format!("{kind}:{}", names[limit - 1]))
    } else if exact.is_none() && kind + 1 < KINDS.len() {
        Some(format!("{}:", kind + 1))
    } else {
        None
    };
    let kind = if exact.is_some() { Kind::Mutex } else { KINDS[kind].0 };
    Ok(Found { locks: names.into_iter().map(|n| (n, kind)).collect(), next })
}

/// The parent node of an absolute prefix (`/locks/o` → `/locks`, `/o` → `/`), `None` for a
/// plain prefix.
fn parent(prefix: &str) -> Option<&str> {
    if !prefix.starts_with('/') {
        return None;
    }
    let (parent, _) = prefix.rsplit_once('/')?;
    Some(if parent.is_empty() { "/" } else { parent })
}

/// `<kind index>:<last name listed>`; none is the first kind from its start.
fn position(query: &Query) -> Result<(usize, Option<String>)> {
    let Some(c) = &query.cursor else { return Ok((0, None)) };
    let (kind, after) = c.split_once(':').ok_or_else(bad_cursor)?;
    let kind: usize = kind.parse().map_err(|_| bad_cursor())?;
    if kind >= KINDS.len() || (parent(&query.prefix).is_some() && kind != 0) {
        return Err(bad_cursor());
    }
    Ok((kind, (!after.is_empty()).then(|| after.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kids(names: &[&str]) -> Option<Vec<String>> {
        Some(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn pages_cut_the_sorted_children_and_walk_the_kinds() {
        let q = Query::new("o", Some(2), None).unwrap();
        assert_eq!(dir(&q).unwrap(), ("/lockgate/mutex".into(), 0));
        let f = found(&q, 0, kids(&["o3", "x", "o1", "o2"])).unwrap();
        assert_eq!(f.locks, vec![("o1".into(), Kind::Mutex), ("o2".into(), Kind::Mutex)]);
        assert_eq!(f.next.as_deref(), Some("0:o2"));
        let q2 = Query::new("o", Some(2), f.next.as_deref()).unwrap();
        let f = found(&q2, 0, kids(&["o3", "x", "o1", "o2"])).unwrap();
        assert_eq!((f.locks, f.next.as_deref()), (vec![("o3".into(), Kind::Mutex)], Some("1:")));
        let q3 = Query::new("o", Some(2), Some("3:")).unwrap();
        assert_eq!(dir(&q3).unwrap(), ("/lockgate/election".into(), 3));
        assert_eq!(found(&q3, 3, None).unwrap(), Found { locks: vec![], next: None });
    }

    #[test]
    fn absolute_prefixes_list_a_parents_children_as_mutexes() {
        let q = Query::new("/locks/or", None, None).unwrap();
        assert_eq!(dir(&q).unwrap(), ("/locks".into(), 0));
        let f = found(&q, 0, kids(&["orders", "other", "jobs"])).unwrap();
        assert_eq!((f.locks, f.next), (vec![("/locks/orders".into(), Kind::Mutex)], None));
        let q = Query::new("/", None, None).unwrap();
        assert_eq!(found(&q, 0, kids(&["locks"])).unwrap().locks, vec![("/locks".into(), Kind::Mutex)]);
        for bad in ["x", "4:", "q:a"] {
            assert_eq!(dir(&Query::new("o", None, Some(bad)).unwrap()).unwrap_err().code(), "INVALID_ARGUMENT");
        }
        assert_eq!(dir(&Query::new("/l", None, Some("1:")).unwrap()).unwrap_err().code(), "INVALID_ARGUMENT");
    }
}
