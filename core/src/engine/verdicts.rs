//! What each settled call does to the engine's state: an attempt granted, queued, refused or
//! failed; a renewal or extend confirmed or refused; a release done or left unconfirmed; and
//! the consequences written once for every backend (retry with backoff, undo of abandoned
//! attempts, loss with cleanup, reentrant holds counted in `lease.rs`).

use std::sync::Arc;

use super::backend::{Action, Answer, Attempt, Backend, Ctx, Renewal, Purpose, Release, Verdict};
use super::cleanup::Cleanup;
use super::ids::{LeaseId, OpId};
use super::io::{Done, Event, Wait};
use super::lease::{Granted, Lease};
use super::operation::{AcquireState, PendingAcquire, FIRST_BACKOFF, MAX_BACKOFF};
use super::telemetry::{Happened, LossReason};
use super::{not_held, Due, LockEngine};
use crate::error::{Error, ErrorKind};
use crate::options::whole_millis;
use crate::time::{Duration, Instant};

impl<B: Backend> LockEngine<B> {
    pub(super) fn dispatch(&mut self, now: Instant, answer: Answer) {
        let Answer { purpose, sent, verdict } = answer;
        match (purpose, verdict) {
            (Purpose::Acquire(op), Verdict::Revoked(why)) => self.lose(now, LeaseId(op.0), LossReason::Revoked, &why),
            (Purpose::Acquire(op), Verdict::Attempt(a)) => self.on_attempt(now, sent, op, a),
            (Purpose::Renew(id, tag), Verdict::Renewal(p)) => self.on_renewal(now, sent, id, tag, p),
            (Purpose::Extend(op, _, d, _), Verdict::Renewal(p)) if self.is_adopt(op) => self.on_adopted(now, sent, op, d, p),
            (Purpose::Extend(op, id, d, tag), Verdict::Renewal(p)) => self.on_extend(now, sent, op, id, d, tag, p),
            (Purpose::Release(op, id), Verdict::Release(r)) => self.on_release(now, op, id, r),
            (Purpose::Cleanup(id), Verdict::Release(r)) => self.on_cleanup(now, id, r),
            (Purpose::Observe(op), Verdict::Observed(r)) => {
                let done = match r {
                    Ok(leader) => Done::Observed(leader),
                    Err(e) => Done::Failed(e),
                };
                self.complete(op, done);
            }
            (Purpose::Inspect(op), Verdict::Inspected(r)) if self.is_break(op) => self.on_break_read(now, op, r),
            (Purpose::Break(op), Verdict::Release(r)) => self.on_break_removed(op, r),
            (Purpose::Inspect(op), Verdict::Inspected(r)) if self.listings.is_part(op) => self.on_list_part(op, r),
            (Purpose::List(op), Verdict::Listed(r)) => self.on_listed(now, op, r),
            (Purpose::Inspect(op), Verdict::Inspected(r)) => {
                let done = match r {
                    Ok(mut snapshot) => {
                        snapshot.settle(|token| self.own_holds(token));
                        Done::Inspected(snapshot)
                    }
                    Err(e) => Done::Failed(e),
                };
                self.complete(op, done);
            }
            (purpose, verdict) => {
                // A backend answered a call with the wrong kind of verdict: a bug in the
                // backend, reported on the operation rather than by a panic.
                let e = Error::protocol(format!("the backend answered {purpose:?} with {verdict:?}"));
                match purpose {
                    Purpose::Acquire(op)
                    | Purpose::Extend(op, ..)
                    | Purpose::Release(op, _)
                    | Purpose::Observe(op)
                    | Purpose::Inspect(op)
                    | Purpose::Break(op)
                    | Purpose::List(op) => {
                        self.breaks.remove(&op);
                        self.adopts.remove(&op);
                        match self.take_acquire(op) {
                            Some(a) => self.end_acquire(now, op, a, Done::Failed(e)),
                            None => self.complete(op, Done::Failed(e)),
                        }
                    }
                    Purpose::Renew(id, _) => self.lose(now, id, LossReason::Failed, e.message()),
                    Purpose::Cleanup(id) => {
                        for op in self.cleanups.remove(&id).into_iter().flat_map(Cleanup::waiting) {
                            self.answer_held(op);
                        }
                        self.sync_cleanup(id);
                    }
                }
            }
        }
    }

