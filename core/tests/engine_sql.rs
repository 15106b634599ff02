//! The SQL backend driven through the engine over the in-memory database of `sim/sql.rs` (rows
//! with durable ids, expiry on the server's clock, PostgreSQL notifications, MySQL doorbells),
//! on a quiet network: FIFO with each waiter woken only by its predecessor, reentrant holds
//! without a request, readers together and writers alone, a semaphore's permits, an election
//! observed with its value and term (the leader row's id), a lost reply adopted by the retry,
//! a crashed holder's row expiring by the server's clock, a dead waiter's row skipped, releases
//! that delete only their own row, a closing client deleting its rows, PgBouncer's transaction
//! mode refused; and, driven by hand, MySQL's doorbell waits, a DBA's statement timeout, a deadlock
//! sent again, a PostgreSQL notification that overtakes the reply of the attempt it concerns, and
//! the heartbeat's watch standing in for the waiters' timed re-checks.

mod sim;

use lockgate_core::engine::{Done, LockEngine, Wait};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::sql::{
    Conn, Dialect, Schema, SqlBackend, SqlConfig, SqlFailure, SqlNotice, SqlOp, SqlReply, SqlRequest,
};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{ErrorKind, LeaderInfo, LockOptions, OpId, Primitive};

use sim::harness::ClientId;
use sim::sql::SqlSim as Sim;
use sim::NetConfig;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Latencies of 0.1 to 1 ms, nothing lost.
fn quiet() -> NetConfig {
    NetConfig { latency: (Duration::from_micros(100), ms(1)), notify_latency: (Duration::from_micros(100), ms(1)), ..NetConfig::default() }
}

fn both() -> [Dialect; 2] {
    [Dialect::Postgres, Dialect::MySql]
}

/// How many acquire batches client `c` has sent.
fn acquires_sent(sim: &Sim, c: ClientId) -> usize {
    sim.clients[c].requests.iter().filter(|(_, r)| matches!(r.op, SqlOp::Acquire(_) | SqlOp::Check(_))).count()
}

fn run_until(sim: &mut Sim, within: Duration, what: &str, done: impl FnMut(&Sim) -> bool) {
    let limit = sim.now + within;
    assert!(sim.run_until(limit, done), "{what} did not happen within {within:?}");
}

fn grant(sim: &mut Sim, c: ClientId, op: OpId, within: Duration) -> (Instant, lockgate_core::LeaseId, u64) {
    run_until(sim, within, "the grant", |s| s.granted(c, op).is_some());
    let (at, lease, fence) = sim.granted(c, op).expect("granted");
    (at, lease, fence.expect("a fence"))
}

// PostgreSQL: a queue of four; each release wakes the next waiter at once (by the
// notification of the released row's id), and only it: the others send nothing until their
// own predecessor goes. Fences are the row ids, increasing in queue order.
#[test]
fn fifo_with_each_waiter_woken_only_by_its_predecessor() {
    let mut sim = Sim::sql(Dialect::Postgres, 1, quiet());
    let cs = sim.add_clients(4);
    let opts = LockOptions::renewed_lease(Duration::from_secs(30));
    let first = sim.acquire(cs[0], "q", &opts, Wait::Forever);
    let (_, mut lease, mut fence) = grant(&mut sim, cs[0], first, ms(100));
    let mut ops = vec![first];
    for &c in &cs[1..] {
        ops.push(sim.acquire(c, "q", &opts, Wait::Forever));
        sim.run_for(ms(20));
    }
    for i in 1..cs.len() {
        let before: Vec<usize> = cs.iter().map(|&c| acquires_sent(&sim, c)).collect();
        sim.release(cs[i - 1], lease);
        let (_, l, f) = grant(&mut sim, cs[i], ops[i], ms(50));
        assert!(f > fence, "fence {f} after {fence}");
        for j in i + 1..cs.len() {
            assert_eq!(acquires_sent(&sim, cs[j]), before[j], "waiter {j} was woken by someone else's release");
        }
        (lease, fence) = (l, f);
    }
}

