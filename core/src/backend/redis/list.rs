//! Listing the locks under a name prefix on Redis (PROTOCOL.md §16): one `SCAN cursor MATCH
//! P{<prefix>* COUNT n` per page, never `KEYS`, so the server does a bounded step of work per
//! request. Each lock is found by one key of its kind that exists exactly while it is held —
//! the mutex's holder key `P{N}`, a shared primitive's `P{N}:K:holders` — so a lock shows once
//! whatever its other keys (fence, queue, waiters, info) and whichever SCAN steps return them.
//!
//! The cursor is `<scan cursor>:<skip>`: a SCAN step can return more locks than the page holds,
//! so the next page repeats that step and skips the locks already listed. SCAN's guarantee is
//! the listing's: a key present throughout is returned, one added or removed meanwhile may or
//! may not be.
//!
//! A Cluster keeps each lock's keys in one slot, so each lock on exactly one master: the
//! listing SCANs the masters one after the other, in the order of their addresses. Every page
//! first asks the driver for the masters ([`RequestKind::Masters`]), then SCANs one of them
//! ([`RequestKind::OnNode`]); its cursor is `<scan cursor>:<skip>:<master address>`. A master
//! that is gone when the next page comes (a failover, a removed node) is continued by the first
//! master whose address sorts after it, from the start of its keyspace. The SCAN step parsing is
//! shared with the Redlock backend, whose locks have a key of their own
//! (`crate::backend::redlock::list`).
use super::reply::{self, Reply};
use super::request::{Command, RequestKind};
use crate::error::{Error, ErrorKind, Result};
use crate::inspect::Kind;
use crate::listing::{bad_cursor, Found, Query};

/// The SCAN step's COUNT for a page of `limit` locks: a few keys per lock (its fence, queue and
/// waiters beside the key that finds it), so a step usually fills a page without doing more
/// than a bounded amount of work on the server.
pub fn scan_count(limit: u32) -> u32 {
    limit.saturating_mul(4).clamp(100, 4000)
}

/// The SCAN command for a page of `query` under key prefix `prefix`.
pub fn scan_command(prefix: &str, query: &Query) -> Result<Vec<Vec<u8>>> {
    let pattern = format!("{}{{{}*", glob_escape(prefix), glob_escape(&query.prefix));
    scan_matching(&pattern, query)
}

/// The SCAN command for a page of `query` (its cursor `<scan cursor>:<skip>`) over the keys
/// matching `pattern`.
pub(crate) fn scan_matching(pattern: &str, query: &Query) -> Result<Vec<Vec<u8>>> {
    let (cursor, _) = parse_cursor(query.cursor.as_deref())?;
    Ok(vec![
        b"SCAN".to_vec(),
        cursor.to_string().into_bytes(),
        b"MATCH".to_vec(),
        pattern.as_bytes().to_vec(),
        b"COUNT".to_vec(),
        scan_count(query.limit).to_string().into_bytes(),
    ])
}

/// Reads a SCAN reply for `query`: the locks of this step after the ones already listed, at
/// most `limit`, and the next position.
pub fn parse_scan(prefix: &str, query: &Query, reply: &Reply) -> Result<Found> {
    parse_scan_with(query, reply, |key| lock_of(prefix, key))
}