    pub(super) fn on_attempt(&mut self, now: Instant, sent: Instant, op: OpId, verdict: Attempt) {
        let Some(mut a) = self.take_acquire(op) else {
            // Abandoned (cancelled or timed out) while this was on the wire: undo whatever it
            // did, and tell its caller once that is done. An acquire granted by a wake-up
            // meanwhile is no orphan: nothing to do.
            match self.orphans.remove(&op) {
                Some(a) => {
                    let span = a.undo_span();
                    let id = self.add_cleanup(now, a.target, a.token, span);
                    self.answer_after(id, op);
                }
                None => self.answer_held(op),
            }
            return;
        };
        let once = a.wait == Wait::Try;
        // The server answered (or not): what a deadline reached now would report.
        a.unreachable = match &verdict {
            Attempt::Transient { error, .. } if error.kind() == ErrorKind::Connection => Some(error.clone()),
            _ => None,
        };
        match verdict {
            Attempt::Granted { fence, granted } => self.grant(now, op, a, fence, sent, granted),
            Attempt::Queued { holder_remaining, fence } => {
                if once {
                    // A one-shot attempt leaves nothing queued (see `Attempt::Queued`).
                    self.complete(op, Done::NotAcquired);
                    return;
                }
                self.telemetry.queued(op);
                a.grant_lower_bound = Some(sent);
                a.seen_fence = a.seen_fence.max(fence);
                a.backoff = FIRST_BACKOFF;
                let mut wait = a.recheck_interval();
                if std::mem::take(&mut a.recheck_soon) {
                    wait = Duration::ZERO;
                }
                if let Some(p) = holder_remaining {
                    // Re-check right after the holder's lease ends, so a holder that crashed
                    // (and never released) cannot stall us past its lease.
                    wait = wait.min(p + Duration::from_millis(1));
                }
                a.state = AcquireState::Queued { recheck_at: now + wait };
                self.waiting_tokens.insert(Arc::clone(&a.token), op);
                self.put_acquire(op, a);
            }
            Attempt::Refused { why } => {
                let id = self.undo(now, &mut a);
                if once {
                    // Told once what the attempt set is removed.
                    self.hold_back(now, op, Done::NotAcquired);
                    self.answer_after(id, op);
                    return;
                }
                self.telemetry.queued(op);
                self.retry(now, op, a, Some(why));
            }
            Attempt::Transient { error, why, undo } => {
                if once {
                    let id = self.undo(now, &mut a);
                    self.hold_back(now, op, Done::Failed(error));
                    self.answer_after(id, op);
                    return;
                }
                if undo {
                    self.undo(now, &mut a);
                }
                self.retry(now, op, a, why);
            }
            Attempt::Failed { error, undo } => {
                match undo {
                    true => {
                        let id = self.undo(now, &mut a);
                        self.hold_back(now, op, Done::Failed(error));
                        self.answer_after(id, op);
                    }
                    false => self.complete(op, Done::Failed(error)),
                }
            }
        }
    }

    /// Schedules the next attempt of `a` after the backend's retry delay.
    pub(super) fn retry(&mut self, now: Instant, op: OpId, mut a: PendingAcquire<B::Target>, why: Option<String>) {
        let delay = self.backend.retry_delay(&mut a.backoff, self.rng.as_mut());
        a.state = AcquireState::RetryAt(now + delay);
        if why.is_some() {
            a.last_failure = why;
        }
        self.waiting_tokens.insert(Arc::clone(&a.token), op);
        self.put_acquire(op, a);
    }

    /// Removes whatever `a`'s attempts may have left on the server; the cleanup's id.
    pub(super) fn undo(&mut self, now: Instant, a: &mut PendingAcquire<B::Target>) -> u64 {
        a.dirty = false;
        self.add_cleanup(now, Arc::clone(&a.target), Arc::clone(&a.token), a.undo_span())
    }

    /// Ends acquire `op` with `done` once what its attempts may have left on the server is
    /// removed (or right away if nothing can be left): its caller never sees the call return
    /// while its queue entry is still there for others to read and wait behind.
    pub(super) fn end_acquire(&mut self, now: Instant, op: OpId, a: PendingAcquire<B::Target>, done: Done) {
        match self.abandon(now, op, a) {
            Undo::Nothing => self.complete(op, done),
            Undo::Orphan => self.hold_back(now, op, done),
            Undo::Cleanup(id) => {
                self.hold_back(now, op, done);
                self.answer_after(id, op);
            }
        }
    }