// Reentrancy is the engine's: a second hold of a held lease sends nothing, and the row goes
// with the last release only.
#[test]
fn reentrant_holds_send_nothing_and_the_last_release_deletes_the_row() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 2, quiet());
        let a = sim.add_client();
        let op = sim.acquire(a, "re", &LockOptions::renewed_lease(Duration::from_secs(30)), Wait::Forever);
        let (_, lease, fence) = grant(&mut sim, a, op, ms(100));
        let sent = sim.clients[a].requests.len();
        let again = sim.reacquire(a, lease);
        sim.run_for(ms(10));
        assert!(matches!(sim.done(a, again), Some((_, Done::Acquired { fencing_token: Some(f), .. })) if f == fence));
        assert_eq!(sim.clients[a].requests.len(), sent, "{dialect:?}: a reentrant hold sent a request");
        sim.release(a, lease);
        sim.run_for(ms(10));
        assert_eq!(sim.server.live(sim.now, "mutex/re").len(), 1, "{dialect:?}: the first release deleted the row");
        sim.release(a, lease);
        sim.run_for(ms(10));
        assert!(sim.server.live(sim.now, "mutex/re").is_empty(), "{dialect:?}: the last release left the row");
    }
}

// Readers hold together; a writer waits for them and holds alone; a reader after a queued
// writer waits behind it. A semaphore of 2 grants two and queues the third.
#[test]
fn readers_share_writers_wait_and_semaphores_count_permits() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 3, quiet());
        let cs = sim.add_clients(4);
        let opts = LockOptions::renewed_lease(Duration::from_secs(30));
        let read = Primitive::Read { writers_first: true };
        let r1 = sim.acquire_primitive(cs[0], "rw", &read, &opts, Wait::Forever);
        let r2 = sim.acquire_primitive(cs[1], "rw", &read, &opts, Wait::Forever);
        let (_, l1, _) = grant(&mut sim, cs[0], r1, ms(100));
        let (_, l2, _) = grant(&mut sim, cs[1], r2, ms(100));
        let w = sim.acquire_primitive(cs[2], "rw", &Primitive::Write, &opts, Wait::Forever);
        sim.run_for(ms(20));
        let r3 = sim.acquire_primitive(cs[3], "rw", &read, &opts, Wait::Forever);
        sim.run_for(ms(50));
        assert!(sim.granted(cs[2], w).is_none() && sim.granted(cs[3], r3).is_none(), "{dialect:?}: writer or late reader granted early");
        sim.release(cs[0], l1);
        sim.release(cs[1], l2);
        // MySQL's model cannot block a doorbell wait: the writer re-checks by timer then.
        let (_, lw, _) = grant(&mut sim, cs[2], w, Duration::from_secs(4));
        sim.run_for(ms(50));
        assert!(sim.granted(cs[3], r3).is_none(), "{dialect:?}: a reader passed the writer");
        sim.release(cs[2], lw);
        grant(&mut sim, cs[3], r3, Duration::from_secs(4));

        let sem = Primitive::Semaphore { permits: 2 };
        let ops: Vec<OpId> = cs[..3].iter().map(|&c| sim.acquire_primitive(c, "s", &sem, &opts, Wait::Forever)).collect();
        sim.run_for(ms(100));
        let granted = cs[..3].iter().zip(&ops).filter(|(c, op)| sim.granted(**c, **op).is_some()).count();
        assert_eq!(granted, 2, "{dialect:?}: a semaphore of 2 granted {granted}");
    }
}

// An election's leader is its first row: observers read its value and its term, the row id
// (its fencing token); a second candidate waits and leads once the first resigns.
#[test]
fn election_observe_reads_value_and_term() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 4, quiet());
        let [a, b, o]: [ClientId; 3] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let opts = LockOptions::renewed_lease(Duration::from_secs(30));
        let ea = sim.acquire_primitive(a, "e", &Primitive::Leader { value: "10.0.0.1:80".into() }, &opts, Wait::Forever);
        let (_, la, term_a) = grant(&mut sim, a, ea, ms(100));
        let eb = sim.acquire_primitive(b, "e", &Primitive::Leader { value: "10.0.0.2:80".into() }, &opts, Wait::Forever);
        sim.run_for(ms(20));
        let obs = sim.observe_leader(o, "e");
        sim.run_for(ms(20));
        let Some((_, Done::Observed(Some(LeaderInfo { value, term, remaining })))) = sim.done(o, obs) else {
            panic!("{dialect:?}: no leader observed: {:?}", sim.done(o, obs));
        };
        assert_eq!((value.as_str(), term), ("10.0.0.1:80", term_a), "{dialect:?}");
        assert!(remaining > Duration::from_secs(29), "{dialect:?}: {remaining:?}");
        sim.release(a, la);
        let (_, _, term_b) = grant(&mut sim, b, eb, Duration::from_secs(4));
        assert!(term_b > term_a);
        let obs = sim.observe_leader(o, "e");
        sim.run_for(ms(20));
        assert!(matches!(sim.done(o, obs), Some((_, Done::Observed(Some(LeaderInfo { term, .. })))) if term == term_b));
    }
}

