//! The SQL backend of the lock engine (PROTOCOL.md §11): every engine call is one
//! [`SqlOp`] (one batch on the client's main connection), its reply decided by the recipes of
//! [`recipe`] over the lock name's live rows; waiters are woken by their
//! predecessor's release or death — PostgreSQL notifications on the listening connection, MySQL
//! doorbells (named locks) waited on from wait connections — and re-check by timer at the
//! predecessor's expiry or a third of their entry lease, whichever comes first; a timed
//! re-check goes to the server only when it can learn something (`nothing_to_check`), and the
//! client's heartbeat keeps its waiters' predecessors' expiries known ([`super::watch`]).
//!
//! What the backend keeps is wire state only: each owner token's row (its lock name and id once
//! read), what each waiter waits behind, the doorbell waits on the wire, the session open's
//! steps.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::config::SqlConfig;
use super::failure::{attempt_failure, attempt_transient, failure_error, renewal_failure, release_failure};
use super::recipe::{self, Place};
use super::request::{is_missing_table, SqlOp, SqlReply, SqlRequest, SqlResult};
use super::statement::{Conn, Dialect, SqlNotice, MAX_WAIT_CONNECTIONS};
use super::target::SqlTarget;
use super::watch::{Look, Seen};
use crate::engine::operation::MAX_BACKOFF;
use crate::engine::{Action, Answer, Attempt, Backend, Ctx, Done, LeaderInfo, LockEngine, Renewal, Purpose, Release, RequestId, Signal, Verdict};
use crate::error::{Error, ErrorKind, Result};
use crate::listing::Query;
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The lock engine over a PostgreSQL or MySQL/MariaDB database. See [`LockEngine`] for the
/// driving contract; requests are [`SqlRequest`]s, replies [`SqlResult`]s, pushes
/// [`SqlNotice`]s.
pub type SqlEngine = LockEngine<SqlBackend>;

/// How many notified ids are remembered (ids never come back; a waiter's attempt reads its
/// predecessor within one round trip of the notification, so a few thousand cover any burst).
const GONE_KEPT: usize = 4096;

/// How long one doorbell wait blocks, in MySQL's whole seconds, for a waiter that is not its
/// client's first on its lock name while more waiters than wait connections queue: the wait
/// connections rotate toward the front within a second (a wait cannot be called off).
const DOORBELL_WAIT_SECS: u64 = 1;

/// How many times one call is sent again after the server rolled it back as a deadlock or
/// serialization victim, before its failure goes to the engine (which retries an attempt
/// while the wait lasts, or fails a one-shot attempt).
const MAX_RERUNS: u32 = 50;

/// Whether a failure is a deadlock or serialization failure: the server rolled the whole
/// transaction (or the single statement) back, and no call's batch does anything unsafe to run
/// twice, so sending the same operation again is safe.
fn rolled_back(f: &super::statement::SqlFailure) -> bool {
    matches!(f, super::statement::SqlFailure::Server { code, .. } if matches!(code.as_str(), "1213" | "40001" | "40P01"))
}

/// How many routine re-checks (a waiter's timer: its row's refresh and the fallback look) may
/// be on the statement connection at once; the rest wait in the backend, so a woken waiter's
/// re-check is never queued behind hundreds of them (one connection runs batches in order).
const ROUTINE_CHECKS: usize = 4;

/// The payload prefix of the session open's own notification.
const CHECK_PAYLOAD: &str = "check:";

/// One engine call on the wire.
#[derive(Debug)]
struct Call {
    purpose: Purpose,
    target: Arc<SqlTarget>,
    token: Arc<str>,
    sent: Instant,
    /// An acquire's entry lease (its re-check cap is a third of it).
    entry_ttl: Duration,
    /// An acquire's lease.
    lease: Duration,
    once: bool,
    /// The operation, sent again if the server rolled it back as a deadlock victim.
    op: SqlOp,
    /// How many times it was sent again so.
    rerun: u32,
}

/// A request no engine call waits for.
#[derive(Debug)]
enum Background {
    /// A step of the session open of generation `gen`.
    Open { gen: u64, step: OpenStep },
    /// `LISTEN` again after the listening connection was replaced.
    Relisten,
    /// A MySQL waiter's blocking wait on `owner`'s doorbell.
    Doorbell { token: Arc<str>, owner: String },
    /// Doorbells taken again after the main connection was replaced.
    Retake,
    /// The close's delete of every row of this client.
    Closing,
    /// A refresh of these waiters' rows and the watch of what they wait behind (on the
    /// refresh connection), sent at `sent` (its first send: a watched expiry counts from it).
    Refresh { tokens: Vec<Arc<str>>, op: SqlOp, rerun: u32, sent: Instant },
}

/// A queued waiter's row, kept alive by the client's batched refreshes (not by its own
/// re-checks, which queue behind the client's other work on Main).
#[derive(Debug)]
struct Beat {
    /// Its row.
    id: i64,
    /// Its lock name.
    lock_key: String,
    /// What each refresh gives it: the entry lease, but never more than the lock's lease (a
    /// refresh racing the row's grant then extends the holder's row no further than a renewal
    /// would).
    ttl: Duration,
    /// When its next refresh is due: a third of `ttl` after its expiry was last set (counted
    /// from the send time of the batch that set it).
    due: Instant,
}

/// The steps of a session open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpenStep {
    Probe,
    Create,
    Listen,
    Notify,
}

/// The session open in progress.
#[derive(Debug, Default)]
struct Opening {
    gen: u64,
    /// The request whose reply the engine takes as the open's (sent last).
    confirm: Option<RequestId>,
    /// Why the open failed, handed over with the confirming reply.
    error: Option<Error>,
    /// PostgreSQL: the payload of the notification sent to ourselves, and when we give up.
    check: Option<(String, Instant)>,
}

