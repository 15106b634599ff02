//! Listing a Redlock's locks under a name prefix (PROTOCOL.md §16). A lock's key
//! `P{N}:redlock` is on several masters, and counts as held where a majority holds one owner
//! value (the inspect rule, `inspect.rs`): so every held lock is on at least one of the first
//! `masters − quorum + 1` masters, and the listing SCANs those, one after the other, with the
//! single server's SCAN paging (`crate::backend::redis::list`). A page is one SCAN step on one
//! master, then one `MGET` of the names it found on every master; a name is kept on the page of
//! the first master that holds its value, so a lock shows once however many masters hold it.
//! The engine then inspects each kept name and lists the held ones, exactly as on one server.
//!
//! The cursor is `<scan cursor>:<skip>:<master index>`: the position within the master being
//! scanned, then which one.

use std::collections::HashMap;

use super::{scripts, RedlockBackend};
use crate::backend::redis::list::{glob_escape, parse_scan_with, scan_matching, split_cursor};
use crate::backend::redis::reply::{self, Reply};
use crate::backend::redis::Command;
use crate::engine::{Answer, Ctx, Purpose, RequestId, Verdict};
use crate::error::{Error, ErrorKind, Result};
use crate::inspect::Kind;
use crate::listing::{bad_cursor, Found, Query};
use crate::time::Instant;

use super::NodeRequest;

/// The listing pages in progress and their requests.
#[derive(Default)]
pub(super) struct Listings {
    pages: HashMap<u64, Page>,
    /// Each request's page, and the master of its `MGET` (`None`: the page's SCAN).
    requests: HashMap<RequestId, (u64, Option<usize>)>,
}

impl Listings {
    /// Whether no listing request is on the wire.
    pub(super) fn is_idle(&self) -> bool {
        self.requests.is_empty()
    }

    /// Whether request `id` is a listing's.
    pub(super) fn is_listing(&self, id: RequestId) -> bool {
        self.requests.contains_key(&id)
    }
}

/// One page: its SCAN on one master, then its `MGET` on every master.
struct Page {
    purpose: Purpose,
    sent: Instant,
    /// The page's query, its cursor the scanned master's own.
    query: Query,
    /// The master scanned.
    master: usize,
    /// What the SCAN found: the names, and the cursor of the next page.
    found: Found,
    /// Each master's owner value of every found name (`None`: not answered yet).
    values: Vec<Option<Result<Vec<Option<String>>>>>,
}

/// How many masters a listing scans: every set of `quorum` masters has one among the first
/// `masters − quorum + 1`.
fn scanned(masters: usize, quorum: usize) -> usize {
    masters + 1 - quorum
}

/// The master a cursor names and that master's own cursor (`None` for the first page);
/// `INVALID_ARGUMENT` for a cursor no listing of `scanned` masters returns.
fn parse_cursor(cursor: Option<&str>, scanned: usize) -> Result<(usize, Option<String>)> {
    let Some(c) = cursor else { return Ok((0, None)) };
    let (own, master) = split_cursor(c)?;
    match master.parse::<usize>() {
        Ok(m) if m < scanned && master == m.to_string() => Ok((m, Some(own.to_string()))),
        _ => Err(bad_cursor()),
    }
}

/// The lock a key of a Redlock finds: `P{N}:redlock`, a mutex (its label key finds none).
fn lock_of(prefix: &str, key: &str) -> Option<(String, Kind)> {
    let name = key.strip_prefix(prefix)?.strip_prefix('{')?.strip_suffix("}:redlock")?;
    Some((name.to_string(), Kind::Mutex))
}