// A reply lost after the acquire transaction ran: the retry finds its own row (same owner,
// same id) instead of queueing a second one, and is granted with that id.
#[test]
fn a_lost_reply_is_adopted_by_the_retry() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 5, quiet());
        let a = sim.add_client();
        sim.run_for(ms(20));
        // Open the session first, so the lost reply is the acquire's.
        let warm = sim.acquire(a, "warm", &LockOptions::renewed_lease(Duration::from_secs(5)), Wait::Forever);
        let (_, wl, _) = grant(&mut sim, a, warm, ms(100));
        sim.release(a, wl);
        sim.run_for(ms(20));
        sim.isolated.insert(a, sim::Isolation::DropReplies);
        let op = sim.acquire(a, "lost", &LockOptions::renewed_lease(Duration::from_secs(5)), Wait::Forever);
        sim.run_for(ms(5));
        sim.isolated.remove(&a);
        let adopted = sim.server.stats.adopted;
        let (_, _, fence) = grant(&mut sim, a, op, Duration::from_secs(2));
        assert!(sim.server.stats.adopted > adopted, "{dialect:?}: the retry did not find its row");
        let rows = sim.server.live(sim.now, "mutex/lost");
        assert_eq!(rows.len(), 1, "{dialect:?}: {rows:?}");
        assert_eq!(rows[0].id as u64, fence, "{dialect:?}");
    }
}

// A crashed holder's row lives until its expiry on the server's clock, not longer: the waiter
// is granted after the crashed holder's lease (not before: it never held the row), within a
// timer re-check of it.
#[test]
fn a_crashed_holders_row_expires_by_the_servers_clock() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 6, quiet());
        let [a, b]: [ClientId; 2] = [sim.add_client(), sim.add_client()];
        let opts = LockOptions::renewed_lease(ms(1500));
        let op = sim.acquire(a, "crash", &opts, Wait::Forever);
        let (granted, _, fence) = grant(&mut sim, a, op, ms(100));
        let wait = sim.acquire(b, "crash", &opts, Wait::Forever);
        sim.run_for(ms(50));
        sim.crash(a);
        let row = sim.server.live(sim.now, "mutex/crash").into_iter().find(|r| r.client == a).expect("a's row");
        let (at, _, f) = grant(&mut sim, b, wait, Duration::from_secs(3));
        assert!(at >= row.expires, "{dialect:?}: granted at {at:?} before the crashed holder's row expired at {:?}", row.expires);
        assert!(at <= row.expires + ms(600), "{dialect:?}: granted {:?} after the expiry", at.saturating_duration_since(row.expires));
        assert!(f > fence && granted < at);
    }
}

// A waiter that crashed keeps its place only until its row's entry lease runs out: the one
// behind it is granted after that, and the dead row is reaped.
#[test]
fn a_dead_waiters_row_expires_and_is_skipped() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 7, quiet());
        let [a, b, c]: [ClientId; 3] = [sim.add_client(), sim.add_client(), sim.add_client()];
        let opts = LockOptions { entry_ttl: ms(600), ..LockOptions::renewed_lease(Duration::from_secs(30)) };
        let op = sim.acquire(a, "dead", &opts, Wait::Forever);
        let (_, la, _) = grant(&mut sim, a, op, ms(100));
        let _wb = sim.acquire(b, "dead", &opts, Wait::Forever);
        sim.run_for(ms(20));
        let wc = sim.acquire(c, "dead", &opts, Wait::Forever);
        sim.run_for(ms(20));
        sim.crash(b);
        let dead = sim.server.live(sim.now, "mutex/dead").into_iter().find(|r| r.client == b).expect("b's row");
        sim.release(a, la);
        let (at, _, _) = grant(&mut sim, c, wc, Duration::from_secs(2));
        assert!(at >= dead.expires, "{dialect:?}: granted at {at:?} while the dead waiter's row lived until {:?}", dead.expires);
        assert!(at <= dead.expires + ms(300), "{dialect:?}: granted {:?} after the dead row expired", at.saturating_duration_since(dead.expires));
        sim.run_for(ms(50));
        let left: Vec<_> = sim.server.rows().into_iter().filter(|r| r.client == b).collect();
        assert!(left.is_empty() || left.iter().all(|r| r.expires <= sim.now), "{dialect:?}: the dead waiter's row lives on: {left:?}");
    }
}