    /// Keeps `op`'s completion until its undo answers, [`UNDO_WAIT`](super::UNDO_WAIT) at most.
    pub(super) fn hold_back(&mut self, now: Instant, op: OpId, done: Done) {
        self.held_back.insert(op, done);
        self.timers.set(Due::Answer(op), Some(now + super::UNDO_WAIT));
    }

    /// Tells `op`'s caller once cleanup `id` has answered.
    pub(super) fn answer_after(&mut self, id: u64, op: OpId) {
        match self.cleanups.get_mut(&id) {
            Some(c) if self.held_back.contains_key(&op) => c.answers.push(op),
            // Answered already (a backend that settles without a request): nothing to wait for.
            _ => self.answer_held(op),
        }
    }

    /// Delivers `op`'s held-back completion, if it is still held back.
    pub(super) fn answer_held(&mut self, op: OpId) {
        if let Some(done) = self.held_back.remove(&op) {
            self.timers.cancel(Due::Answer(op));
            self.complete(op, done);
        }
    }

    /// Records a grant. `since` is the earliest instant the server lease can have started and
    /// `granted` its length; a grant shorter than the requested lease (a handoff) is extended
    /// to the full lease a third of the way into it, like a watchdog renewal. `now` (the
    /// grant's arrival, after the grant on the server) starts the shortest hold; `since` the
    /// longest.
    pub(super) fn grant(&mut self, now: Instant, op: OpId, a: PendingAcquire<B::Target>, fence: Option<u64>, since: Instant, granted: Duration) {
        let lease = LeaseId(op.0);
        let span = granted.min(a.lease);
        let cap = self.backend.confirmation_span(&a.token);
        // A fixed lease outlasting one confirmation ends `lease` after the grant, and is
        // confirmed until then.
        let end = match cap {
            Some(_) if !a.auto_renew => Some(since + a.lease.saturating_sub(self.backend.drift(a.lease))),
            _ => None,
        };
        let valid_until = confirmed_until(&self.backend, &a.token, since, span, end);
        self.void_undos(&a.token, since);
        let next_renew = if whole_millis(granted) < whole_millis(a.lease) {
            Some(since + cap.map_or(granted, |c| granted.min(c)) / 3)
        } else {
            next_renewal(&self.backend, &a.token, a.auto_renew, since, a.lease, end)
        };
        let mut held = Lease::new(Granted {
            target: a.target,
            held: a.held,
            token: a.token,
            lease: a.lease,
            auto_renew: a.auto_renew,
            valid_until,
            next_renew,
            fence,
            end,
            hold_until: a.min_hold.map(|d| now + d),
            max_until: a.max_hold.map(|d| since + d),
        });
        held.confirmed_for(since, cap.map_or(span, |c| span.min(c)));
        let valid_until = held.valid_until;
        self.leases.insert(lease, held);
        self.sync_lease(lease);
        self.complete(op, Done::Acquired { lease, fencing_token: fence, valid_until });
    }

    /// Ends the background undos of `token` once an attempt with it was granted (`since`: the
    /// granting attempt's send time). They were to remove what an earlier attempt of the same
    /// acquire may have left, under the same token, so what they would remove now is the grant
    /// itself: an undo retried after an outage deleted the lock its own acquire had just been
    /// granted. One on the wire is not retried (its answer came before the grant's on a backend
    /// that orders a token's calls).
    fn void_undos(&mut self, token: &Arc<str>, since: Instant) {
        let undos: Vec<u64> = self.cleanups.iter().filter(|(_, c)| c.token == *token).map(|(id, _)| *id).collect();
        for id in undos {
            let Some(c) = self.cleanups.get_mut(&id) else { continue };
            if c.in_flight {
                c.give_up_at = c.give_up_at.min(since);
                continue;
            }
            let c = self.cleanups.remove(&id).expect("present");
            for op in c.waiting() {
                self.answer_held(op);
            }
            self.sync_cleanup(id);
        }
    }