/// One master's `MGET` reply: the owner value of each of `count` names, `None` where absent.
fn parse_values(reply: Reply, count: usize) -> Result<Vec<Option<String>>> {
    let bad = || Error::protocol("MGET returned an unexpected reply");
    match reply {
        Reply::Error(e) if reply::is_transient_error(&e) => Err(Error::new(ErrorKind::Connection, format!("MGET was not answered: {e}"))),
        Reply::Array(items) if items.len() == count => items
            .into_iter()
            .map(|v| match v {
                Reply::Nil => Ok(None),
                Reply::Data(d) => String::from_utf8(d).map(Some).map_err(|_| bad()),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// The names of `page` to keep: those whose value on the scanned master is on no master before
/// it, and on enough masters (counting those that did not answer) to be a majority's. Every
/// master up to the scanned one must have answered: else a name could show twice or never.
fn kept(page: &Page, quorum: usize) -> Result<Vec<(String, Kind)>> {
    let answered: Vec<Option<&Vec<Option<String>>>> = page.values.iter().map(|v| v.as_ref().and_then(|r| r.as_ref().ok())).collect();
    if let Some(j) = (0..=page.master).find(|j| answered[*j].is_none()) {
        let why = match &page.values[j] {
            Some(Err(e)) => e.message().to_string(),
            _ => "no answer".into(),
        };
        return Err(Error::new(ErrorKind::Connection, format!("master {j} did not answer the listing's read ({why}); list again from the same cursor")));
    }
    let unanswered = answered.iter().filter(|a| a.is_none()).count();
    let mut locks = Vec::new();
    for (i, lock) in page.found.locks.iter().enumerate() {
        let value_on = |m: usize| answered[m].and_then(|values| values[i].as_deref());
        let Some(value) = value_on(page.master) else { continue };
        if (0..page.master).any(|j| value_on(j) == Some(value)) {
            continue;
        }
        let holding = (0..answered.len()).filter(|m| value_on(*m) == Some(value)).count();
        if holding + unanswered >= quorum {
            locks.push(lock.clone());
        }
    }
    Ok(locks)
}

impl RedlockBackend {
    /// Starts a listing page: the SCAN step on the master its cursor names.
    pub(super) fn list(&mut self, ctx: &mut Ctx<'_, NodeRequest>, purpose: Purpose, query: &Query, answers: &mut Vec<Answer>) {
        let scanned = scanned(self.config.masters, self.quorum);
        let prefix = &self.config.key_prefix;
        let command = parse_cursor(query.cursor.as_deref(), scanned).and_then(|(master, cursor)| {
            let query = Query { cursor, ..query.clone() };
            let pattern = format!("{}{{{}*}}:redlock", glob_escape(prefix), glob_escape(&query.prefix));
            Ok((master, scan_matching(&pattern, &query)?, query))
        });
        let (master, command, query) = match command {
            Ok(c) => c,
            Err(e) => return answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Listed(Err(e)) }),
        };
        let page_id = ctx.ids.fresh();
        let page = Page { purpose, sent: ctx.now, query, master, found: Found::default(), values: Vec::new() };
        self.listings.pages.insert(page_id, page);
        self.send_list(ctx, page_id, None, master, Command(command));
    }

    fn send_list(&mut self, ctx: &mut Ctx<'_, NodeRequest>, page: u64, of: Option<usize>, master: usize, command: Command) {
        let id = ctx.ids.request();
        self.listings.requests.insert(id, (page, of));
        ctx.out.push_back(NodeRequest { id, master, command });
    }

    /// Handles the reply to a listing's request `id`.
    pub(super) fn on_list_reply(&mut self, ctx: &mut Ctx<'_, NodeRequest>, id: RequestId, reply: Result<Reply>, answers: &mut Vec<Answer>) {
        let Some((page_id, of)) = self.listings.requests.remove(&id) else { return };
        let (masters, quorum, prefix) = (self.config.masters, self.quorum, self.config.key_prefix.as_str());
        let Some(page) = self.listings.pages.get_mut(&page_id) else { return };
        let mut mget = None;
        let finished = match of {
            None => match reply.and_then(|r| parse_scan_with(&page.query, &r, |key| lock_of(prefix, key))) {
                Err(e) => Some(Err(e)),
                Ok(found) => {
                    let next = match found.next {
                        Some(c) => Some(format!("{c}:{}", page.master)),
                        None => (page.master + 1 < scanned(masters, quorum)).then(|| format!("0:0:{}", page.master + 1)),
                    };
                    page.found = Found { locks: found.locks, next };
                    if page.found.locks.is_empty() {
                        Some(Ok(std::mem::take(&mut page.found)))
                    } else {
                        let mut keys = vec![b"MGET".to_vec()];
                        keys.extend(page.found.locks.iter().map(|(name, _)| scripts::key(prefix, name).into_bytes()));
                        page.values = vec![None; masters];
                        mget = Some(Command(keys));
                        None
                    }
                }
            },
            Some(master) => {
                page.values[master] = Some(reply.and_then(|r| parse_values(r, page.found.locks.len())));
                if page.values.iter().all(Option::is_some) {
                    Some(kept(page, quorum).map(|locks| Found { locks, next: page.found.next.clone() }))
                } else {
                    None
                }
            }
        };
        if let Some(command) = mget {
            for master in 0..masters {
                self.send_list(ctx, page_id, Some(master), master, command.clone());
            }
        }
        if let Some(found) = finished {
            let page = self.listings.pages.remove(&page_id).expect("present above");
            answers.push(Answer { purpose: page.purpose, sent: page.sent, verdict: Verdict::Listed(found) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(master: usize, names: &[&str], values: Vec<Option<Result<Vec<Option<String>>>>>) -> Page {
        Page {
            purpose: Purpose::List(crate::engine::OpId(1)),
            sent: Instant::from_millis_f64(0.0),
            query: Query::new("", None, None).unwrap(),
            master,
            found: Found { locks: names.iter().map(|n| (n.to_string(), Kind::Mutex)).collect(), next: None },
            values,
        }
    }

    fn on(values: &[Option<&str>]) -> Option<Result<Vec<Option<String>>>> {
        Some(Ok(values.iter().map(|v| v.map(String::from)).collect()))
    }

    #[test]
    fn cursors_name_a_scanned_master_or_are_refused() {
        assert_eq!(scanned(3, 2), 2);
        assert_eq!(scanned(5, 3), 3);
        assert_eq!(parse_cursor(None, 2).unwrap(), (0, None));
        assert_eq!(parse_cursor(Some("17:2:1"), 2).unwrap(), (1, Some("17:2".into())));
        for bad in ["17:2", "17:2:2", "17:2:x", "17:2:01", "x:0:0", "1:0:-1", "1:0:", ":0:0"] {
            assert_eq!(parse_cursor(Some(bad), 2).unwrap_err().code(), "INVALID_ARGUMENT", "{bad}");
        }
    }

    #[test]
    fn a_lock_is_kept_on_the_first_master_holding_its_majority_value() {
        // "a" held on masters 0 and 1: listed with master 0, not again with master 1.
        // "b" held on 1 and 2: listed with master 1. "c": a minority's key on 1 only.
        let values = || vec![on(&[Some("x:3"), None, None]), on(&[Some("x:3"), Some("y:3"), Some("z:3")]), on(&[None, Some("y:3"), None])];
        let names = ["a", "b", "c"];
        assert_eq!(kept(&page(1, &names, values()), 2).unwrap(), vec![("b".to_string(), Kind::Mutex)]);
        let first = kept(&page(0, &names, values()), 2).unwrap();
        assert_eq!(first, vec![("a".to_string(), Kind::Mutex)]);
        // A silent later master may hold the rest of a majority: kept for inspect to decide.
        let values = vec![on(&[Some("x:3")]), on(&[None]), Some(Err(Error::new(ErrorKind::Connection, "down")))];
        assert_eq!(kept(&page(0, &["a"], values), 2).unwrap().len(), 1);
        // A silent earlier master: the page cannot tell where a lock was listed.
        let values = vec![Some(Err(Error::new(ErrorKind::Connection, "down"))), on(&[Some("x:3")]), on(&[Some("x:3")])];
        assert_eq!(kept(&page(1, &["a"], values), 2).unwrap_err().code(), "CONNECTION");
    }

    #[test]
    fn keys_and_replies_are_read_strictly() {
        assert_eq!(lock_of("lg:", "lg:{a}:redlock"), Some(("a".into(), Kind::Mutex)));
        assert_eq!(lock_of("lg:", "lg:{a}:redlock:label"), None);
        assert_eq!(lock_of("lg:", "lg:{a}"), None);
        assert_eq!(parse_values(Reply::Array(vec![Reply::Nil, Reply::Data(b"v".to_vec())]), 2).unwrap(), vec![None, Some("v".into())]);
        assert_eq!(parse_values(Reply::Array(vec![Reply::Nil]), 2).unwrap_err().code(), "PROTOCOL");
        assert_eq!(parse_values(Reply::Error("LOADING".into()), 1).unwrap_err().code(), "CONNECTION");
    }
}