// A release deletes its own row only: another owner's release of the same name leaves the
// holder's row; a release after the row expired reports it was not held.
#[test]
fn releases_delete_only_their_own_row() {
    for dialect in both() {
        let mut db = sim::sql::SimSql::new(dialect);
        let now = Instant::default();
        let mut pushes = Vec::new();
        assert!(db.perform(now, 0, &SqlOp::Probe, &mut pushes).is_err());
        db.perform(now, 0, &SqlOp::CreateSchema, &mut pushes).unwrap();
        let target = lockgate_core::backend::sql::SqlTarget::new("own", &Primitive::Mutex).unwrap();
        let acquire = SqlOp::Acquire(target.acquire("aaaa", ms(1000), ms(500)));
        db.perform(now, 0, &acquire, &mut pushes).unwrap();
        let other = SqlOp::Release { lock_key: "mutex/own".into(), owner: "bbbb".into() };
        assert_eq!(db.perform(now, 1, &other, &mut pushes).unwrap(), SqlReply::Released { deleted: false, was_held: false });
        assert_eq!(db.live(now, "mutex/own").len(), 1);
        let mine = SqlOp::Release { lock_key: "mutex/own".into(), owner: "aaaa".into() };
        let later = now + ms(1500);
        assert_eq!(db.perform(later, 0, &mine, &mut pushes).unwrap(), SqlReply::Released { deleted: true, was_held: false });
        let renew = SqlOp::Renew { id: 1, owner: "aaaa".into(), ttl_ms: 1000 };
        assert_eq!(db.perform(later, 0, &renew, &mut pushes).unwrap(), SqlReply::Renewed { renewed: false });
    }
}

// A client that closes deletes its rows (held and queued) at once: the next waiter is granted
// without waiting for any expiry.
#[test]
fn closing_deletes_the_clients_rows() {
    for dialect in both() {
        let mut sim = Sim::sql(dialect, 8, quiet());
        let [a, b]: [ClientId; 2] = [sim.add_client(), sim.add_client()];
        let opts = LockOptions::renewed_lease(Duration::from_secs(30));
        let x = sim.acquire(a, "x", &opts, Wait::Forever);
        grant(&mut sim, a, x, ms(100));
        let wb = sim.acquire(b, "x", &opts, Wait::Forever);
        sim.run_for(ms(20));
        let ya = sim.acquire(a, "y", &opts, Wait::Forever);
        grant(&mut sim, a, ya, ms(100));
        sim.shutdown(a);
        grant(&mut sim, b, wb, Duration::from_secs(4));
        sim.run_for(ms(50));
        let left: Vec<_> = sim.server.rows().into_iter().filter(|r| r.client == a).collect();
        assert!(left.is_empty(), "{dialect:?}: the closed client left {left:?}");
        assert!(sim.clients[a].engine.is_idle(), "{dialect:?}");
    }
}

// Behind PgBouncer in transaction mode LISTEN receives nothing: the session open's notification
// to itself never arrives, and a waiting acquire fails with UNSUPPORTED saying why.
#[test]
fn notifications_that_never_arrive_are_refused() {
    let mut sim = Sim::sql(Dialect::Postgres, 9, quiet());
    sim.server.notify_works = false;
    let a = sim.add_client();
    let op = sim.acquire(a, "pooled", &LockOptions::renewed_lease(Duration::from_secs(5)), Wait::Forever);
    run_until(&mut sim, Duration::from_secs(2), "the refusal", |s| s.done(a, op).is_some());
    let Some((_, Done::Failed(e))) = sim.done(a, op) else { panic!("{:?}", sim.done(a, op)) };
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.message().contains("PgBouncer"), "{e}");
}

/// A MySQL engine driven by hand.
struct Hand {
    engine: LockEngine<SqlBackend>,
    now: Instant,
}

impl Hand {
    fn mysql() -> Hand {
        let config = SqlConfig::new(Schema::default_for(Dialect::MySql));
        Hand { engine: LockEngine::with_backend(SqlBackend::new(config), Box::new(SeededRandom::new(1))), now: Instant::default() }
    }

    fn postgres() -> Hand {
        let config = SqlConfig::new(Schema::default_for(Dialect::Postgres));
        Hand { engine: LockEngine::with_backend(SqlBackend::new(config), Box::new(SeededRandom::new(1))), now: Instant::default() }
    }