/// What a queued waiter waits behind.
#[derive(Debug, Default)]
struct Waiting {
    /// The ids whose deletion wakes it (PostgreSQL notifications).
    ids: Vec<i64>,
    /// The doorbell owner a wait is on the wire for (MySQL).
    doorbell_on_wire: Option<String>,
    /// The doorbell to wait on when a wait connection is free (MySQL).
    bell: Option<Bell>,
    /// No earlier than this, what it waits behind expires (the soonest remaining time read by
    /// its re-check or the client's heartbeat, counted from that read's send time): its timed
    /// re-check must reach the server then.
    behind_until: Option<Instant>,
}

/// A MySQL waiter's doorbell wait, on the wire or to start when a wait connection is free.
#[derive(Clone, Debug)]
struct Bell {
    /// The predecessor whose doorbell it is.
    owner: String,
    /// How long a wait may block, in seconds: until the waiter's re-check is due.
    cap_secs: u64,
    /// The waiter's lock name and own row id: of one client's waiters on one name, the
    /// earliest rows are nearest the front and get the wait connections first.
    lock_key: String,
    id: i64,
}

/// What the backend knows of an owner token's row.
#[derive(Debug)]
struct RowInfo {
    /// Its id, once read.
    id: Option<i64>,
}

/// The SQL backend.
pub struct SqlBackend {
    config: SqlConfig,
    in_flight: HashMap<RequestId, Call>,
    /// The listing pages on the wire (`list.rs`).
    listing: HashMap<RequestId, (Purpose, Instant, Query)>,
    background: HashMap<RequestId, Background>,
    /// Each owner token that may have a row.
    rows: HashMap<Arc<str>, RowInfo>,
    waits: HashMap<Arc<str>, Waiting>,
    /// MySQL: doorbell waits on the wire.
    doorbell_waits: usize,
    /// MySQL: the doorbell owner whose ring woke each token last.
    rang: HashMap<Arc<str>, String>,
    /// MySQL: owners whose doorbell rang while their row lived on (their client reconnected):
    /// their rows are waited out by timer.
    silent: HashSet<String>,
    signals: VecDeque<Signal>,
    /// PostgreSQL: ids whose deletion was notified lately (a notification can overtake the
    /// reply of the attempt that read the row as live: that waiter re-checks at once).
    gone: HashSet<i64>,
    gone_order: VecDeque<i64>,
    /// Tokens told to re-check by a wake-up (their next re-check goes out at once).
    urgent: HashSet<Arc<str>>,
    /// Routine re-checks sent and not answered yet.
    routine: HashSet<RequestId>,
    /// Routine re-checks waiting for one of those to be answered, in order.
    parked: VecDeque<SqlRequest>,
    /// Lock names with an insert ([`SqlOp::Acquire`]) of this client on the wire, and the
    /// client's later inserts on that name, held in call order until it is answered for good:
    /// a deadlock victim's re-run must still insert before them (row ids are the queue order,
    /// and a re-run sent after them would take a later id, granting this client's acquires
    /// out of call order). The connection runs batches one at a time anyway, so holding them
    /// costs only the reply's way back.
    inserting: HashMap<String, VecDeque<SqlRequest>>,
    opening: Opening,
    /// The queued waiters' rows this client refreshes, by owner token.
    beats: HashMap<Arc<str>, Beat>,
    /// Tokens whose release (or cleanup) was asked for: a late acquire reply does not make them
    /// waiters again.
    leaving: HashSet<Arc<str>>,
    /// Whether a refresh is on the wire (one at a time).
    refreshing: bool,
    /// When the last refresh was sent.
    refreshed_at: Option<Instant>,
    /// Whether the session (schema, listener) is set up.
    open: bool,
    closed: bool,
}

