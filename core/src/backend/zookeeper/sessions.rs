//! Sessions sized from the lock (PROTOCOL.md §9): a ZooKeeper node lives as long as the session
//! that created it, so the nodes of a lock whose lease is shorter than the client's own session
//! live in an **extra session** of the client whose timeout is asked from that lease (rounded
//! down to 100 ms): a crashed holder's nodes then go within its lease, as a Redis key's would,
//! not only when the client's own session expires.
//!
//! Extra sessions are keyed by the timeout asked. One opens when the first attempt of a token
//! placed there needs it (a step of that attempt), serves every token of the client placed
//! there, and is closed once no token lives there any more. A lease counts from its own
//! session's confirmations, for half of that session's negotiated timeout
//! ([`Backend::confirmation_span`](crate::engine::Backend::confirmation_span) per token). An
//! extra session that expires loses the holds in it (each revoked) and re-queues its waiters;
//! the client's own session ending ends every extra one too (the engine loses every lease).

use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::session_state::{Extra, SessionInfo};
use super::request::{ZkOp, ZkRequest};
use crate::engine::{Answer, Ctx, OpId, Purpose, Verdict};
use crate::time::{Duration, Instant};

/// Extra sessions are asked for in steps of this much (leases are rounded down to it), so
/// locks of nearly the same lease share one session.
pub(super) const EXTRA_STEP_MS: u64 = 100;

/// The extra session a lease of `lease` lives in, for a client whose own session's timeout is
/// `own`: `None` (the client's own session) unless the lease is shorter than it.
pub(super) fn extra_for(lease: Duration, own: Duration) -> Option<Duration> {
    if lease.is_zero() || lease >= own {
        return None;
    }
    let ms = (lease.as_millis() as u64 / EXTRA_STEP_MS).max(1) * EXTRA_STEP_MS;
    Some(Duration::from_millis(ms))
}

impl ZooKeeperBackend {
    /// The extra session `token`'s nodes live in, if any.
    pub(super) fn key_of(&self, token: &str) -> Option<Duration> {
        self.placed.get(token).copied()
    }

    /// The session (id, negotiated timeout) `token`'s nodes live in, if open.
    pub(super) fn session_of(&self, token: &str) -> Option<SessionInfo> {
        match self.key_of(token) {
            None => self.session,
            Some(k) => self.extras.get(&k).and_then(|e| e.session),
        }
    }

    /// The epoch of the session `token`'s nodes live in.
    pub(super) fn epoch_of(&self, token: &str) -> u64 {
        match self.key_of(token) {
            None => self.epoch,
            Some(k) => self.extras.get(&k).map_or(self.epoch, |e| e.epoch),
        }
    }

    /// The latest confirmation of the session `token`'s nodes live in.
    pub(super) fn confirmed_of(&self, token: &str) -> Option<Instant> {
        match self.key_of(token) {
            None => self.confirmed,
            Some(k) => self.extras.get(&k).and_then(|e| e.confirmed),
        }
    }

    /// The timeout validity of `token`'s lease is counted from: its session's negotiated one
    /// (or the one asked, before it opened).
    pub(super) fn timeout_of(&self, token: &str) -> Duration {
        match self.key_of(token) {
            None => self.session_timeout(),
            Some(k) => self.extras.get(&k).and_then(|e| e.session).map_or(k, |s| s.timeout),
        }
    }

    /// Notes that the leader answered a request of `token`'s session sent at `sent`.
    pub(super) fn confirm_of(&mut self, token: &str, sent: Instant) {
        match self.key_of(token) {
            None => self.confirm(sent),
            Some(k) => {
                if let Some(e) = self.extras.get_mut(&k) {
                    e.confirmed = Some(e.confirmed.map_or(sent, |c| c.max(sent)));
                }
            }
        }
    }

    /// The request performing `op` in `token`'s session.
    pub(super) fn request_of(&self, token: &str, id: crate::engine::RequestId, op: ZkOp) -> ZkRequest {
        ZkRequest { id, op, session: self.key_of(token) }
    }

    /// Places a token that has no node yet in the session its lease asks for (an extra one if
    /// the lease is shorter than the client's own session's negotiated timeout). A token with
    /// nodes stays where they are.
    pub(super) fn place(&mut self, token: &Arc<str>, lease: Duration) {
        let has_nodes = self.owned.get(token).is_some_and(|o| o.node != Default::default() || o.lease != Default::default());
        if has_nodes || self.placed.contains_key(token) || !self.config.extra_sessions {
            return;
        }
        if let Some(k) = extra_for(lease, self.session_timeout()) {
            self.placed.insert(Arc::clone(token), k);
            self.extras.entry(k).or_default();
        }
    }