    /// PostgreSQL's session open: the probe, `LISTEN`, the notification to itself arriving,
    /// the confirmation; returns the acquire's request.
    fn open_postgres(&mut self) -> SqlRequest {
        let probe = self.requests().pop().expect("a probe");
        assert_eq!(probe.op, SqlOp::Probe);
        self.engine.handle_reply(self.now, probe.id, Ok(SqlReply::Done));
        let listen = self.requests().pop().expect("a listen");
        assert_eq!(listen.op, SqlOp::Listen);
        self.engine.handle_reply(self.now, listen.id, Ok(SqlReply::Done));
        let notify = self.requests().pop().expect("the notification to itself");
        let SqlOp::NotifySelf { payload } = notify.op.clone() else { panic!("{notify:?}") };
        self.engine.handle_reply(self.now, notify.id, Ok(SqlReply::Done));
        self.engine.handle_notice(self.now, SqlNotice::Notified { channel: "lockgate_wake".into(), payload });
        self.confirm()
    }

    fn requests(&mut self) -> Vec<SqlRequest> {
        std::iter::from_fn(|| self.engine.poll_request()).collect()
    }

    /// Answers the session open (the table exists) and returns the acquire's request.
    fn open(&mut self) -> SqlRequest {
        let probe = self.requests().pop().expect("a probe");
        assert_eq!(probe.op, SqlOp::Probe);
        self.engine.handle_reply(self.now, probe.id, Ok(SqlReply::Done));
        self.confirm()
    }

    /// Answers the session open's confirmation and returns the acquire's request.
    fn confirm(&mut self) -> SqlRequest {
        let ping = self.requests().pop().expect("the session's confirmation");
        self.engine.handle_reply(self.now, ping.id, Ok(SqlReply::Done));
        let mut reqs = self.requests();
        assert_eq!(reqs.len(), 1, "{reqs:?}");
        reqs.pop().unwrap()
    }
}

fn row(id: i64, owner: &str, remaining_ms: i64) -> lockgate_core::backend::sql::EntryRow {
    lockgate_core::backend::sql::EntryRow {
        id,
        owner: owner.into(),
        kind: Some(lockgate_core::backend::sql::EntryKind::Mutex),
        permits: 1,
        value: None,
        remaining_ms,
    }
}

// MySQL: a queued waiter blocks on its predecessor's doorbell on a wait connection, capped at a
// third of its entry lease (one second while more waiters than wait connections queue); the doorbell ringing re-checks it at once; a doorbell found free
// while the predecessor's row lives on (its client reconnected) is not waited on again: the
// row is waited out by timer.
#[test]
fn mysql_waiters_block_on_their_predecessors_doorbell() {
    let mut h = Hand::mysql();
    let opts = LockOptions { entry_ttl: Duration::from_secs(9), ..LockOptions::renewed_lease(Duration::from_secs(30)) };
    let op = h.engine.acquire(h.now, "m", &opts, Wait::Forever).unwrap();
    let attempt = h.open();
    let SqlOp::Acquire(a) = &attempt.op else { panic!("{attempt:?}") };
    let me = a.owner.clone();
    let rows = vec![row(3, "pred", 20_000), row(4, &me, 9_000)];
    h.engine.handle_reply(h.now, attempt.id, Ok(SqlReply::Entries { rows: rows.clone() }));
    let waits = h.requests();
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0].op, SqlOp::WaitDoorbell { owner: "pred".into(), timeout_secs: 3 });
    assert_eq!(waits[0].op.render(&Schema::default_for(Dialect::MySql)).conn, Conn::Wait);
    // The predecessor released: the doorbell rings, the waiter re-checks at once.
    h.now = h.now + ms(100);
    h.engine.handle_reply(h.now, waits[0].id, Ok(SqlReply::Rang { rang: true }));
    let again = h.requests();
    // A re-check of a known row: no insert transaction.
    assert!(matches!(again.as_slice(), [r] if matches!(r.op, SqlOp::Check(_))), "{again:?}");
    // Yet its row lives on: no second wait on that doorbell (it would ring at once, forever).
    h.engine.handle_reply(h.now, again[0].id, Ok(SqlReply::Entries { rows }));
    assert!(h.requests().is_empty(), "waited again on a doorbell that rang while its row lived");
    // The timer re-checks at the cap (a third of the entry lease), and the grant comes.
    h.now = h.now + Duration::from_secs(3) + ms(1);
    h.engine.handle_timeout(h.now);
    // Beside it, the client's batched refresh of its waiter's row (due a third of the entry
    // lease after the last write too) with the watch of the row it waits behind, on the
    // refresh connection.
    let (refresh, recheck): (Vec<SqlRequest>, Vec<SqlRequest>) = h.requests().into_iter().partition(|r| matches!(r.op, SqlOp::Refresh { .. }));
    assert!(matches!(refresh.as_slice(), [r] if r.op == SqlOp::Refresh { groups: vec![(9000, vec![4])], watch: vec![3] }), "{refresh:?}");
    assert_eq!(refresh[0].op.render(&Schema::default_for(Dialect::MySql)).conn, Conn::Refresh);
    assert!(matches!(recheck.as_slice(), [r] if matches!(r.op, SqlOp::Check(_))), "{recheck:?}");
    h.engine.handle_reply(h.now, recheck[0].id, Ok(SqlReply::Entries { rows: vec![row(4, &me, 30_000)] }));
    let ev = h.engine.poll_event();
    assert!(matches!(ev, Some(lockgate_core::Event::Completed { op: o, outcome: Done::Acquired { fencing_token: Some(4), .. } }) if o == op), "{ev:?}");
    // The main connection was replaced: its doorbells are taken again.
    h.engine.handle_notice(h.now, SqlNotice::Reconnected { conn: Conn::Main });
    let retake = h.requests();
    assert!(matches!(retake.as_slice(), [r] if r.op == SqlOp::TakeDoorbells { owners: vec![me.clone()] }), "{retake:?}");
}