/// [`parse_scan`] with the lock each key finds given by `lock_of` (`None`: the key finds none).
pub(crate) fn parse_scan_with(query: &Query, reply: &Reply, lock_of: impl Fn(&str) -> Option<(String, Kind)>) -> Result<Found> {
    let (at, skip) = parse_cursor(query.cursor.as_deref())?;
    let bad = || Error::protocol(format!("SCAN returned {reply:?}"));
    if let Reply::Error(e) = reply {
        if reply::is_transient_error(e) {
            return Err(Error::new(ErrorKind::Connection, format!("SCAN was not answered: {e}")));
        }
    }
    let Reply::Array(parts) = reply else { return Err(bad()) };
    let [next, Reply::Array(keys)] = parts.as_slice() else { return Err(bad()) };
    let next: u64 = match next {
        Reply::Data(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    let mut locks: Vec<(String, Kind)> = Vec::new();
    for key in keys {
        let Reply::Data(key) = key else { return Err(bad()) };
        let Ok(key) = std::str::from_utf8(key) else { continue };
        if let Some(lock) = lock_of(key) {
            // SCAN may return a key twice (a rehash between steps): once per page.
            if lock.0.starts_with(&query.prefix) && !locks.contains(&lock) {
                locks.push(lock);
            }
        }
    }
    let limit = query.limit as usize;
    let rest: Vec<_> = locks.into_iter().skip(skip).collect();
    if rest.len() > limit {
        let page = rest.into_iter().take(limit).collect();
        return Ok(Found { locks: page, next: Some(format!("{at}:{}", skip + limit)) });
    }
    Ok(Found { locks: rest, next: (next != 0).then(|| format!("{next}:0")) })
}

/// Where a listing page is on the wire.
#[derive(Debug)]
pub(super) enum Step {
    /// A Cluster's masters were asked for (the first request of every page there).
    Masters(Query),
    /// One SCAN step, for `query` (its cursor the server's own): on the one server (`on`:
    /// `None`), or on master `on.0` of the Cluster's masters `on.1` (sorted).
    Scan { query: Query, on: Option<(String, Vec<String>)> },
}

/// What a listing needs next: another request, or nothing (the page's names are found).
pub(super) enum Progress {
    /// Send `kind`; its reply continues `step`.
    Send(RequestKind, Step),
    /// The page's names and the next page's cursor.
    Found(Found),
}

/// The first request of a page of `query`: its SCAN on a single server, the masters on a
/// Cluster (`cluster`). A cursor this backend could not have made is `INVALID_ARGUMENT`, before
/// anything is sent.
pub(super) fn start(prefix: &str, query: &Query, cluster: bool) -> Result<Progress> {
    if !cluster {
        let scan = scan_command(prefix, query)?;
        return Ok(Progress::Send(RequestKind::Pipeline(vec![Command(scan)]), Step::Scan { query: query.clone(), on: None }));
    }
    if let Some(c) = &query.cursor {
        split_cursor(c)?;
    }
    Ok(Progress::Send(RequestKind::Masters, Step::Masters(query.clone())))
}

/// Continues `step` with the reply to its request.
pub(super) fn advance(prefix: &str, step: Step, replies: Result<Vec<Reply>>) -> Result<Progress> {
    let replies = replies?;
    match step {
        Step::Masters(query) => {
            let masters = parse_masters(&replies)?;
            let Some((master, cursor)) = resume(&masters, query.cursor.as_deref())? else {
                return Ok(Progress::Found(Found::default()));
            };
            let query = Query { cursor, ..query };
            let scan = scan_command(prefix, &query)?;
            let kind = RequestKind::OnNode { node: master.clone(), commands: vec![Command(scan)] };
            Ok(Progress::Send(kind, Step::Scan { query, on: Some((master, masters)) }))
        }
        Step::Scan { query, on } => {
            let [scan] = replies.as_slice() else {
                return Err(Error::protocol(format!("expected 1 reply to SCAN, got {}", replies.len())));
            };
            let found = parse_scan(prefix, &query, scan)?;
            let Some((master, masters)) = on else { return Ok(Progress::Found(found)) };
            let next = match found.next {
                Some(c) => Some(format!("{c}:{master}")),
                None => masters.iter().find(|m| **m > master).map(|m| format!("0:0:{m}")),
            };
            Ok(Progress::Found(Found { locks: found.locks, next }))
        }
    }
}

/// The masters a [`RequestKind::Masters`] reply names, sorted, each once.
fn parse_masters(replies: &[Reply]) -> Result<Vec<String>> {
    let mut masters = replies
        .iter()
        .map(|r| match r {
            Reply::Data(a) => std::str::from_utf8(a).ok().filter(|a| !a.is_empty()).map(String::from),
            _ => None,
        })
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| Error::protocol(format!("the masters were answered as {replies:?}")))?;
    masters.sort();
    masters.dedup();
    Ok(masters)
}

/// Where a page of a Cluster listing at `cursor` goes on with `masters` (sorted): the master
/// and its own cursor (`None`: the start). A master that is gone is continued by the first one
/// after it; `None` when none is left.
fn resume(masters: &[String], cursor: Option<&str>) -> Result<Option<(String, Option<String>)>> {
    let Some(c) = cursor else { return Ok(masters.first().map(|m| (m.clone(), None))) };
    let (own, master) = split_cursor(c)?;
    if masters.iter().any(|m| m == master) {
        return Ok(Some((master.to_string(), Some(own.to_string()))));
    }
    Ok(masters.iter().find(|m| m.as_str() > master).map(|m| (m.clone(), None)))
}

/// A cursor naming a master after its own position: `<scan cursor>:<skip>:<master>` as
/// `("<scan cursor>:<skip>", "<master>")` (a Cluster's master address, a Redlock's master
/// index). `INVALID_ARGUMENT` for anything else.
pub(crate) fn split_cursor(c: &str) -> Result<(&str, &str)> {
    let mut at = c.match_indices(':').map(|(i, _)| i);
    let (Some(_), Some(cut)) = (at.next(), at.next()) else { return Err(bad_cursor()) };
    let (own, master) = (&c[..cut], &c[cut + 1..]);
    parse_cursor(Some(own))?;
    if master.is_empty() || master.chars().any(char::is_control) {
        return Err(bad_cursor());
    }
    Ok((own, master))
}

/// The lock a key finds: `P{N}` (a mutex) or `P{N}:K:holders` (a semaphore, read-write lock
/// or election); `None` for every other key.
fn lock_of(prefix: &str, key: &str) -> Option<(String, Kind)> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('{')?;
    for (suffix, kind) in [("}:sem:holders", Kind::Semaphore), ("}:rw:holders", Kind::ReadWrite), ("}:elect:holders", Kind::Election)] {
        if let Some(name) = rest.strip_suffix(suffix) {
            return Some((name.to_string(), kind));
        }
    }
    rest.strip_suffix('}').map(|name| (name.to_string(), Kind::Mutex))
}