    /// The reply opening extra session `key` (session `id`, negotiated `timeout`): returns the
    /// session's epoch. Another session than the one known means the known one ended unseen:
    /// it is ended first, as its expiry would.
    pub(super) fn extra_opened(&mut self, key: Duration, id: i64, timeout: Duration, now: Instant, answers: &mut Vec<Answer>) -> u64 {
        if let Some(e) = self.extras.get(&key) {
            match e.session {
                // The same session again (a second attempt asked while it lived).
                Some(s) if s.id == id => return e.epoch,
                Some(_) => {
                    self.end_extra(key, now, answers);
                }
                None => {}
            }
        }
        self.epoch += 1;
        let fresh = self.epoch;
        self.extras.insert(key, Extra { session: Some(SessionInfo { id, timeout }), epoch: fresh, confirmed: None });
        fresh
    }

    /// Forgets `token`'s placement once its nodes are gone, and closes its extra session if no
    /// other token lives there.
    pub(super) fn unplace(&mut self, token: &str) {
        self.held.remove(token);
        let Some(k) = self.placed.remove(token) else { return };
        if !self.placed.values().any(|p| *p == k) && self.extras.remove(&k).is_some_and(|e| e.session.is_some()) {
            self.closing.push(k);
        }
    }

    /// Sends the closes of extra sessions no token lives in any more.
    pub(super) fn close_idle(&mut self, ctx: &mut Ctx<'_, ZkRequest>) {
        for k in std::mem::take(&mut self.closing) {
            // Reopened meanwhile by a new token: keep it.
            if self.placed.values().any(|p| *p == k) {
                continue;
            }
            let id = ctx.ids.request();
            ctx.out.push_back(ZkRequest { id, op: ZkOp::CloseSession, session: Some(k) });
        }
    }

    /// Extra session `key` ended (expired, or its client gave it up): every hold in it is
    /// revoked (its nodes are gone), its known nodes are deleted through the client's own
    /// session (the server may keep a session its client gave up), and its waiters are
    /// re-checked (returned), to queue again in a new session.
    pub(super) fn end_extra(&mut self, key: Duration, now: Instant, answers: &mut Vec<Answer>) -> Vec<String> {
        let Some(e) = self.extras.get_mut(&key) else { return Vec::new() };
        if e.session.is_none() {
            return Vec::new();
        }
        self.epoch += 1;
        *e = Extra { session: None, epoch: self.epoch, confirmed: None };
        let tokens: Vec<Arc<str>> = self.placed.iter().filter(|(_, k)| **k == key).map(|(t, _)| Arc::clone(t)).collect();
        let mut waiters = Vec::new();
        let mut revoked: Vec<OpId> = Vec::new();
        for token in tokens {
            if let Some(owned) = self.owned.remove(&token) {
                self.stale.extend([owned.node.path(), owned.lease.path()].into_iter().flatten().map(str::to_string));
            }
            self.unwatch(&token);
            match self.held.remove(&token) {
                Some(op) => revoked.push(op),
                None => waiters.push(token.to_string()),
            }
        }
        revoked.sort();
        for op in revoked {
            let why = format!("the lock's ZooKeeper session (asked for {key:?}, its lease) expired");
            answers.push(Answer { purpose: Purpose::Acquire(op), sent: now, verdict: Verdict::Revoked(why) });
        }
        waiters.sort();
        self.requeue.extend(waiters.iter().cloned());
        waiters
    }

    /// Every extra session ends with the client's own (the engine loses every lease): forget
    /// them, closing those still open.
    pub(super) fn end_extras(&mut self) {
        for (k, e) in self.extras.drain() {
            if e.session.is_some() {
                self.closing.push(k);
            }
        }
        self.placed.clear();
        self.held.clear();
    }

    /// A reply in `token`'s session said it expired.
    pub(super) fn end_by_reply(&mut self, token: &str, now: Instant, answers: &mut Vec<Answer>) {
        match self.key_of(token) {
            None => self.end_session_by_reply(),
            Some(k) => {
                self.end_extra(k, now, answers);
            }
        }
    }

    /// The extra sessions: (asked, negotiated) of each open one (for tests and tools).
    pub fn extra_sessions(&self) -> Vec<(Duration, Duration)> {
        let mut v: Vec<_> = self.extras.iter().filter_map(|(k, e)| e.session.map(|s| (*k, s.timeout))).collect();
        v.sort();
        v
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_shorter_than_the_session_get_their_own() {
        let own = Duration::from_secs(30);
        assert_eq!(extra_for(Duration::from_secs(30), own), None);
        assert_eq!(extra_for(Duration::from_secs(60), own), None);
        assert_eq!(extra_for(Duration::from_millis(2_000), own), Some(Duration::from_millis(2_000)));
        assert_eq!(extra_for(Duration::from_millis(2_099), own), Some(Duration::from_millis(2_000)));
        assert_eq!(extra_for(Duration::from_millis(10), own), Some(Duration::from_millis(100)));
        assert_eq!(extra_for(Duration::ZERO, own), None);
    }
}