// A statement timeout set by a DBA (PostgreSQL 57014, MySQL 1205/3024) ends an acquire at once
// with TIMEOUT naming the server's limit; a deadlock or serialization victim is sent again at
// once by the backend (the server rolled it back), so no caller sees it, not even a one-shot.
#[test]
fn a_dbas_statement_timeout_ends_the_acquire_and_a_deadlock_is_retried() {
    for (code, retried) in [("57014", false), ("3024", false), ("1213", true), ("40P01", true)] {
        let mut h = Hand::mysql();
        let op = h.engine.acquire(h.now, "t", &LockOptions::renewed_lease(Duration::from_secs(5)), Wait::Forever).unwrap();
        let attempt = h.open();
        let failure = SqlFailure::Server { code: code.into(), message: "canceling statement due to statement timeout".into() };
        h.engine.handle_reply(h.now, attempt.id, Err(failure));
        if retried {
            let again = h.requests();
            assert!(matches!(again.as_slice(), [r] if r.op == attempt.op), "{code}: not sent again at once: {again:?}");
            assert!(h.engine.poll_event().is_none(), "{code}: a caller saw the deadlock");
        } else {
            // The caller is told once the attempt's row is deleted (nothing left on return).
            assert!(h.engine.poll_event().is_none(), "{code}: told before its row was deleted");
            let undo = h.requests();
            assert!(matches!(undo.as_slice(), [r] if matches!(r.op, SqlOp::Release { .. })), "{code}: {undo:?}");
            h.engine.handle_reply(h.now, undo[0].id, Ok(SqlReply::Released { deleted: true, was_held: false }));
            let ev = std::iter::from_fn(|| h.engine.poll_event()).find(|e| matches!(e, lockgate_core::Event::Completed { op: o, .. } if *o == op));
            let Some(lockgate_core::Event::Completed { outcome: Done::Failed(e), .. }) = ev else { panic!("{code}: {ev:?}") };
            assert_eq!(e.kind(), ErrorKind::Timeout, "{code}: {e}");
            assert!(e.message().contains("timeout set on the server") && e.message().contains(code), "{e}");
        }
    }
    // A one-shot attempt that lost a deadlock is sent again, not failed with CONNECTION.
    let mut h = Hand::mysql();
    let op = h.engine.acquire(h.now, "t", &LockOptions::renewed_lease(Duration::from_secs(5)), Wait::Try).unwrap();
    let attempt = h.open();
    for _ in 0..3 {
        let failure = SqlFailure::Server { code: "1213".into(), message: "Deadlock found when trying to get lock".into() };
        let id = h.requests().pop().map_or(attempt.id, |r| r.id);
        h.engine.handle_reply(h.now, id, Err(failure));
        assert!(h.engine.poll_event().is_none(), "a one-shot attempt failed on a deadlock");
    }
    let last = h.requests().pop().expect("sent again");
    let SqlOp::Acquire(a) = &last.op else { panic!("{last:?}") };
    h.engine.handle_reply(h.now, last.id, Ok(SqlReply::Entries { rows: vec![row(8, &a.owner, 5000)] }));
    let ev = std::iter::from_fn(|| h.engine.poll_event()).find(|e| matches!(e, lockgate_core::Event::Completed { op: o, .. } if *o == op));
    assert!(matches!(ev, Some(lockgate_core::Event::Completed { outcome: Done::Acquired { fencing_token: Some(8), .. }, .. })), "{ev:?}");
}