/// `<scan cursor>:<locks of that step already listed>`; none is the first page.
fn parse_cursor(cursor: Option<&str>) -> Result<(u64, usize)> {
    let Some(c) = cursor else { return Ok((0, 0)) };
    let (at, skip) = c.split_once(':').ok_or_else(bad_cursor)?;
    Ok((at.parse().map_err(|_| bad_cursor())?, skip.parse().map_err(|_| bad_cursor())?))
}

/// `s` as a SCAN MATCH pattern that matches only itself.
pub(crate) fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Data(s.as_bytes().to_vec())
    }

    fn scan(next: &str, keys: &[&str]) -> Reply {
        Reply::Array(vec![bulk(next), Reply::Array(keys.iter().map(|k| bulk(k)).collect())])
    }

    #[test]
    fn one_key_per_lock_finds_it_with_its_kind() {
        assert_eq!(lock_of("lg:", "lg:{a}"), Some(("a".into(), Kind::Mutex)));
        assert_eq!(lock_of("lg:", "lg:{a}:fence"), None);
        assert_eq!(lock_of("lg:", "lg:{a}:queue"), None);
        assert_eq!(lock_of("lg:", "lg:{a}:sem:holders"), Some(("a".into(), Kind::Semaphore)));
        assert_eq!(lock_of("lg:", "lg:{a}:rw:info"), None);
        assert_eq!(lock_of("lg:", "lg:{a}:elect:holders"), Some(("a".into(), Kind::Election)));
        // A name with a brace and a suffix's text in it is still one mutex.
        assert_eq!(lock_of("lg:", "lg:{x}:sem:holders}"), Some(("x}:sem:holders".into(), Kind::Mutex)));
        assert_eq!(lock_of("lg:", "lg:{a}:redlock"), None);
        assert_eq!(lock_of("lg:", "other:{a}"), None);
    }

    #[test]
    fn pages_split_a_scan_step_and_resume_it() {
        let q = Query::new("o*", Some(2), None).unwrap();
        let cmd = scan_command("lg:", &q).unwrap();
        assert_eq!(cmd[3], b"lg:{o\\**".to_vec());
        let r = scan("17", &["lg:{o*1}", "lg:{o*1}:fence", "lg:{o*2}:rw:holders", "lg:{o*3}", "lg:{o*1}"]);
        let f = parse_scan("lg:", &q, &r).unwrap();
        assert_eq!(f.locks, vec![("o*1".into(), Kind::Mutex), ("o*2".into(), Kind::ReadWrite)]);
        assert_eq!(f.next.as_deref(), Some("0:2"));
        let q2 = Query::new("o*", Some(2), f.next.as_deref()).unwrap();
        assert_eq!(scan_command("lg:", &q2).unwrap()[1], b"0".to_vec());
        let f2 = parse_scan("lg:", &q2, &r).unwrap();
        assert_eq!((f2.locks, f2.next.as_deref()), (vec![("o*3".into(), Kind::Mutex)], Some("17:0")));
        let last = parse_scan("lg:", &Query::new("o*", Some(2), Some("17:0")).unwrap(), &scan("0", &[])).unwrap();
        assert_eq!(last, Found { locks: vec![], next: None });
    }

    #[test]
    fn bad_cursors_and_replies_are_typed_errors() {
        for c in ["x", "1", "1:x", "-1:0"] {
            assert_eq!(scan_command("lg:", &Query::new("", None, Some(c)).unwrap()).unwrap_err().code(), "INVALID_ARGUMENT");
        }
        let q = Query::new("", None, None).unwrap();
        assert_eq!(parse_scan("lg:", &q, &Reply::Int(1)).unwrap_err().code(), "PROTOCOL");
        assert_eq!(parse_scan("lg:", &q, &Reply::Array(vec![Reply::Int(0), Reply::Array(vec![])])).unwrap_err().code(), "PROTOCOL");
    }
}