    pub(super) fn on_renewal(&mut self, now: Instant, sent: Instant, id: LeaseId, tag: u64, verdict: Renewal) {
        let Some(l) = self.leases.get_mut(&id) else {
            return;
        };
        l.renewing = false;
        l.unreachable = match &verdict {
            Renewal::Transient(e) if e.kind() == ErrorKind::Connection => Some(e.message().to_string()),
            Renewal::Transient(_) => l.unreachable.take(),
            _ => None,
        };
        match verdict {
            Renewal::Confirmed => {
                // Not `max` with the old validity: an extend sent before this renewal ran
                // before it, and this renewal's (possibly shorter) lease is what counts now.
                let (backend, end, token) = (&self.backend, l.end, Arc::clone(&l.token));
                let d = l.settle_renewal(tag, Some(sent), |s, d| confirmed_until(backend, &token, s, d, end)).unwrap_or(l.lease);
                l.next_renew = next_renewal(backend, &token, l.auto_renew, sent, d, end);
                l.confirmed_for(sent, backend.confirmation_span(&token).map_or(d, |c| d.min(c)));
                let valid_until = l.valid_until;
                if valid_until <= now {
                    self.lose(now, id, LossReason::Expired, "the renewal was confirmed only after the lease's validity had run out");
                } else {
                    // Told after every renewal; it also ends a spell at risk.
                    self.end_risk(id);
                    self.events.push_back(Event::Renewed { lease: id, valid_until });
                }
            }
            Renewal::Refused { subject } => self.lose(now, id, LossReason::Refused, &format!("{subject} (renewal refused)")),
            Renewal::Transient(e) => {
                l.settle_renewal(tag, None, |s, _| s);
                l.next_renew = Some(now + (l.lease / 10).min(Duration::from_millis(500)));
                // Not lost yet, but not confirmable now: the holder is told once per spell.
                let t = self.telemetry.lease(Happened::RenewalFailed { lease: id, code: e.code() }, id);
                self.raise(t);
                self.put_at_risk(now, id);
            }
            Renewal::Failed(e) => {
                let t = self.telemetry.lease(Happened::RenewalFailed { lease: id, code: e.code() }, id);
                self.raise(t);
                self.lose(now, id, LossReason::Failed, &format!("renewal failed: {}", e.message()));
            }
        }
        self.sync_lease(id);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_extend(&mut self, now: Instant, sent: Instant, op: OpId, id: LeaseId, d: Duration, tag: u64, verdict: Renewal) {
        if self.leases.get(&id).is_some_and(|l| l.hold_release == Some(op)) {
            return self.on_hold_release(op, id, verdict);
        }
        let done = match verdict {
            Renewal::Confirmed => match self.leases.get_mut(&id) {
                Some(l) => {
                    let (backend, token) = (&self.backend, Arc::clone(&l.token));
                    l.settle_renewal(tag, Some(sent), |s, d| confirmed_until(backend, &token, s, d, None));
                    l.lease = d;
                    if backend.confirmation_span(&token).is_none() {
                        // A fixed lease now ends `d` after the send: a top-up of a short grant
                        // still due would stretch it past that (see `grant`).
                        l.next_renew = l.auto_renew.then(|| sent + d / 3);
                    } else {
                        // A fixed lease now ends `d` after the extend was sent.
                        if !l.auto_renew {
                            l.end = Some(sent + d.saturating_sub(backend.drift(d)));
                        }
                        l.next_renew = next_renewal(backend, &token, l.auto_renew, sent, d, l.end);
                    }
                    l.confirmed_for(sent, backend.confirmation_span(&token).map_or(d, |c| d.min(c)));
                    let valid_until = l.valid_until;
                    if valid_until <= now {
                        self.lose(now, id, LossReason::Expired, "the extension was confirmed only after the lease's validity had run out");
                        Done::Failed(not_held("the lease's validity ran out"))
                    } else {
                        // A lease at risk confirmed by an extend is safe again: said as a renewal.
                        if self.end_risk(id) {
                            self.events.push_back(Event::Renewed { lease: id, valid_until });
                        }
                        let t = self.telemetry.lease(Happened::Extended { lease: id }, id);
                        self.raise(t);
                        Done::Extended { valid_until }
                    }
                }
                None => Done::Failed(not_held("the lease is no longer held")),
            },
            Renewal::Refused { subject } => {
                let cleanup = self.lose_and_clean(now, id, LossReason::Refused, &format!("{subject} (extend refused)"));
                let done = Done::Failed(not_held(&format!("{subject}; extend never re-acquires")));
                // The caller is told once what the refused lease left (a key on the masters
                // that still had it) is removed, UNDO_WAIT at most, as a release's caller is:
                // after a failed extend nothing of the lease is left to find.
                if let Some(cleanup) = cleanup {
                    self.sync_lease(id);
                    self.hold_back(now, op, done);
                    return self.answer_after(cleanup, op);
                }
                done
            }
            Renewal::Transient(e) | Renewal::Failed(e) => {
                if let Some(l) = self.leases.get_mut(&id) {
                    l.settle_renewal(tag, None, |s, _| s);
                }
                Done::Failed(e)
            }
        };
        self.sync_lease(id);
        self.complete(op, done);
    }

    pub(super) fn on_release(&mut self, now: Instant, op: OpId, id: LeaseId, verdict: Release) {
        match verdict {
            Release::Done { was_held } => {
                self.remove_lease(id);
                let t = self.telemetry.ended(id, None);
                self.raise(t);
                self.complete(op, Done::Released { was_held });
            }
            Release::Unconfirmed { error, retry } => {
                // The owner gave the lock up: stop renewing it and (where it may help) keep
                // releasing in the background until it lands or the lease runs out, so a
                // release that failed in transport (or a dropped handle's release) cannot keep
                // the lock for ever. Its caller hears the first retry that lands, within
                // UNDO_WAIT, as Curator's and kazoo's releases retry a lost connection: a blip
                // (a reconnect, an ensemble's re-election) is no error to the caller.
                let t = self.telemetry.ended(id, None);
                self.raise(t);
                let Some(l) = self.remove_lease(id).filter(|_| retry) else {
                    return self.complete(op, Done::Failed(error));
                };
                let (span, valid) = (l.span(), now < l.valid_until);
                let cleanup = self.add_cleanup(now, l.target, l.token, span);
                match self.cleanups.get_mut(&cleanup) {
                    Some(c) => {
                        c.releases.push((op, valid));
                        self.hold_back(now, op, Done::Failed(error));
                    }
                    None => self.complete(op, Done::Failed(error)),
                }
            }
            Release::Failed(e) => {
                self.remove_lease(id);
                let t = self.telemetry.ended(id, None);
                self.raise(t);
                self.complete(op, Done::Failed(e));
            }
        }
    }

    /// A release before the shortest hold's end, sent as an expiry change to what is left of
    /// it (`LockEngine::release`), answered: the lease is given up here either way; on the
    /// server it ends at the hold's end (confirmed), was no longer ours (refused), or ends at
    /// its previous expiry (the change did not land).
    fn on_hold_release(&mut self, op: OpId, id: LeaseId, verdict: Renewal) {
        self.remove_lease(id);
        let t = self.telemetry.ended(id, None);
        self.raise(t);
        let done = match verdict {
            Renewal::Confirmed => Done::Released { was_held: true },
            Renewal::Refused { .. } => Done::Released { was_held: false },
            Renewal::Transient(e) | Renewal::Failed(e) => Done::Failed(e),
        };
        self.complete(op, done);
    }

    pub(super) fn on_cleanup(&mut self, now: Instant, id: u64, verdict: Release) {
        let Some(c) = self.cleanups.get_mut(&id) else {
            return;
        };
        c.in_flight = false;
        // The first answer, removed or not (then retried in the background), tells the callers
        // whose calls waited for it.
        for op in std::mem::take(&mut c.answers) {
            self.answer_held(op);
        }
        let Some(c) = self.cleanups.get_mut(&id) else {
            return;
        };
        match verdict {
            Release::Unconfirmed { retry: true, .. } if now < c.give_up_at => {
                c.due = now + c.backoff;
                c.backoff = (c.backoff * 2).min(MAX_BACKOFF);
            }
            verdict => {
                let c = self.cleanups.remove(&id).expect("present");
                // A release that failed in transport landed on a retry: its caller is told so;
                // a retry given up tells it the first failure. A retry that finds nothing to
                // remove of a lease still valid when the first try failed finds what that try
                // removed (its reply was lost, not its work): the lock was held.
                for (op, valid) in c.releases {
                    if let (Release::Done { was_held }, Some(done)) = (&verdict, self.held_back.get_mut(&op)) {
                        *done = Done::Released { was_held: *was_held || valid };
                    }
                    self.answer_held(op);
                }
            }
        }
        self.sync_cleanup(id);
    }

    pub(super) fn remove_lease(&mut self, id: LeaseId) -> Option<Lease<B::Target>> {
        let l = self.leases.remove(&id)?;
        self.at_risk.remove(&id);
        self.timers.cancel(Due::Lease(id));
        self.renew_early.cancel(id);
        Some(l)
    }

    pub(super) fn lose(&mut self, now: Instant, id: LeaseId, reason: LossReason, why: &str) {
        self.lose_and_clean(now, id, reason, why);
    }

    /// [`lose`](Self::lose), saying which cleanup removes what the lease left (none if the
    /// lease was gone already).
    fn lose_and_clean(&mut self, now: Instant, id: LeaseId, reason: LossReason, why: &str) -> Option<u64> {
        let l = self.remove_lease(id)?;
        let t = self.telemetry.ended(id, Some(reason));
        self.raise(t);
        // If the server still has our token (we merely failed to renew in time), free it so
        // nobody waits on a lease its owner has given up. An unanswered extend may have set a
        // longer expiry than the lease, so keep trying for the longest of them.
        let span = l.span();
        let cleanup = self.add_cleanup(now, l.target, l.token, span);
        self.events.push_back(Event::Lost { lease: id, error: not_held(why) });
        Some(cleanup)
    }

    /// Removes from the server whatever an abandoned acquire may have left: its queue entry,
    /// or the lock itself if a grant raced the abandonment. Says what it started.
    pub(super) fn abandon(&mut self, now: Instant, op: OpId, mut a: PendingAcquire<B::Target>) -> Undo {
        match a.state {
            AcquireState::InFlight if !self.backend.undo_in_flight_at_once() => {
                // The attempt's reply decides (see on_attempt).
                self.orphans.insert(op, a);
                Undo::Orphan
            }
            _ if a.dirty => Undo::Cleanup(self.undo(now, &mut a)),
            _ => Undo::Nothing,
        }
    }

    /// Starts a background release of `token`'s hold or entry; the cleanup's id.
    pub(super) fn add_cleanup(&mut self, now: Instant, target: Arc<B::Target>, token: Arc<str>, span: Duration) -> u64 {
        let id = self.ids.fresh();
        let action = Action::Release { target: &target, token: &token };
        self.backend.call(ctx!(self, now), Purpose::Cleanup(id), action, &mut self.settled_now);
        // What lives until the session ends is worth removing until then (the backend answers
        // "done" once the session is gone).
        let span = if self.backend.leftovers_live_with_session() { crate::options::MAX_DURATION } else { span };
        self.cleanups.insert(
            id,
            Cleanup {
                target,
                token,
                due: now,
                give_up_at: now + span,
                in_flight: true,
                backoff: FIRST_BACKOFF,
                answers: Vec::new(),
                releases: Vec::new(),
            },
        );
        id
    }
}

/// What [`abandon`](LockEngine::abandon) started to remove what an acquire left.
pub(super) enum Undo {
    /// Nothing can be left.
    Nothing,
    /// An attempt is on the wire: its reply decides, then a cleanup goes out.
    Orphan,
    /// This cleanup removes it.
    Cleanup(u64),
}

/// The validity a confirmation of a lease of `d`, sent at `sent`, gives: `d` (at most the
/// backend's [confirmation span](Backend::confirmation_span)) less the drift allowance, and
/// never past `end` (a fixed lease's end).
pub(super) fn confirmed_until<B: Backend>(backend: &B, token: &str, sent: Instant, d: Duration, end: Option<Instant>) -> Instant {
    let span = backend.confirmation_span(token).map_or(d, |c| d.min(c));
    let until = sent + span.saturating_sub(backend.drift(span));
    end.map_or(until, |e| until.min(e))
}

/// When a lease confirmed by a request sent at `sent` for `d` is renewed next: a third of the
/// way into what that confirmation gives; a fixed lease only while one confirmation does not
/// reach its `end`.
pub(super) fn next_renewal<B: Backend>(backend: &B, token: &str, auto_renew: bool, sent: Instant, d: Duration, end: Option<Instant>) -> Option<Instant> {
    let cap = backend.confirmation_span(token);
    if auto_renew {
        return Some(sent + cap.map_or(d, |c| d.min(c)) / 3);
    }
    match (cap, end) {
        (Some(c), Some(end)) if sent + c < end => Some(sent + c / 3),
        _ => None,
    }
}