// One client's acquires on one name insert in call order even when the first loses a deadlock
// (the burst of issue 23 item 6 on MariaDB): a later insert on the name waits until the earlier
// one is answered for good, so the earlier one's re-run cannot go out behind it and take a
// later row id. An insert on another name is not held.
#[test]
fn a_deadlocked_insert_is_sent_again_before_the_clients_later_inserts_on_its_name() {
    for mut h in [Hand::mysql(), Hand::postgres()] {
        let postgres = h.engine.backend().config().dialect() == Dialect::Postgres;
        let opts = LockOptions::renewed_lease(Duration::from_secs(30));
        let first = h.engine.acquire(h.now, "burst", &opts, Wait::Forever).unwrap();
        let attempt = if postgres { h.open_postgres() } else { h.open() };
        let SqlOp::Acquire(a) = &attempt.op else { panic!("{attempt:?}") };
        let first_owner = a.owner.clone();
        let second = h.engine.acquire(h.now, "burst", &opts, Wait::Forever).unwrap();
        let other = h.engine.acquire(h.now, "elsewhere", &opts, Wait::Forever).unwrap();
        let sent = h.requests();
        assert!(
            matches!(sent.as_slice(), [r] if matches!(&r.op, SqlOp::Acquire(o) if o.lock_key == "mutex/elsewhere")),
            "an insert went out while an earlier one on its name was unanswered: {sent:?}"
        );
        // Twice a deadlock victim: each re-run is the only request out.
        let mut on_wire = attempt.id;
        for _ in 0..2 {
            let failure = SqlFailure::Server { code: "1213".into(), message: "Deadlock found when trying to get lock".into() };
            h.engine.handle_reply(h.now, on_wire, Err(failure));
            let again = h.requests();
            assert!(matches!(again.as_slice(), [r] if r.op == attempt.op), "a later insert went out beside the re-run: {again:?}");
            on_wire = again[0].id;
        }
        h.now = h.now + ms(1);
        h.engine.handle_reply(h.now, on_wire, Ok(SqlReply::Entries { rows: vec![row(7, &first_owner, 30_000)] }));
        let next = h.requests();
        let [r] = next.as_slice() else { panic!("the second insert did not follow the first's answer: {next:?}") };
        let SqlOp::Acquire(b) = &r.op else { panic!("{r:?}") };
        assert!(b.lock_key == "mutex/burst" && b.owner != first_owner, "{r:?}");
        let events: Vec<_> = std::iter::from_fn(|| h.engine.poll_event()).collect();
        assert!(
            events.iter().any(|e| matches!(e, lockgate_core::Event::Completed { op, outcome: Done::Acquired { .. } } if *op == first)),
            "{events:?}"
        );
        let _ = (second, other);
    }
}

// PostgreSQL: the notification of the predecessor's deletion (listening connection) overtakes
// the reply of the waiter's attempt that read it as live (main connection): the waiter
// re-checks at once instead of waiting for its capped re-check; a notification of an id it
// does not wait behind changes nothing.
#[test]
fn a_notification_that_overtakes_the_attempts_reply_rechecks_at_once() {
    let mut h = Hand::postgres();
    let opts = LockOptions { entry_ttl: Duration::from_secs(9), ..LockOptions::renewed_lease(Duration::from_secs(30)) };
    let op = h.engine.acquire(h.now, "m", &opts, Wait::Forever).unwrap();
    let attempt = h.open_postgres();
    let SqlOp::Acquire(a) = &attempt.op else { panic!("{attempt:?}") };
    let me = a.owner.clone();
    let notify = |h: &mut Hand, id: i64| {
        let n = SqlNotice::Notified { channel: "lockgate_wake".into(), payload: id.to_string() };
        h.engine.handle_notice(h.now, n);
    };
    // The predecessor (row 3) is deleted and notified while the attempt is on the wire.
    h.now = h.now + ms(5);
    notify(&mut h, 3);
    notify(&mut h, 1);
    assert!(h.requests().is_empty(), "nothing waits yet");
    h.now = h.now + ms(5);
    h.engine.handle_reply(h.now, attempt.id, Ok(SqlReply::Entries { rows: vec![row(2, "holder", 20_000), row(3, "pred", 20_000), row(4, &me, 9_000)] }));
    let again = h.requests();
    assert!(matches!(again.as_slice(), [r] if matches!(r.op, SqlOp::Check(_))), "not re-checked at once: {again:?}");
    // Now it waits behind the holder (row 2): an unrelated id's notification does nothing.
    h.engine.handle_reply(h.now, again[0].id, Ok(SqlReply::Entries { rows: vec![row(2, "holder", 20_000), row(4, &me, 9_000)] }));
    notify(&mut h, 7);
    assert!(h.requests().is_empty(), "woken by a row it does not wait behind");
    // The holder's release is notified: re-checked at once, and granted.
    notify(&mut h, 2);
    let woken = h.requests();
    assert!(matches!(woken.as_slice(), [r] if matches!(r.op, SqlOp::Check(_))), "{woken:?}");
    h.engine.handle_reply(h.now, woken[0].id, Ok(SqlReply::Entries { rows: vec![row(4, &me, 30_000)] }));
    let ev = h.engine.poll_event();
    assert!(matches!(ev, Some(lockgate_core::Event::Completed { op: o, outcome: Done::Acquired { fencing_token: Some(4), .. } }) if o == op), "{ev:?}");
}

