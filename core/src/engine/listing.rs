//! Listing locks, written once for every backend (see `crate::listing`): the backend answers
//! one request per page with the names under the prefix; the engine inspects each (§14's read,
//! all at once) and completes the page with the names someone holds or waits on, in the
//! backend's order, and the backend's cursor.

use std::collections::HashMap;
use std::sync::Arc;

use super::backend::{Action, Backend, Ctx, Purpose};
use super::ids::OpId;
use super::io::Done;
use super::{LockEngine, Read};
use crate::error::{Error, ErrorKind, Result};
use crate::inspect::Snapshot;
use crate::listing::{Entry, Found, Page, Query};
use crate::options::{self, LockOptions};
use crate::time::Instant;

/// The listings in progress.
#[derive(Default)]
pub(super) struct Listings {
    /// Pages waiting for the session, where every request needs it.
    pub(super) waiting: Vec<(OpId, Query)>,
    /// Pages whose names are being inspected.
    pages: HashMap<OpId, Building>,
    /// Each inspect of a listed name: its page and its place in it.
    parts: HashMap<OpId, (OpId, usize)>,
}

/// A page whose names are being inspected.
struct Building {
    names: Vec<(String, Option<Entry>)>,
    left: usize,
    next: Option<String>,
    failed: Option<Error>,
}

impl Listings {
    /// Whether nothing is in progress.
    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.pages.is_empty()
    }

    /// Whether `op` is the inspect of a listed name.
    pub(super) fn is_part(&self, op: OpId) -> bool {
        self.parts.contains_key(&op)
    }
}

impl<B: Backend> LockEngine<B> {
    /// Lists one page of the locks whose names start with `prefix` (every name if empty):
    /// at most `limit` entries (default `DEFAULT_PAGE`, capped to `MAX_PAGE`), each a lock
    /// someone holds or waits on with its kind, holder and waiter counts and first holder's
    /// label; `cursor` is the previous page's. Completes with a listed outcome. Changes
    /// nothing and never blocks the server (PROTOCOL.md §16); racy by nature, like inspect.
    pub fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId> {
        let query = Query::new(prefix, limit, cursor)?;
        self.backend.check_list()?;
        self.backend.check_inspect()?;
        let op = OpId(self.ids.fresh());
        if self.waits_for_session(now) {
            self.listings.waiting.push((op, query));
        } else {
            self.send_list(now, op, &query);
        }
        self.flush(now);
        Ok(op)
    }

    pub(super) fn send_list(&mut self, now: Instant, op: OpId, query: &Query) {
        self.backend.call(ctx!(self, now), Purpose::List(op), Action::List { query }, &mut self.settled_now);
    }

    /// The backend answered page `op`'s names: inspect each (a name the backend's target
    /// refuses is not one a client could lock, and is left out).
    pub(super) fn on_listed(&mut self, now: Instant, op: OpId, found: Result<Found>) {
        let found = match found {
            Ok(f) => f,
            Err(e) => return self.complete(op, Done::Failed(e)),
        };
        let read = LockOptions { lease: options::MIN_LEASE, ..LockOptions::default() };
        let mut parts = Vec::new();
        let mut names = Vec::new();
        for (name, kind) in found.locks {
            if options::validate_name(&name).is_err() {
                continue;
            }
            let Ok(target) = self.backend.target(&name, &kind.primitive(), &read) else { continue };
            parts.push((OpId(self.ids.fresh()), names.len(), Arc::new(target), kind));
            names.push((name, None));
        }
        if parts.is_empty() {
            return self.complete(op, Done::Listed(Page { entries: Vec::new(), cursor: found.next }));
        }
        self.listings.pages.insert(op, Building { left: parts.len(), names, next: found.next, failed: None });
        for (part, at, target, kind) in parts {
            self.listings.parts.insert(part, (op, at));
            self.send_read(now, part, &target, Read::Inspect(kind));
        }
    }

    /// One listed name was inspected; the page completes with its last.
    pub(super) fn on_list_part(&mut self, part: OpId, snapshot: Result<Snapshot>) {
        let Some((op, at)) = self.listings.parts.remove(&part) else { return };
        let Some(page) = self.listings.pages.get_mut(&op) else { return };
        match snapshot {
            Ok(s) => {
                let name = std::mem::take(&mut page.names[at].0);
                page.names[at].1 = Entry::of(name, &s);
            }
            Err(e) => {
                page.failed.get_or_insert(e);
            }
        }
        page.left -= 1;
        if page.left > 0 {
            return;
        }
        let page = self.listings.pages.remove(&op).expect("present above");
        let done = match page.failed {
            Some(e) => Done::Failed(e),
            None => Done::Listed(Page { entries: page.names.into_iter().filter_map(|(_, e)| e).collect(), cursor: page.next }),
        };
        self.complete(op, done);
    }

    /// Ends every listing waiting for the session with `error` (shutdown, a refused session).
    pub(super) fn fail_waiting_lists(&mut self, error: &Error) {
        for (op, _) in std::mem::take(&mut self.listings.waiting) {
            self.complete(op, Done::Failed(error.clone()));
        }
    }

    /// Sends the listings that waited for the session.
    pub(super) fn send_waiting_lists(&mut self, now: Instant) {
        for (op, query) in std::mem::take(&mut self.listings.waiting) {
            self.send_list(now, op, &query);
        }
    }
}

/// The error a listing ends with when the client shuts down before it was sent.
pub(super) fn shutting_down() -> Error {
    Error::new(ErrorKind::Cancelled, "the client is shutting down")
}