impl SqlBackend {
    /// A backend for `config`.
    pub fn new(config: SqlConfig) -> SqlBackend {
        SqlBackend {
            config,
            in_flight: HashMap::new(),
            listing: HashMap::new(),
            background: HashMap::new(),
            rows: HashMap::new(),
            waits: HashMap::new(),
            doorbell_waits: 0,
            rang: HashMap::new(),
            silent: HashSet::new(),
            signals: VecDeque::new(),
            gone: HashSet::new(),
            gone_order: VecDeque::new(),
            urgent: HashSet::new(),
            routine: HashSet::new(),
            parked: VecDeque::new(),
            inserting: HashMap::new(),
            opening: Opening::default(),
            beats: HashMap::new(),
            leaving: HashSet::new(),
            refreshing: false,
            refreshed_at: None,
            open: false,
            closed: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SqlConfig {
        &self.config
    }

    /// The row id `token` holds or waits with, if read (for tests and tools).
    pub fn row_of(&self, token: &str) -> Option<i64> {
        self.rows.get(token).and_then(|r| r.id)
    }

    fn dialect(&self) -> Dialect {
        self.config.dialect()
    }

    fn send_background(&mut self, ctx: &mut Ctx<'_, SqlRequest>, what: Background, op: SqlOp) {
        let id = ctx.ids.request();
        self.background.insert(id, what);
        ctx.out.push_back(SqlRequest { id, op });
    }

    /// Tells the engine to re-check `tokens` at once (a wake-up): their re-checks skip the
    /// routine queue, and one parked already goes out now.
    fn wake(&mut self, ctx: &mut Ctx<'_, SqlRequest>, tokens: Vec<Arc<str>>) {
        if tokens.is_empty() {
            return;
        }
        for t in &tokens {
            let in_flight = &self.in_flight;
            if let Some(i) = self.parked.iter().position(|r| in_flight.get(&r.id).is_some_and(|c| c.token == *t)) {
                if let Some(r) = self.parked.remove(i) {
                    self.restamp(ctx.now, r.id);
                    ctx.out.push_back(r);
                }
            } else {
                self.urgent.insert(Arc::clone(t));
            }
        }
        self.signals.push_back(Signal::Recheck(tokens.iter().map(|t| t.to_string()).collect()));
    }

    /// A parked re-check leaves now: its validity counts from now (still no later than the
    /// server runs it), not from when the engine asked — under a long queue that was longer
    /// ago than a whole lease, and the grant it brings would be over on arrival.
    fn restamp(&mut self, now: Instant, id: RequestId) {
        if let Some(c) = self.in_flight.get_mut(&id) {
            c.sent = now;
        }
    }

    /// Whether a waiter's timed re-check would learn nothing a wake-up will not tell it: its
    /// row is kept alive by the refreshes, what it waits behind has not expired yet as last
    /// read — by its own re-check or by the heartbeat's watch, which keeps a refreshed
    /// predecessor's expiry ahead of it (a crashed predecessor is found by the re-check at its
    /// expiry) — and its wake-up cannot be missed —
    /// PostgreSQL: the predecessor's delete notifies (notifications missed while the listener
    /// was replaced wake every waiter); MySQL: a doorbell wait is on the wire for it, or one of
    /// this client's own waiters on the name is ahead of it (that one's leaving wakes it, see
    /// `wake_next_own`). Routine re-checks of a long queue would otherwise fill the client's
    /// one statement connection, each reading the rows ahead of its waiter.
    fn nothing_to_check(&self, token: &Arc<str>, now: Instant) -> bool {
        let (Some(beat), Some(w)) = (self.beats.get(token), self.waits.get(token)) else { return false };
        if w.behind_until.is_none_or(|t| t <= now) {
            return false;
        }
        match self.dialect() {
            Dialect::Postgres => !w.ids.is_empty(),
            Dialect::MySql => {
                w.doorbell_on_wire.is_some()
                    || self.beats.iter().any(|(t, b)| t != token && b.lock_key == beat.lock_key && b.id < beat.id && self.waits.contains_key(t))
            }
        }
    }

    /// MySQL: `token` leaves `lock_key`: this client's next waiter there re-checks now (its
    /// timed re-checks were skipped while `token` was ahead of it).
    fn wake_next_own(&mut self, ctx: &mut Ctx<'_, SqlRequest>, lock_key: &str, token: &str) {
        if self.dialect() != Dialect::MySql {
            return;
        }
        let Some(id) = self.row_of(token) else { return };
        let next = self.beats.iter().filter(|(_, b)| b.lock_key == lock_key && b.id > id).min_by_key(|(_, b)| b.id).map(|(t, _)| Arc::clone(t));
        if let Some(t) = next {
            self.wake(ctx, vec![t]);
        }
    }

    /// The insert on `lock_key` on the wire was answered for good: the next one held behind it
    /// goes out now, its send time now (see `restamp`).
    fn next_insert(&mut self, ctx: &mut Ctx<'_, SqlRequest>, lock_key: &str) {
        let Some(held) = self.inserting.get_mut(lock_key) else { return };
        match held.pop_front() {
            Some(r) => {
                self.restamp(ctx.now, r.id);
                ctx.out.push_back(r);
            }
            None => {
                self.inserting.remove(lock_key);
            }
        }
    }

    /// Sends parked routine re-checks while fewer than [`ROUTINE_CHECKS`] are out.
    fn unpark(&mut self, ctx: &mut Ctx<'_, SqlRequest>) {
        while self.routine.len() < ROUTINE_CHECKS {
            let Some(r) = self.parked.pop_front() else { break };
            self.restamp(ctx.now, r.id);
            self.routine.insert(r.id);
            ctx.out.push_back(r);
        }
    }

    /// Ends the session open: the confirming request goes out, and its reply carries `error`.
    fn finish_open(&mut self, ctx: &mut Ctx<'_, SqlRequest>, error: Option<Error>) {
        self.opening.check = None;
        let Some(id) = self.opening.confirm.take() else { return };
        self.opening.error = error;
        ctx.out.push_back(SqlRequest { id, op: SqlOp::Ping });
    }

    fn open_reply(&mut self, ctx: &mut Ctx<'_, SqlRequest>, gen: u64, step: OpenStep, reply: SqlResult) {
        if gen != self.opening.gen || self.opening.confirm.is_none() {
            return;
        }
        let pg = self.dialect() == Dialect::Postgres;
        match (step, reply) {
            (OpenStep::Probe, Err(f)) if is_missing_table(&f) => {
                self.send_background(ctx, Background::Open { gen, step: OpenStep::Create }, SqlOp::CreateSchema);
            }
            (OpenStep::Probe | OpenStep::Create, Ok(_)) if pg => {
                self.send_background(ctx, Background::Open { gen, step: OpenStep::Listen }, SqlOp::Listen);
            }
            (OpenStep::Probe | OpenStep::Create, Ok(_)) => self.finish_open(ctx, None),
            (OpenStep::Listen, Ok(_)) => {
                let payload = format!("{CHECK_PAYLOAD}{:016x}", ctx.rng.next_u64());
                self.opening.check = Some((payload.clone(), ctx.now + self.config.notify_check));
                self.send_background(ctx, Background::Open { gen, step: OpenStep::Notify }, SqlOp::NotifySelf { payload });
            }
            // The notification itself confirms.
            (OpenStep::Notify, Ok(_)) => {}
            (step, Err(f)) => {
                let mut e = failure_error(f);
                if step == OpenStep::Create && e.kind() == ErrorKind::Protocol {
                    // Two clients creating the table at once collide in PostgreSQL's catalog
                    // (23505, 42P07): the next open finds the table.
                    e = Error::new(ErrorKind::Connection, format!("creating lockgate's table failed, trying again: {}", e.message()));
                }
                self.finish_open(ctx, Some(e));
            }
        }
    }

    fn background_reply(&mut self, ctx: &mut Ctx<'_, SqlRequest>, what: Background, reply: SqlResult) {
        match what {
            Background::Open { gen, step } => self.open_reply(ctx, gen, step, reply),
            Background::Relisten => match reply {
                // Notifications sent while no one listened were lost: every waiter looks again.
                Ok(_) => {
                    let tokens: Vec<Arc<str>> = self.waits.keys().cloned().collect();
                    self.waits.clear();
                    self.wake(ctx, tokens);
                }
                Err(_) => self.send_background(ctx, Background::Relisten, SqlOp::Listen),
            },
            Background::Doorbell { token, owner } => {
                self.doorbell_waits = self.doorbell_waits.saturating_sub(1);
                let rang = matches!(reply, Ok(SqlReply::Rang { rang: true }));
                let still = self.waits.get_mut(&token).is_some_and(|w| {
                    let on = w.doorbell_on_wire.as_deref() == Some(owner.as_str());
                    if on {
                        w.doorbell_on_wire = None;
                        // A doorbell that rang is not waited on again before the waiter's
                        // re-check says whom to wait on next (it would ring at once while a
                        // reconnected owner's row lives on). One that timed out is still its
                        // predecessor's: waited on again as soon as a wait connection is free
                        // for it, so a waiter near the front is never left to its timer.
                        // A wait that failed (its connection lost) is not retried in a loop
                        // either: the re-check starts the next one.
                        if rang || reply.is_err() {
                            w.bell = None;
                        }
                    }
                    on
                });
                if rang && still {
                    self.rang.insert(Arc::clone(&token), owner);
                    self.wake(ctx, vec![Arc::clone(&token)]);
                }
                self.start_waits(ctx);
            }
            Background::Refresh { tokens, op, rerun, sent } => {
                self.refreshing = false;
                match reply {
                    Err(f) if rolled_back(&f) && rerun < MAX_RERUNS && !self.closed => {
                        self.refreshing = true;
                        self.send_background(ctx, Background::Refresh { tokens, op: op.clone(), rerun: rerun + 1, sent }, op);
                    }
                    // Not refreshed (the connection was lost): due again at once.
                    Err(_) => {
                        for t in tokens {
                            if let Some(b) = self.beats.get_mut(&t) {
                                b.due = ctx.now;
                            }
                        }
                    }
                    Ok(SqlReply::Refreshed { live, .. }) => {
                        if let SqlOp::Refresh { watch, .. } = &op {
                            self.watched(ctx, sent, &Seen::new(watch, &live));
                        }
                    }
                    Ok(_) => {}
                }
            }
            Background::Retake | Background::Closing => {}
        }
    }

    /// The earliest refresh due, unless one is on the wire.
    fn refresh_due(&self) -> Option<Instant> {
        if self.refreshing || self.closed {
            return None;
        }
        let due = self.beats.values().map(|b| b.due).min()?;
        // Not more often than a sixth of the shortest refresh lease: waiters queued one after
        // another share a refresh instead of one each.
        let gap = self.beats.values().map(|b| b.ttl / 6).min()?;
        Some(self.refreshed_at.map_or(due, |t| due.max(t + gap)))
    }

    /// Sends one refresh of every waiter's row due now or within its period (so one
    /// statement serves them all), grouped by what each refresh gives. Each group is one
    /// statement by primary key on the refresh connection: a waiter's row never depends on its
    /// client's Main being free, however many inserts and re-checks queue there. The same
    /// batch watches the rows the queued waiters wait behind ([`super::watch`]): read as often
    /// as their own clients refresh them, so a live predecessor's expiry stays ahead of its
    /// waiter's timed re-check, which then needs no round trip.
    fn send_refresh(&mut self, ctx: &mut Ctx<'_, SqlRequest>) {
        if self.refresh_due().is_none_or(|t| t > ctx.now) {
            return;
        }
        let now = ctx.now;
        let mut groups: Vec<(u64, Vec<i64>)> = Vec::new();
        let mut tokens = Vec::new();
        for (t, b) in self.beats.iter_mut() {
            if b.due > now + b.ttl / 3 {
                continue;
            }
            let ttl_ms = b.ttl.as_millis() as u64;
            match groups.iter_mut().find(|(ttl, _)| *ttl == ttl_ms) {
                Some((_, ids)) => ids.push(b.id),
                None => groups.push((ttl_ms, vec![b.id])),
            }
            b.due = now + b.ttl / 3;
            tokens.push(Arc::clone(t));
        }
        for (_, ids) in &mut groups {
            ids.sort_unstable();
        }
        let beats = &self.beats;
        let mut watch: Vec<i64> = self.waits.iter().filter(|(t, _)| beats.contains_key(*t)).flat_map(|(_, w)| w.ids.iter().copied()).collect();
        watch.sort_unstable();
        watch.dedup();
        self.refreshing = true;
        self.refreshed_at = Some(now);
        let op = SqlOp::Refresh { groups, watch };
        self.send_background(ctx, Background::Refresh { tokens, op: op.clone(), rerun: 0, sent: now }, op);
    }

    /// What a heartbeat sent at `sent` read of the watched rows: a waiter whose predecessors
    /// all live waits on without looking until the soonest of their expiries read; one whose
    /// predecessor is gone looks again now (a MySQL waiter without a doorbell wait would
    /// otherwise learn of a release only by its timer, and a dead row is reaped by the look).
    fn watched(&mut self, ctx: &mut Ctx<'_, SqlRequest>, sent: Instant, seen: &Seen) {
        let mut woken = Vec::new();
        for (t, w) in self.waits.iter_mut() {
            match seen.look(&w.ids) {
                Look::Unknown => {}
                Look::Live { remaining_ms } => {
                    let until = sent + Duration::from_millis(remaining_ms.max(0) as u64);
                    w.behind_until = Some(w.behind_until.map_or(until, |b| b.max(until)));
                }
                Look::Gone => woken.push(Arc::clone(t)),
            }
        }
        for t in &woken {
            self.waits.remove(t);
        }
        self.wake(ctx, woken);
    }

    /// An acquire's rows: granted, queued behind someone, or the own row gone.
    fn decide(&mut self, ctx: &mut Ctx<'_, SqlRequest>, call: Call, rows: Vec<super::request::EntryRow>) -> Verdict {
        let target = &call.target;
        let token = &call.token;
        match recipe::place(target.kind, target.permits, &rows, token) {
            Place::Missing => {
                self.beats.remove(token);
                if let Some(r) = self.rows.get_mut(token) {
                    r.id = None;
                }
                // Expired between its refresh and the read (a stalled client), or deleted by
                // hand: the next attempt inserts a new row at the back.
                let e = Error::new(ErrorKind::Connection, "the lock's row vanished; trying again");
                Verdict::Attempt(attempt_transient(e))
            }
            Place::Holds(own) => {
                self.beats.remove(token);
                self.rows.insert(Arc::clone(token), RowInfo { id: Some(own.id) });
                self.waits.remove(token);
                self.rang.remove(token);
                let granted = Duration::from_millis(own.remaining_ms.max(0) as u64);
                Verdict::Attempt(Attempt::Granted { fence: Some(own.id as u64), granted })
            }
            Place::Waits { own, behind } => {
                self.rows.insert(Arc::clone(token), RowInfo { id: Some(own.id) });
                if call.once {
                    let why = match target.permits {
                        p if target.kind == super::request::EntryKind::Semaphore => format!("all {p} permits are taken"),
                        _ => "another owner holds it".to_string(),
                    };
                    return Verdict::Attempt(Attempt::Refused { why });
                }
                if !self.leaving.contains(token) {
                    // Its expiry was set no earlier than the send: the next refresh is due a
                    // third of the refresh's lease after that.
                    let ttl = call.entry_ttl.min(call.lease).max(Duration::from_millis(1));
                    let beat = Beat { id: own.id, lock_key: target.lock_key.clone(), ttl, due: call.sent + ttl / 3 };
                    self.beats.insert(Arc::clone(token), beat);
                }
                let soonest = behind.iter().map(|r| r.remaining_ms).min().unwrap_or(0).max(0) as u64;
                let ids: Vec<i64> = behind.iter().map(|r| r.id).collect();
                let holder_remaining = Some(Duration::from_millis(soonest));
                if ids.iter().any(|id| self.gone.contains(id)) {
                    // What it waits behind was deleted after this attempt read it: look again.
                    self.waits.remove(token);
                    self.wake(ctx, vec![Arc::clone(token)]);
                    return Verdict::Attempt(Attempt::Queued { holder_remaining, fence: 0 });
                }
                // MySQL waits on one doorbell: the nearest row (a semaphore: the oldest).
                let bell = behind.last().map(|r| r.owner.clone()).filter(|_| self.dialect() == Dialect::MySql);
                if let Some(owner) = &bell {
                    if self.rang.get(token) == Some(owner) {
                        // Its doorbell rang, yet its row lives: its client reconnected (named
                        // locks die with their connection). Wait its row out by timer.
                        self.silent.insert(owner.clone());
                    }
                }
                // A wait blocks until the waiter's re-check is due at most (see start_waits).
                let cap_secs = soonest.min(call.entry_ttl.as_millis() as u64 / 3).div_ceil(1000).max(1);
                let entry = self.waits.entry(Arc::clone(token)).or_default();
                entry.ids = ids;
                entry.behind_until = Some(call.sent + Duration::from_millis(soonest));
                entry.bell = bell.map(|owner| Bell { owner, cap_secs, lock_key: target.lock_key.clone(), id: own.id });
                self.start_waits(ctx);
                Verdict::Attempt(Attempt::Queued { holder_remaining, fence: 0 })
            }
        }
    }

    /// MySQL: starts doorbell waits while wait connections are free, for the waiters nearest
    /// the front first: each one's rank is how many of this client's waiters on its lock name
    /// have smaller rows (0: this client's first there, directly behind the holder unless
    /// another client's waiter is between), ties by row id. A waiter of rank 0 blocks until its
    /// re-check is due; the others, while more waiters than wait connections queue, one second
    /// (MySQL's shortest), so connections held for waiters further back, or for waiters that
    /// gave up meanwhile, come free for the front within a second.
    fn start_waits(&mut self, ctx: &mut Ctx<'_, SqlRequest>) {
        if self.doorbell_waits >= MAX_WAIT_CONNECTIONS {
            return;
        }
        let mut by_name: HashMap<&str, Vec<i64>> = HashMap::new();
        for b in self.waits.values().filter_map(|w| w.bell.as_ref()) {
            by_name.entry(b.lock_key.as_str()).or_default().push(b.id);
        }
        for ids in by_name.values_mut() {
            ids.sort_unstable();
        }
        let rank = |b: &Bell| by_name.get(b.lock_key.as_str()).map_or(0, |ids| ids.partition_point(|id| *id < b.id));
        let crowded = self.waits.values().filter(|w| w.bell.is_some()).count() > MAX_WAIT_CONNECTIONS;
        let mut ready: Vec<(usize, i64, Arc<str>, u64)> = self
            .waits
            .iter()
            .filter(|(_, w)| w.doorbell_on_wire.is_none())
            .filter_map(|(t, w)| w.bell.as_ref().filter(|b| !self.silent.contains(&b.owner)).map(|b| (rank(b), b.id, Arc::clone(t), b.cap_secs)))
            .collect();
        drop(by_name);
        ready.sort_unstable_by_key(|r| (r.0, r.1));
        for (rank, _, token, cap_secs) in ready {
            if self.doorbell_waits >= MAX_WAIT_CONNECTIONS {
                break;
            }
            let Some(w) = self.waits.get_mut(&token) else { continue };
            let Some(owner) = w.bell.as_ref().map(|b| b.owner.clone()) else { continue };
            let timeout_secs = if crowded && rank > 0 { DOORBELL_WAIT_SECS.min(cap_secs) } else { cap_secs };
            w.doorbell_on_wire = Some(owner.clone());
            self.doorbell_waits += 1;
            let what = Background::Doorbell { token, owner: owner.clone() };
            self.send_background(ctx, what, SqlOp::WaitDoorbell { owner, timeout_secs });
        }
    }

    fn acquire_reply(&mut self, ctx: &mut Ctx<'_, SqlRequest>, call: Call, reply: SqlResult) -> Verdict {
        if self.closed {
            let e = Error::new(ErrorKind::Closed, "the client is closed");
            return Verdict::Attempt(Attempt::Failed { error: e, undo: true });
        }
        match reply {
            Ok(SqlReply::Entries { rows }) => self.decide(ctx, call, rows),
            Ok(other) => Verdict::Attempt(Attempt::Failed { error: Error::protocol(format!("an acquire answered {other:?}")), undo: true }),
            Err(f) => Verdict::Attempt(attempt_failure(f)),
        }
    }

    fn confirm_reply(&mut self, reply: SqlResult) -> Verdict {
        Verdict::Renewal(match reply {
            Ok(SqlReply::Renewed { renewed: true }) => Renewal::Confirmed,
            Ok(SqlReply::Renewed { renewed: false }) => {
                Renewal::Refused { subject: "the lock's row expired or was deleted".to_string() }
            }
            Ok(other) => Renewal::Failed(Error::protocol(format!("a renewal answered {other:?}"))),
            Err(f) => renewal_failure(f),
        })
    }

    fn release_reply(&mut self, call: &Call, reply: SqlResult) -> Verdict {
        Verdict::Release(match reply {
            Ok(SqlReply::Released { was_held, .. }) => {
                self.leaving.remove(&call.token);
                self.rows.remove(&call.token);
                self.waits.remove(&call.token);
                self.rang.remove(&call.token);
                self.urgent.remove(&call.token);
                Release::Done { was_held }
            }
            Ok(other) => Release::Failed(Error::protocol(format!("a release answered {other:?}"))),
            Err(f) => release_failure(f),
        })
    }
}

impl Backend for SqlBackend {
    type Target = SqlTarget;
    type Request = SqlRequest;
    type Reply = SqlResult;
    type Notice<'a> = SqlNotice;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<SqlTarget> {
        let mut target = SqlTarget::new(name, primitive)?;
        // Every row but a candidate's carries the label in `value` (PROTOCOL.md §11): no
        // recipe reads `value` but an election's, so older clients keep working.
        if target.value.is_none() && !self.config.label.is_empty() {
            target.value = Some(self.config.label.clone());
        }
        Ok(target)
    }

    fn check_observe(&self) -> Result<()> {
        Ok(())
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    /// A row is its owner's from any connection: the renewal's `UPDATE` names it by id and
    /// owner (PROTOCOL.md §17).
    fn check_adopt(&self) -> Result<()> {
        Ok(())
    }

    /// The row's id is the fencing token the identity carries; the renewal matches it together
    /// with the owner, so a wrong id updates nothing and the adoption is refused.
    fn adopt(&mut self, _target: &Self::Target, token: &str, fence: Option<u64>) -> Result<()> {
        let id = fence.and_then(|f| i64::try_from(f).ok()).ok_or_else(|| Error::invalid("identity has no SQL row id (its fencing token)"))?;
        self.rows.insert(Arc::from(token), RowInfo { id: Some(id) });
        Ok(())
    }

    fn check_break(&self, _fenced: bool) -> Result<()> {
        Ok(())
    }

    fn check_list(&self) -> Result<()> {
        Ok(())
    }

    /// Expiry is the server's clock, validity the client's from the send time: a hundredth
    /// covers the two clocks' rates drifting apart.
    fn drift(&self, d: Duration) -> Duration {
        d / 100
    }

    fn retry_delay(&self, backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration {
        let jitter = Duration::from_millis(rng.next_u64() % 20);
        let delay = *backoff + jitter;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        delay
    }

    /// The table must exist (and PostgreSQL's listener be up) before the first attempt.
    fn attempts_need_session(&self) -> bool {
        true
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, SqlRequest>) -> Option<RequestId> {
        let confirm = ctx.ids.request();
        self.opening = Opening { gen: self.opening.gen + 1, confirm: Some(confirm), error: None, check: None };
        if self.open {
            // The table exists already: only the listener (PostgreSQL) needs setting up again.
            let gen = self.opening.gen;
            self.open_reply(ctx, gen, OpenStep::Probe, Ok(SqlReply::Done));
        } else {
            let gen = self.opening.gen;
            self.send_background(ctx, Background::Open { gen, step: OpenStep::Probe }, SqlOp::Probe);
        }
        Some(confirm)
    }

    fn session_reply(&mut self, reply: SqlResult) -> Result<()> {
        if let Some(e) = self.opening.error.take() {
            return Err(e);
        }
        match reply {
            Ok(_) => {
                self.open = true;
                Ok(())
            }
            Err(f) => Err(failure_error(f)),
        }
    }

    fn close_session(&mut self, ctx: &mut Ctx<'_, SqlRequest>) {
        self.closed = true;
        // Nothing waits in the backend past the close: the engine waits for their replies.
        ctx.out.extend(self.parked.drain(..));
        ctx.out.extend(self.inserting.drain().flat_map(|(_, held)| held));
        let owners: Vec<String> = self.rows.keys().map(|t| t.to_string()).collect();
        self.rows.clear();
        self.waits.clear();
        self.beats.clear();
        if !owners.is_empty() {
            for chunk in owners.chunks(100) {
                self.send_background(ctx, Background::Closing, SqlOp::DeleteOwners { owners: chunk.to_vec() });
            }
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, SqlRequest>, purpose: Purpose, action: Action<'_, SqlTarget>, answers: &mut Vec<Answer>) {
        let mut acquire_lease = Duration::ZERO;
        let (target, token, op, entry_ttl, once) = match action {
            Action::List { query } => {
                match super::list::op(query) {
                    Ok(op) => {
                        let id = ctx.ids.request();
                        self.listing.insert(id, (purpose, ctx.now, query.clone()));
                        ctx.out.push_back(SqlRequest { id, op });
                    }
                    Err(e) => answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Listed(Err(e)) }),
                }
                return;
            }
            Action::Acquire { target, token, lease, entry_ttl, once } => {
                acquire_lease = lease;
                self.leaving.remove(token);
                let known = self.rows.entry(Arc::from(token)).or_insert(RowInfo { id: None }).id.is_some();
                let a = target.acquire(token, lease, entry_ttl);
                // A waiter whose row was read re-checks without the insert's transaction.
                let op = if known { SqlOp::Check(a) } else { SqlOp::Acquire(a) };
                (target, token, op, entry_ttl, once)
            }
            Action::Extend { target, token, duration } => {
                let Some(id) = self.row_of(token) else {
                    let subject = "the lock's row is not known to this client".to_string();
                    answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Renewal(Renewal::Refused { subject }) });
                    return;
                };
                let op = SqlOp::Renew { id, owner: token.to_string(), ttl_ms: duration.as_millis() as u64 };
                (target, token, op, Duration::ZERO, false)
            }
            Action::Release { target, token } => {
                // No longer a waiter: its row is not refreshed again (should the release fail
                // for good, the row dies with its entry lease).
                self.beats.remove(token);
                self.wake_next_own(ctx, &target.lock_key, token);
                self.leaving.insert(Arc::from(token));
                let op = SqlOp::Release { lock_key: target.lock_key.clone(), owner: token.to_string() };
                (target, token, op, Duration::ZERO, false)
            }
            Action::Break { target, holder } => {
                // The holder's own release (owner-only DELETE, the same notification); this
                // client's waiters on the name look again as after any release of its own.
                let token = holder.token.as_deref().unwrap_or_default();
                self.wake_next_own(ctx, &target.lock_key, token);
                let op = SqlOp::Release { lock_key: target.lock_key.clone(), owner: token.to_string() };
                (target, token, op, Duration::ZERO, false)
            }
            Action::Observe { target } => {
                let op = SqlOp::Observe { lock_key: target.lock_key.clone() };
                (target, "", op, Duration::ZERO, false)
            }
            Action::Inspect { target, .. } => {
                let op = SqlOp::Inspect { lock_key: target.lock_key.clone() };
                (target, "", op, Duration::ZERO, false)
            }
        };
        let id = ctx.ids.request();
        let token: Arc<str> = Arc::from(token);
        let routine = matches!(op, SqlOp::Check(_)) && !self.urgent.remove(&token) && !self.closed;
        if routine && self.nothing_to_check(&token, ctx.now) {
            // Its row is refreshed by the batched refreshes and a wake-up will come: still
            // queued, without a round trip (see `nothing_to_check`).
            let behind = self.waits.get(&token).and_then(|w| w.behind_until).map(|t| t.saturating_duration_since(ctx.now));
            let verdict = Verdict::Attempt(Attempt::Queued { holder_remaining: behind, fence: 0 });
            answers.push(Answer { purpose, sent: ctx.now, verdict });
            return;
        }
        let call =
            Call { purpose, target: Arc::clone(target), token, sent: ctx.now, entry_ttl, lease: acquire_lease, once, op: op.clone(), rerun: 0 };
        self.in_flight.insert(id, call);
        let request = SqlRequest { id, op };
        if let SqlOp::Acquire(a) = &request.op {
            if !self.closed {
                match self.inserting.get_mut(&a.lock_key) {
                    // Sent when the earlier inserts on its name are answered (see `inserting`).
                    Some(held) => held.push_back(request),
                    None => {
                        self.inserting.insert(a.lock_key.clone(), VecDeque::new());
                        ctx.out.push_back(request);
                    }
                }
                return;
            }
        }
        if !routine {
            ctx.out.push_back(request);
        } else {
            // Sent when its turn comes (its send time then: see `restamp`).
            self.parked.push_back(request);
            self.unpark(ctx);
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, SqlRequest>, id: RequestId, reply: SqlResult, answers: &mut Vec<Answer>) {
        if let Some((purpose, sent, query)) = self.listing.remove(&id) {
            let found = match reply {
                Ok(SqlReply::Keys { keys }) => Ok(super::list::found(&query, keys)),
                Ok(other) => Err(Error::protocol(format!("a listing answered {other:?}"))),
                Err(f) => Err(failure_error(f)),
            };
            answers.push(Answer { purpose, sent, verdict: Verdict::Listed(found) });
            return;
        }
        if let Some(what) = self.background.remove(&id) {
            return self.background_reply(ctx, what, reply);
        }
        if self.routine.remove(&id) {
            self.unpark(ctx);
        }
        let Some(mut call) = self.in_flight.remove(&id) else { return };
        if let Err(f) = &reply {
            if rolled_back(f) && call.rerun < MAX_RERUNS && !self.closed {
                // A deadlock victim (InnoDB's 1213 between one name's acquires, re-checks'
                // reaps and releases) is no caller's business: the same call goes again at
                // once (every one is a transaction or a single statement, rolled back whole),
                // its send time kept (validity counts from the first send: never later than
                // the truth).
                // An insert's re-run keeps its name's later inserts held (see `inserting`).
                call.rerun += 1;
                let again = ctx.ids.request();
                let op = call.op.clone();
                self.in_flight.insert(again, call);
                ctx.out.push_back(SqlRequest { id: again, op });
                return;
            }
        }
        if let SqlOp::Acquire(a) = &call.op {
            self.next_insert(ctx, &a.lock_key);
        }
        let (purpose, sent) = (call.purpose, call.sent);
        let verdict = match purpose {
            // Listing pages are answered before the calls (`listing`): none is a call.
            Purpose::List(_) => Verdict::Listed(Err(Error::protocol("a listing page was sent as a lock call"))),
            Purpose::Acquire(_) => self.acquire_reply(ctx, call, reply),
            Purpose::Renew(..) | Purpose::Extend(..) => self.confirm_reply(reply),
            Purpose::Release(..) | Purpose::Cleanup(_) | Purpose::Break(_) => self.release_reply(&call, reply),
            Purpose::Observe(_) => Verdict::Observed(match reply {
                Ok(SqlReply::Leader(row)) => Ok(row.map(|r| LeaderInfo {
                    value: r.value.unwrap_or_default(),
                    term: r.id as u64,
                    remaining: Duration::from_millis(r.remaining_ms.max(0) as u64),
                })),
                Ok(other) => Err(Error::protocol(format!("an observe answered {other:?}"))),
                Err(f) => Err(failure_error(f)),
            }),
            Purpose::Inspect(_) => Verdict::Inspected(match reply {
                Ok(SqlReply::Entries { rows }) => Ok(super::inspect::snapshot(&call.target, &rows)),
                Ok(other) => Err(Error::protocol(format!("an inspect answered {other:?}"))),
                Err(f) => Err(failure_error(f)),
            }),
        };
        answers.push(Answer { purpose, sent, verdict });
    }

    fn on_notice(&mut self, ctx: &mut Ctx<'_, SqlRequest>, notice: SqlNotice, _answers: &mut Vec<Answer>) -> Signal {
        match notice {
            SqlNotice::Notified { channel, payload } => {
                if channel != self.config.schema.channel() {
                    return Signal::Nothing;
                }
                if let Some(check) = payload.strip_prefix(CHECK_PAYLOAD) {
                    let ours = self.opening.check.as_ref().is_some_and(|(p, _)| p.strip_prefix(CHECK_PAYLOAD) == Some(check));
                    if ours {
                        self.finish_open(ctx, None);
                    }
                    return Signal::Nothing;
                }
                let Ok(gone) = payload.trim().parse::<i64>() else { return Signal::Nothing };
                if self.gone.insert(gone) {
                    self.gone_order.push_back(gone);
                    if self.gone_order.len() > GONE_KEPT {
                        if let Some(old) = self.gone_order.pop_front() {
                            self.gone.remove(&old);
                        }
                    }
                }
                let woken: Vec<Arc<str>> = self.waits.iter().filter(|(_, w)| w.ids.contains(&gone)).map(|(t, _)| Arc::clone(t)).collect();
                if woken.is_empty() {
                    return Signal::Nothing;
                }
                for t in &woken {
                    self.waits.remove(t);
                }
                // Through the signal queue (the engine takes it right after this returns).
                self.wake(ctx, woken);
                Signal::Nothing
            }
            SqlNotice::Reconnected { conn: Conn::Listen } => {
                if self.open && self.dialect() == Dialect::Postgres {
                    self.send_background(ctx, Background::Relisten, SqlOp::Listen);
                }
                Signal::Nothing
            }
            SqlNotice::Reconnected { conn: Conn::Main } => {
                if self.dialect() == Dialect::MySql && !self.rows.is_empty() && !self.closed {
                    // Named locks die with their connection: take this client's doorbells again
                    // (waiters that rang meanwhile wait its rows out by timer).
                    let owners: Vec<String> = self.rows.keys().map(|t| t.to_string()).collect();
                    self.send_background(ctx, Background::Retake, SqlOp::TakeDoorbells { owners });
                }
                Signal::Nothing
            }
            SqlNotice::Reconnected { conn: Conn::Wait | Conn::Refresh } => Signal::Nothing,
        }
    }

    fn take_signal(&mut self) -> Option<Signal> {
        self.signals.pop_front()
    }

    fn on_timeout(&mut self, ctx: &mut Ctx<'_, SqlRequest>, _answers: &mut Vec<Answer>) {
        self.send_refresh(ctx);
        if self.opening.check.as_ref().is_some_and(|(_, at)| *at <= ctx.now) {
            let e = Error::unsupported(format!(
                "PostgreSQL notifications do not reach this client's listening connection (no notification \
                 within {:?} of sending one to itself): a pooler in transaction or statement mode (PgBouncer) \
                 cannot carry LISTEN; connect to PostgreSQL directly or through a session-mode pool",
                self.config.notify_check
            ));
            self.finish_open(ctx, Some(e));
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let check = self.opening.check.as_ref().map(|(_, at)| *at);
        [check, self.refresh_due()].into_iter().flatten().min()
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.listing.is_empty() && !self.background.values().any(|b| matches!(b, Background::Closing))
    }
}