// The heartbeat's watch (issue 23 item 6): while the client's refreshes read the row a waiter
// waits behind as live (its own client refreshing it), the waiter's timed re-check gets no
// round trip, also past the expiry its own re-check last read — a burst's waiters would
// otherwise each look once per entry lease, hundreds of re-checks a second. A predecessor the
// heartbeat no longer finds live (released, or dead by the server's clock) wakes it at once.
#[test]
fn the_heartbeat_stands_in_for_timed_rechecks_while_the_predecessor_lives() {
    for mut h in [Hand::postgres(), Hand::mysql()] {
        let postgres = h.engine.backend().config().dialect() == Dialect::Postgres;
        let opts = LockOptions { entry_ttl: Duration::from_secs(4), ..LockOptions::renewed_lease(Duration::from_secs(30)) };
        let op = h.engine.acquire(h.now, "m", &opts, Wait::Forever).unwrap();
        let attempt = if postgres { h.open_postgres() } else { h.open() };
        let SqlOp::Acquire(a) = &attempt.op else { panic!("{attempt:?}") };
        let me = a.owner.clone();
        h.engine.handle_reply(h.now, attempt.id, Ok(SqlReply::Entries { rows: vec![row(3, "pred", 4000), row(4, &me, 4000)] }));
        // MySQL: its doorbell wait on the predecessor stays on the wire (it never rings here).
        let waits = h.requests();
        assert!(waits.iter().all(|r| matches!(r.op, SqlOp::WaitDoorbell { .. })) && waits.len() == usize::from(!postgres), "{waits:?}");
        // Ten seconds, two and a half times the predecessor's expiry as first read: every
        // heartbeat reads it live again with its refreshed lease, and nothing else is sent.
        let mut heartbeats = 0;
        for _ in 0..100 {
            h.now = h.now + ms(100);
            h.engine.handle_timeout(h.now);
            for r in h.requests() {
                let SqlOp::Refresh { groups, watch } = &r.op else { panic!("{}: sent {r:?} while its predecessor lived", if postgres { "PostgreSQL" } else { "MySQL" }) };
                assert_eq!((groups.as_slice(), watch.as_slice()), (&[(4000, vec![4])][..], &[3][..]));
                heartbeats += 1;
                h.engine.handle_reply(h.now, r.id, Ok(SqlReply::Refreshed { count: 1, live: vec![(3, 3900)] }));
            }
        }
        assert!((6..=8).contains(&heartbeats), "{heartbeats} heartbeats in 10 s (one a third of the entry lease)");
        // The predecessor released: the next heartbeat does not find it, and the waiter looks
        // at once (granted).
        let r = loop {
            h.now = h.now + ms(100);
            h.engine.handle_timeout(h.now);
            if let Some(r) = h.requests().pop() {
                break r;
            }
        };
        assert!(matches!(r.op, SqlOp::Refresh { .. }), "{r:?}");
        h.engine.handle_reply(h.now, r.id, Ok(SqlReply::Refreshed { count: 1, live: vec![] }));
        let woken = h.requests();
        assert!(matches!(woken.as_slice(), [c] if matches!(c.op, SqlOp::Check(_))), "not woken by the heartbeat: {woken:?}");
        h.engine.handle_reply(h.now, woken[0].id, Ok(SqlReply::Entries { rows: vec![row(4, &me, 30_000)] }));
        let ev = std::iter::from_fn(|| h.engine.poll_event()).find(|e| matches!(e, lockgate_core::Event::Completed { .. }));
        assert!(matches!(ev, Some(lockgate_core::Event::Completed { op: o, outcome: Done::Acquired { fencing_token: Some(4), .. } }) if o == op), "{ev:?}");
    }
}
