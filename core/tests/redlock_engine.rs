//! The Redlock engine in virtual time against simulated masters (each a key map with expiries,
//! an uptime and a reply delay): quorum, validity minus drift, late replies, dead and
//! restarted masters, extend without re-acquire, renewal and loss. Live masters are in
//! `redis_redlock.rs`.

use std::collections::HashMap;

use lockgate_core::backend::redlock::scripts as scripts;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redlock::{RedlockConfig, RedlockEngine, RedlockOutcome};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{random::SeededRandom, Error, ErrorKind, Event, LeaseId, LockOptions, OpId, RequestId, Wait};

const MS: Duration = Duration::from_millis(1);

struct Master {
    up: bool,
    started: Instant,
    keys: HashMap<String, (String, Instant)>,
    /// Every script is in its cache (a master up since before the test).
    cached: bool,
    /// Scripts loaded one by one with EVAL since it lost its cache.
    loaded: Vec<&'static str>,
    /// How long its replies take to come back.
    delay: Duration,
}

impl Master {
    fn run(&mut self, now: Instant, args: &[Vec<u8>], max_lease_of_test: Duration) -> Reply {
        let s = |i: usize| String::from_utf8(args[i].clone()).unwrap();
        let (name, body) = (s(0), s(1));
        let script = if name == "EVAL" {
            let script = scripts::all().into_iter().find(|x| x.source == body).expect("known script");
            self.loaded.push(script.name);
            script
        } else {
            let script = scripts::all().into_iter().find(|x| x.sha1() == body).expect("known digest");
            if !self.cached && !self.loaded.contains(&script.name) {
                return Reply::Error("NOSCRIPT No matching script.".into());
            }
            script
        };
        // EVAL[SHA] body numkeys KEYS.. ARGV..: the lock key first (its label key is not modelled).
        let keys: usize = s(2).parse().unwrap();
        let arg = |i: usize| s(2 + keys + i);
        let (key, token) = (s(3), arg(1));
        self.keys.retain(|_, (_, exp)| *exp > now);
        let held = self.keys.get(&key).map(|(t, _)| t.clone());
        match script.name {
            "REDLOCK_ACQUIRE" => {
                let lease: u64 = arg(2).parse().unwrap();
                let max: u64 = arg(3).parse().unwrap();
                assert_eq!(max, max_lease_of_test.as_millis() as u64);
                let up_s = now.saturating_duration_since(self.started).as_secs();
                if up_s * 1000 < max + 1000 {
                    return Reply::Int(-1);
                }
                if let Some(held) = held {
                    // The master count after the last ':' of both values (PROTOCOL.md §8).
                    let count = |v: &str| v.rsplit_once(':').map(|(_, n)| n.to_string()).filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                    return match (count(&held), count(&token)) {
                        (Some(theirs), Some(ours)) if theirs != ours => Reply::Array(vec![Reply::Int(-2), Reply::Data(theirs.into_bytes())]),
                        _ => Reply::Int(0),
                    };
                }
                self.keys.insert(key, (token, now + Duration::from_millis(lease)));
                Reply::Int(1)
            }
            "REDLOCK_EXTEND" => {
                let ms: u64 = arg(2).parse().unwrap();
                if held.as_deref() == Some(token.as_str()) {
                    self.keys.insert(key, (token, now + Duration::from_millis(ms)));
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
            "REDLOCK_RELEASE" => {
                if held.as_deref() == Some(token.as_str()) {
                    self.keys.remove(&key);
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
            other => panic!("unexpected script {other}"),
        }
    }

    fn holder(&self, now: Instant, key: &str) -> Option<String> {
        self.keys.get(key).filter(|(_, e)| *e > now).map(|(t, _)| t.clone())
    }
}

struct Sim {
    now: Instant,
    masters: Vec<Master>,
    clients: Vec<RedlockEngine>,
    /// (deliver at, client, request, reply)
    replies: Vec<(Instant, usize, RequestId, Result<Reply, Error>)>,
    events: Vec<(usize, Event<RedlockOutcome>)>,
    max_lease: Duration,
}

fn config(masters: usize) -> RedlockConfig {
    RedlockConfig {
        masters,
        max_lease: Duration::from_secs(10),
        retry_delay: 20 * MS,
        retry_jitter: 20 * MS,
        ..RedlockConfig::default()
    }
}

impl Sim {
    fn new(masters: usize, clients: usize) -> Sim {
        Self::with(config(masters), clients)
    }

    fn with(cfg: RedlockConfig, clients: usize) -> Sim {
        let max_lease = cfg.max_lease;
        Sim {
            // Masters started long enough ago to grant.
            now: Instant::from_origin(Duration::from_secs(100)),
            masters: (0..cfg.masters)
                .map(|_| Master { up: true, started: Instant::default(), keys: HashMap::new(), cached: true, loaded: Vec::new(), delay: MS })
                .collect(),
            clients: (0..clients)
                .map(|i| RedlockEngine::new(cfg.clone(), Box::new(SeededRandom::new(i as u64 + 1))).unwrap())
                .collect(),
            replies: Vec::new(),
            events: Vec::new(),
            max_lease,
        }
    }

    /// Performs every request and collects every event of every client.
    fn pump(&mut self) {
        for c in 0..self.clients.len() {
            while let Some(req) = self.clients[c].poll_request() {
                let m = &mut self.masters[req.master];
                let (at, reply) = if m.up {
                    (self.now + m.delay, Ok(m.run(self.now, &req.command.0, self.max_lease)))
                } else {
                    (self.now + MS, Err(Error::new(ErrorKind::Connection, "connection refused")))
                };
                self.replies.push((at, c, req.id, reply));
            }
            while let Some(ev) = self.clients[c].poll_event() {
                self.events.push((c, ev));
            }
        }
    }

    /// Advances virtual time to `until`, delivering replies and timers in order.
    fn run_until(&mut self, until: Instant) {
        loop {
            self.pump();
            let next_reply = self.replies.iter().map(|r| r.0).min();
            let next_timer = self.clients.iter().filter_map(|c| c.poll_timeout()).min();
            let next = [next_reply, next_timer].into_iter().flatten().min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    let now = self.now;
                    let due: Vec<_> = {
                        let (due, rest) = std::mem::take(&mut self.replies).into_iter().partition(|r| r.0 <= now);
                        self.replies = rest;
                        due
                    };
                    for (_, c, id, reply) in due {
                        self.clients[c].handle_reply(now, id, reply);
                    }
                    for c in &mut self.clients {
                        c.handle_timeout(now);
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
        for c in &mut self.clients {
            c.handle_timeout(until);
        }
        self.pump();
    }

    /// Masters `which` answer after `d` from now on.
    fn answer_after(&mut self, which: std::ops::Range<usize>, d: Duration) {
        for m in &mut self.masters[which] {
            m.delay = d;
        }
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    fn acquire(&mut self, c: usize, name: &str, opts: &LockOptions, wait: Wait) -> OpId {
        let now = self.now;
        self.clients[c].acquire(now, name, opts, wait).unwrap()
    }

    /// The outcome of `op`, once it completed.
    fn outcome(&self, c: usize, op: OpId) -> Option<RedlockOutcome> {
        self.events.iter().find_map(|(i, e)| match e {
            Event::Completed { op: o, outcome } if *i == c && *o == op => Some(outcome.clone()),
            _ => None,
        })
    }

    fn lost(&self, c: usize, lease: LeaseId) -> bool {
        self.events.iter().any(|(i, e)| *i == c && matches!(e, Event::Lost { lease: l, .. } if *l == lease))
    }

    fn holders(&self, name: &str) -> usize {
        let key = scripts::key("lockgate:", name);
        self.masters.iter().filter(|m| m.holder(self.now, &key).is_some()).count()
    }
}

fn fixed(ms: u64) -> LockOptions {
    LockOptions::fixed_lease(Duration::from_millis(ms))
}

fn acquired(o: Option<RedlockOutcome>) -> (LeaseId, Instant) {
    match o {
        Some(RedlockOutcome::Acquired { lease, valid_until }) => (lease, valid_until),
        other => panic!("expected a grant, got {other:?}"),
    }
}

fn failed(o: Option<RedlockOutcome>) -> Error {
    match o {
        Some(RedlockOutcome::Failed(e)) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn grant_on_all_masters_with_validity_minus_drift() {
    let mut sim = Sim::new(5, 1);
    let sent = sim.now;
    let op = sim.acquire(0, "a", &fixed(1000), Wait::Try);
    sim.run_for(10 * MS);
    let (_, valid_until) = acquired(sim.outcome(0, op));
    // 1000 ms − (1 % of 1000 ms + 2 ms), counted from the send time.
    assert_eq!(valid_until, sent + 988 * MS);
    assert_eq!(sim.holders("a"), 5);
    assert_eq!(sim.clients[0].quorum(), 3);
}

#[test]
fn two_masters_down_still_grants_three_down_fails_cleanly() {
    let mut sim = Sim::new(5, 1);
    sim.masters[0].up = false;
    sim.masters[3].up = false;
    let op = sim.acquire(0, "a", &fixed(1000), Wait::Try);
    sim.run_for(100 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    let rel = sim.clients[0].release(sim.now, lease);
    sim.run_for(100 * MS);
    assert_eq!(sim.outcome(0, rel), Some(RedlockOutcome::Released { was_held: true }));

    sim.masters[4].up = false;
    let op = sim.acquire(0, "a", &fixed(1000), Wait::Try);
    sim.run_for(100 * MS);
    let e = failed(sim.outcome(0, op));
    assert_eq!(e.kind(), ErrorKind::Connection, "{e:?}");
    assert!(e.message().contains("2 of 5 masters granted, 3 are needed"), "{}", e.message());
    assert_eq!(sim.holders("a"), 0, "the two grants were undone");

    // A wait retries until its deadline and then gives up, leaving nothing behind: with
    // CONNECTION carrying the last attempt's failure (too few masters answered), not TIMEOUT,
    // since nobody was seen holding the lock (issue 23 item 7).
    let op = sim.acquire(0, "a", &fixed(1000), Wait::For(300 * MS));
    sim.run_for(400 * MS);
    let e = failed(sim.outcome(0, op));
    assert_eq!(e.kind(), ErrorKind::Connection, "{e:?}");
    assert!(e.message().contains("2 of 5 masters granted, 3 are needed"), "{}", e.message());
    assert_eq!(sim.holders("a"), 0);
    assert!(sim.clients[0].is_idle());
}

#[test]
fn replies_after_the_validity_never_count_as_a_grant() {
    let mut sim = Sim::with(RedlockConfig { node_timeout: Duration::from_secs(5), ..config(5) }, 1);
    // Three masters grant at once but answer 600 ms later; the lease is 500 ms.
    for m in 0..3 {
        sim.masters[m].delay = 600 * MS;
    }
    sim.masters[3].up = false;
    sim.masters[4].up = false;
    let op = sim.acquire(0, "late", &fixed(500), Wait::Try);
    // Told once the release of the late grants is answered (600 ms more).
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.outcome(0, op), None, "told before the late grants were released");
    sim.run_for(Duration::from_secs(1));
    let e = failed(sim.outcome(0, op));
    assert_eq!(e.kind(), ErrorKind::Connection);
    assert!(e.message().contains("after the lease's validity had run out"), "{}", e.message());

    // Answers just inside the validity do count, with validity measured from the send.
    let mut sim = Sim::with(RedlockConfig { node_timeout: Duration::from_secs(5), ..config(3) }, 1);
    for m in &mut sim.masters {
        m.delay = 480 * MS;
    }
    let sent = sim.now;
    let op = sim.acquire(0, "late", &fixed(500), Wait::Try);
    sim.run_for(Duration::from_secs(1));
    let (_, valid_until) = acquired(sim.outcome(0, op));
    assert_eq!(valid_until, sent + 493 * MS);
}

#[test]
fn silent_masters_count_as_failed_at_the_node_timeout() {
    let mut sim = Sim::new(5, 1);
    sim.answer_after(0..3, Duration::from_secs(2));
    let op = sim.acquire(0, "slow", &fixed(5000), Wait::Try);
    // Decided at the 50 ms node timeout, long before the slow masters answer; the caller is
    // told once the release round that follows is decided too (its own node timeout).
    sim.run_for(60 * MS);
    assert_eq!(sim.outcome(0, op), None, "told before the release round was decided");
    sim.run_for(50 * MS);
    let e = failed(sim.outcome(0, op));
    assert!(e.message().contains("3 failed or silent"), "{}", e.message());
    sim.run_for(Duration::from_secs(3));
    assert_eq!(sim.holders("slow"), 0, "the late grants were undone by the queued release");
}

#[test]
fn a_release_waits_past_the_node_timeout_for_slow_answers() {
    // A busy client (Node's event loop runs due timers before it reads sockets) can read
    // answers after the 50 ms node timeout: a release still counts them, up to the response
    // timeout, instead of calling a release every master confirmed unconfirmed.
    let mut sim = Sim::new(3, 1);
    let op = sim.acquire(0, "slow-release", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    sim.answer_after(0..3, 300 * MS);
    let rel = sim.clients[0].release(sim.now, lease);
    sim.run_for(100 * MS);
    assert_eq!(sim.outcome(0, rel), None, "still waiting after the node timeout");
    sim.run_for(250 * MS);
    assert_eq!(sim.outcome(0, rel), Some(RedlockOutcome::Released { was_held: true }));
    assert_eq!(sim.holders("slow-release"), 0);

    // Past the response timeout, a master that never answers is reported, as before.
    sim.answer_after(0..3, MS);
    let op = sim.acquire(0, "silent", &fixed(5000), Wait::Try);
    sim.run_for(Duration::from_secs(1));
    let (lease, _) = acquired(sim.outcome(0, op));
    sim.answer_after(0..2, Duration::from_secs(60));
    let rel = sim.clients[0].release(sim.now, lease);
    sim.run_for(Duration::from_secs(4));
    assert_eq!(sim.outcome(0, rel), None, "waiting up to the response timeout");
    sim.run_for(Duration::from_secs(2));
    let e = failed(sim.outcome(0, rel));
    assert!(e.message().contains("not confirmed on 2 of 3 masters"), "{}", e.message());
}

#[test]
fn contenders_exclude_each_other_and_a_waiter_gets_it_after_release() {
    let mut sim = Sim::new(5, 2);
    let a = sim.acquire(0, "x", &fixed(2000), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, a));
    let b = sim.acquire(1, "x", &fixed(2000), Wait::Try);
    sim.run_for(10 * MS);
    assert_eq!(sim.outcome(1, b), Some(RedlockOutcome::NotAcquired));
    let w = sim.acquire(1, "x", &fixed(2000), Wait::For(Duration::from_secs(5)));
    sim.run_for(200 * MS);
    assert_eq!(sim.outcome(1, w), None, "still waiting");
    let _ = sim.clients[0].release(sim.now, lease);
    sim.run_for(200 * MS);
    acquired(sim.outcome(1, w));
}

#[test]
fn split_votes_fail_and_undo_so_one_contender_wins_later() {
    // Both contenders start together; masters 0-1 see A first, 2-3 see B first, 4 is down:
    // neither reaches 3, both undo and retry with jitter until one wins.
    let mut sim = Sim::new(5, 2);
    sim.masters[4].up = false;
    let key = scripts::key("lockgate:", "split");
    sim.masters[2].keys.insert(key.clone(), ("someone".into(), sim.now + 30 * MS));
    sim.masters[3].keys.insert(key, ("someone".into(), sim.now + 30 * MS));
    let a = sim.acquire(0, "split", &fixed(1000), Wait::For(900 * MS));
    let b = sim.acquire(1, "split", &fixed(1000), Wait::For(900 * MS));
    sim.run_for(950 * MS);
    let wins = [sim.outcome(0, a), sim.outcome(1, b)]
        .into_iter()
        .filter(|o| matches!(o, Some(RedlockOutcome::Acquired { .. })))
        .count();
    assert_eq!(wins, 1, "{:?}", sim.events);
}

#[test]
fn extend_needs_a_majority_and_never_reacquires() {
    let mut sim = Sim::new(5, 1);
    let op = sim.acquire(0, "e", &fixed(1000), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    let key = scripts::key("lockgate:", "e");
    // Two masters forget it: still a majority.
    sim.masters[0].keys.clear();
    sim.masters[1].keys.clear();
    let sent = sim.now;
    let ext = sim.clients[0].extend(sim.now, lease, Duration::from_secs(3)).unwrap();
    sim.run_for(10 * MS);
    assert_eq!(sim.outcome(0, ext), Some(RedlockOutcome::Extended { valid_until: sent + 2968 * MS }));
    assert!(sim.masters[0].holder(sim.now, &key).is_none(), "never re-acquired");
    // A third forgets it: the majority is gone, the extend fails and the lease is lost.
    sim.masters[2].keys.clear();
    let ext = sim.clients[0].extend(sim.now, lease, Duration::from_secs(3)).unwrap();
    sim.run_for(10 * MS);
    assert_eq!(failed(sim.outcome(0, ext)).kind(), ErrorKind::NotHeld);
    assert!(sim.lost(0, lease));
    assert_eq!(sim.holders("e"), 0, "the lost lease was removed from the rest");
}

#[test]
fn a_refused_extend_answers_once_the_lease_is_removed_from_every_master() {
    let mut sim = Sim::new(5, 1);
    let op = sim.acquire(0, "r", &fixed(4000), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    // Three masters forget it and answer at once; two still hold it and answer late.
    for m in 0..3 {
        sim.masters[m].keys.clear();
    }
    sim.answer_after(3..5, 50 * MS);
    let ext = sim.clients[0].extend(sim.now, lease, Duration::from_secs(4)).unwrap();
    sim.run_for(20 * MS);
    assert!(sim.lost(0, lease), "refused by a majority: lost at once");
    assert_eq!(sim.outcome(0, ext), None, "the caller waits for the removal from the slow masters");
    sim.run_for(200 * MS);
    assert_eq!(failed(sim.outcome(0, ext)).kind(), ErrorKind::NotHeld);
    assert_eq!(sim.holders("r"), 0);
}

#[test]
fn watchdog_renews_past_the_lease_and_signals_loss() {
    let mut sim = Sim::new(3, 1);
    let op = sim.acquire(0, "w", &LockOptions::renewed_lease(300 * MS), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    sim.run_for(Duration::from_secs(2));
    assert!(!sim.lost(0, lease));
    assert!(sim.clients[0].lease_valid_until(lease).unwrap() > sim.now);
    assert_eq!(sim.holders("w"), 3);
    // Two of three masters lose their data: the next renewal loses the lease.
    sim.masters[0].keys.clear();
    sim.masters[1].keys.clear();
    sim.run_for(200 * MS);
    assert!(sim.lost(0, lease));
    assert_eq!(sim.clients[0].lease_valid_until(lease), None);

    // Unreachable masters: renewals fail in transport and the lease is lost when its validity
    // runs out, not before.
    let op = sim.acquire(0, "w2", &LockOptions::renewed_lease(300 * MS), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, valid_until) = acquired(sim.outcome(0, op));
    sim.masters[1].up = false;
    sim.masters[2].up = false;
    sim.run_until(valid_until - MS);
    assert!(!sim.lost(0, lease));
    sim.run_for(10 * MS);
    assert!(sim.lost(0, lease));
}

#[test]
fn a_recently_restarted_master_grants_nothing_for_one_max_lease() {
    let mut sim = Sim::new(3, 2);
    let op = sim.acquire(0, "r", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    acquired(sim.outcome(0, op));
    // Two masters restart without persistence: empty, script cache gone, uptime zero.
    for m in 0..2 {
        sim.masters[m] = Master { up: true, started: sim.now, keys: HashMap::new(), cached: false, loaded: Vec::new(), delay: MS };
    }
    // The old lock is still valid on the third master only. Without the rule the two empty
    // masters would grant it to someone else: two holders.
    let other = sim.acquire(1, "r", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    assert_eq!(sim.outcome(1, other), Some(RedlockOutcome::NotAcquired));
    let op = sim.acquire(0, "r2", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    let e = failed(sim.outcome(0, op));
    assert!(e.message().contains("2 restarted less than max_lease ago"), "{}", e.message());
    // After max_lease (10 s) + 1 s they grant again (the old lease has expired by then).
    sim.run_for(Duration::from_secs(11));
    let op = sim.acquire(0, "r", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    acquired(sim.outcome(0, op));
}

#[test]
fn cancel_and_shutdown_leave_nothing_behind() {
    let mut sim = Sim::new(3, 2);
    let a = sim.acquire(0, "c", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    acquired(sim.outcome(0, a));
    let w = sim.acquire(1, "c", &fixed(5000), Wait::Forever);
    sim.run_for(100 * MS);
    let now = sim.now;
    sim.clients[1].cancel(now, w);
    sim.run_for(10 * MS);
    assert_eq!(failed(sim.outcome(1, w)).kind(), ErrorKind::Cancelled);
    let now = sim.now;
    sim.clients[0].shutdown(now);
    sim.run_for(10 * MS);
    assert_eq!(sim.holders("c"), 0);
    assert!(sim.clients[0].is_idle() && sim.clients[1].is_idle());
}

#[test]
fn bad_input_is_rejected_before_anything_is_sent() {
    for bad in [
        RedlockConfig { masters: 0, ..config(3) },
        RedlockConfig { masters: 100, ..config(3) },
        RedlockConfig { drift_factor: f64::NAN, ..config(3) },
        RedlockConfig { drift_factor: -0.1, ..config(3) },
        RedlockConfig { max_lease: Duration::ZERO, ..config(3) },
        RedlockConfig { node_timeout: Duration::ZERO, ..config(3) },
    ] {
        let e = RedlockEngine::new(bad.clone(), Box::new(SeededRandom::new(1))).err().expect("rejected");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }
    let mut sim = Sim::new(3, 1);
    let now = sim.now;
    let c = &mut sim.clients[0];
    for (name, opts) in [("", fixed(1000)), ("ok", fixed(11_000)), ("ok", fixed(0))] {
        let e = c.acquire(now, name, &opts, Wait::Try).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
    assert!(c.poll_request().is_none());
}

#[test]
fn a_master_that_lost_its_script_cache_gets_the_body() {
    let mut sim = Sim::new(3, 1);
    for m in &mut sim.masters {
        m.cached = false;
    }
    let op = sim.acquire(0, "s", &fixed(1000), Wait::Try);
    sim.run_for(10 * MS);
    acquired(sim.outcome(0, op));
    assert!(sim.masters.iter().all(|m| m.loaded.contains(&"REDLOCK_ACQUIRE")));
}


/// A request on its way: (arrive at, client, master, request, command).
type Arriving = (Instant, usize, usize, RequestId, Vec<Vec<u8>>);

/// A seeded random run: 4 clients contend for 2 names over 5 masters whose replies take 0-40 ms
/// (sometimes far longer), that crash and come back empty, while clients take fixed or renewed
/// leases, hold them for a while and release (or drop) them. At no virtual instant may two
/// clients both believe they hold the same name. Scripts run when a request arrives (FIFO per
/// client and master), so grants land anywhere between send and reply.
struct Chaos {
    rng: SeededRandom,
    now: Instant,
    masters: Vec<Master>,
    clients: Vec<RedlockEngine>,
    /// Requests not yet run by their master.
    arriving: Vec<Arriving>,
    /// (deliver at, client, request, reply)
    replies: Vec<(Instant, usize, RequestId, Result<Reply, Error>)>,
    last_arrival: HashMap<(usize, usize), Instant>,
    /// Per client: the op it waits on, or the lease it holds with its name and release time.
    state: Vec<ClientState>,
    grants: usize,
    down_until: Vec<Option<Instant>>,
}

#[derive(Clone, Debug)]
enum ClientState {
    Idle(Instant),
    Waiting(OpId, &'static str),
    Holding(LeaseId, &'static str, Instant),
}

use lockgate_core::random::RandomSource;

impl Chaos {
    fn new(seed: u64) -> Chaos {
        let cfg = RedlockConfig {
            masters: 5,
            max_lease: Duration::from_secs(2),
            node_timeout: 60 * MS,
            retry_delay: 10 * MS,
            retry_jitter: 30 * MS,
            ..RedlockConfig::default()
        };
        let start = Instant::from_origin(Duration::from_secs(100));
        Chaos {
            rng: SeededRandom::new(seed),
            now: start,
            masters: (0..5).map(|_| Master { up: true, started: Instant::default(), keys: HashMap::new(), cached: true, loaded: Vec::new(), delay: MS }).collect(),
            clients: (0..4).map(|i| RedlockEngine::new(cfg.clone(), Box::new(SeededRandom::new(seed * 31 + i))).unwrap()).collect(),
            arriving: Vec::new(),
            replies: Vec::new(),
            last_arrival: HashMap::new(),
            state: vec![ClientState::Idle(start); 4],
            grants: 0,
            down_until: vec![None; 5],
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    fn latency(&mut self) -> Duration {
        // Mostly fast, sometimes very slow (a paused master, a long GC on the network path).
        if self.rand(50) == 0 { Duration::from_millis(100 + self.rand(900)) } else { Duration::from_millis(self.rand(40)) }
    }

    fn pump(&mut self) {
        for c in 0..self.clients.len() {
            while let Some(req) = self.clients[c].poll_request() {
                let lat = self.latency();
                let last = self.last_arrival.get(&(c, req.master)).copied().unwrap_or(self.now);
                let at = (self.now + lat).max(last);
                self.last_arrival.insert((c, req.master), at);
                self.arriving.push((at, c, req.master, req.id, req.command.0));
            }
            while let Some(ev) = self.clients[c].poll_event() {
                self.on_event(c, ev);
            }
        }
    }

    fn on_event(&mut self, c: usize, ev: Event<RedlockOutcome>) {
        match (ev, self.state[c].clone()) {
            (Event::Completed { op, outcome }, ClientState::Waiting(w, name)) if op == w => match outcome {
                RedlockOutcome::Acquired { lease, .. } => {
                    self.grants += 1;
                    let hold = Duration::from_millis(self.rand(400));
                    self.state[c] = ClientState::Holding(lease, name, self.now + hold);
                }
                _ => self.state[c] = ClientState::Idle(self.now + Duration::from_millis(self.rand(50))),
            },
            (Event::Lost { lease, .. }, ClientState::Holding(l, _, _)) if l == lease => {
                self.state[c] = ClientState::Idle(self.now + Duration::from_millis(self.rand(50)));
            }
            _ => {}
        }
    }

    /// Everyone who believes they hold `name` right now.
    fn believers(&self, name: &str) -> Vec<usize> {
        (0..self.clients.len())
            .filter(|&c| match &self.state[c] {
                ClientState::Holding(l, n, _) => *n == name && self.clients[c].lease_valid_until(*l).is_some_and(|t| t > self.now),
                _ => false,
            })
            .collect()
    }

    fn step(&mut self) {
        self.pump();
        for name in ["p", "q"] {
            let b = self.believers(name);
            assert!(b.len() <= 1, "two holders of {name} at {:?}: {b:?}", self.now);
        }
        // Next instant anything happens.
        let mut next = self.now + 5 * MS;
        for t in self.arriving.iter().map(|a| a.0).chain(self.replies.iter().map(|r| r.0)) {
            next = next.min(t);
        }
        for c in &self.clients {
            if let Some(t) = c.poll_timeout() {
                next = next.min(t);
            }
        }
        self.now = next.max(self.now);
        let now = self.now;
        // Masters crash (losing everything) and come back.
        for m in 0..self.masters.len() {
            let crash = self.rand(3000) == 0;
            let downtime = Duration::from_millis(self.rand(1500));
            match self.down_until[m] {
                Some(t) if t <= now => {
                    self.down_until[m] = None;
                    self.masters[m] = Master { up: true, started: now, keys: HashMap::new(), cached: false, loaded: Vec::new(), delay: MS };
                }
                None if crash => {
                    self.masters[m].up = false;
                    self.down_until[m] = Some(now + downtime);
                }
                _ => {}
            }
        }
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.arriving).into_iter().partition(|a| a.0 <= now);
        self.arriving = rest;
        for (_, c, m, id, cmd) in due {
            let (reply, back) = if self.masters[m].up {
                (Ok(self.masters[m].run(now, &cmd, Duration::from_secs(2))), self.latency())
            } else {
                (Err(Error::new(ErrorKind::Connection, "connection refused")), MS)
            };
            self.replies.push((now + back, c, id, reply));
        }
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.replies).into_iter().partition(|r| r.0 <= now);
        self.replies = rest;
        for (_, c, id, reply) in due {
            self.clients[c].handle_reply(now, id, reply);
        }
        for c in 0..self.clients.len() {
            self.clients[c].handle_timeout(now);
            match self.state[c].clone() {
                ClientState::Idle(t) if t <= now => {
                    let name = if self.rand(2) == 0 { "p" } else { "q" };
                    let opts = if self.rand(2) == 0 {
                        LockOptions::fixed_lease(Duration::from_millis(200 + self.rand(1800)))
                    } else {
                        LockOptions::renewed_lease(Duration::from_millis(150 + self.rand(500)))
                    };
                    let op = self.clients[c].acquire(now, name, &opts, Wait::For(Duration::from_millis(800))).unwrap();
                    self.state[c] = ClientState::Waiting(op, name);
                }
                ClientState::Holding(l, _, until) if until <= now => {
                    let _ = self.clients[c].release(now, l);
                    self.state[c] = ClientState::Idle(now + Duration::from_millis(self.rand(30)));
                }
                _ => {}
            }
        }
    }
}

#[test]
fn no_two_holders_under_random_delays_crashes_and_restarts() {
    let mut total = 0;
    for seed in 1..=40 {
        let mut sim = Chaos::new(seed);
        let end = sim.now + Duration::from_secs(30);
        while sim.now < end {
            sim.step();
        }
        total += sim.grants;
    }
    assert!(total > 1000, "the workload made progress ({total} grants)");
}

#[test]
fn an_extend_reaches_masters_that_lost_their_script_cache_even_after_the_majority() {
    let mut sim = Sim::new(3, 1);
    let op = sim.acquire(0, "n", &fixed(1000), Wait::Try);
    sim.run_for(10 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    // One master forgets its scripts (SCRIPT FLUSH) and answers slowly: the extend is decided
    // by the other two before its NOSCRIPT arrives, and still reaches it.
    sim.masters[2].cached = false;
    sim.masters[2].delay = 20 * MS;
    let ext = sim.clients[0].extend(sim.now, lease, Duration::from_secs(5)).unwrap();
    sim.run_for(5 * MS);
    assert!(matches!(sim.outcome(0, ext), Some(RedlockOutcome::Extended { .. })));
    sim.run_for(100 * MS);
    let key = scripts::key("lockgate:", "n");
    let expiry = sim.masters[2].keys.get(&key).expect("still held there").1;
    assert!(expiry > sim.now + Duration::from_secs(4), "the slow master was extended too");
}

#[test]
fn a_master_that_missed_a_decided_attempt_for_want_of_a_script_gets_the_body_next_time() {
    let mut sim = Sim::new(3, 1);
    // The slow master lost its scripts: its NOSCRIPT comes after the other two decided.
    sim.masters[2].cached = false;
    sim.masters[2].delay = 20 * MS;
    let op = sim.acquire(0, "m", &fixed(1000), Wait::Try);
    sim.run_for(5 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    sim.run_for(50 * MS);
    let key = scripts::key("lockgate:", "m");
    assert!(sim.masters[2].holder(sim.now, &key).is_none(), "a decided attempt is not re-sent");
    let rel = sim.clients[0].release(sim.now, lease);
    sim.run_for(50 * MS);
    assert_eq!(sim.outcome(0, rel), Some(RedlockOutcome::Released { was_held: true }));
    // The next attempt sends that master the body at once, so it takes part.
    let op = sim.acquire(0, "m", &fixed(1000), Wait::Try);
    sim.run_for(50 * MS);
    acquired(sim.outcome(0, op));
    assert!(sim.masters[2].holder(sim.now, &key).is_some(), "the master took part this time");
}

/// A Redlock of 3 masters holding "q" on masters 0 and 1 only (master 2 was down: 2 of 3 is its
/// quorum), beside a client that counts 5 masters (0 to 4) and would find its own quorum of 3
/// free on masters 2, 3 and 4.
fn three_and_five(delay_of_0_and_1: Duration) -> (Sim, OpId) {
    let mut sim = Sim::with(config(5), 2);
    sim.clients[0] = RedlockEngine::new(config(3), Box::new(SeededRandom::new(99))).unwrap();
    sim.masters[2].up = false;
    let op = sim.acquire(0, "q", &fixed(5000), Wait::Try);
    sim.run_for(10 * MS);
    acquired(sim.outcome(0, op));
    sim.masters[2].up = true;
    assert_eq!(sim.holders("q"), 2);
    sim.masters[0].delay = delay_of_0_and_1;
    sim.masters[1].delay = delay_of_0_and_1;
    let op = sim.acquire(1, "q", &fixed(5000), Wait::For(Duration::from_secs(2)));
    (sim, op)
}

// PROTOCOL.md §8: the key's value carries the number of masters its holder counts; a client that
// counts another number is refused at once with INVALID_ARGUMENT (a wait does not retry), and
// whatever it set on the free masters is undone.
#[test]
fn a_holder_counting_other_masters_is_reported_as_invalid_argument() {
    let (mut sim, op) = three_and_five(MS);
    sim.run_for(10 * MS);
    let e = failed(sim.outcome(1, op));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    assert!(!e.retryable());
    assert!(e.message().contains("counts 3 masters") && e.message().contains("this client counts 5"), "{}", e.message());
    sim.run_for(100 * MS);
    let key = scripts::key("lockgate:", "q");
    let owners: Vec<Option<String>> = sim.masters.iter().map(|m| m.holder(sim.now, &key)).collect();
    assert!(owners[0].as_deref().is_some_and(|v| v.ends_with(":3")), "{owners:?}");
    assert!(owners[1].as_deref().is_some_and(|v| v.ends_with(":3")), "{owners:?}");
    assert_eq!(owners[2..], [None, None, None], "the 5-master client's grants were undone");
    assert!(sim.clients[1].is_idle());
}

// The same disagreement reported only after the 5-master client's majority granted (masters 0
// and 1 answer late): the grant is given up at once, as a lost lease, and undone.
#[test]
fn a_late_quorum_mismatch_gives_the_grant_up() {
    let (mut sim, op) = three_and_five(20 * MS);
    sim.run_for(5 * MS);
    let (lease, _) = acquired(sim.outcome(1, op));
    sim.run_for(30 * MS);
    assert!(sim.lost(1, lease), "the grant beside a 3-master holder was not given up");
    let why = sim.events.iter().find_map(|(c, e)| match e {
        Event::Lost { lease: l, error } if *c == 1 && *l == lease => Some(error.message().to_string()),
        _ => None,
    });
    assert!(why.as_deref().is_some_and(|w| w.contains("masters mismatch")), "{why:?}");
    sim.run_for(100 * MS);
    assert_eq!(sim.holders("q"), 2, "only the 3-master client's keys remain");
    assert!(sim.clients[1].is_idle());
}

/// The next timeout follows each round and lease: a round's node timeout while it is open, the
/// renewal once the grant is decided; an early `handle_timeout` sends nothing; a renewal round
/// nobody answers times out and the renewal is retried shortly after.
#[test]
fn the_next_timeout_follows_rounds_renewals_and_retries() {
    let mut engine = RedlockEngine::new(config(3), Box::new(SeededRandom::new(1))).unwrap();
    let t0 = Instant::from_origin(Duration::from_secs(100));
    let ms = |n: u32| t0 + n * MS;
    let drain = |engine: &mut RedlockEngine| std::iter::from_fn(|| engine.poll_request()).collect::<Vec<_>>();
    engine.acquire(t0, "a", &LockOptions::renewed_lease(3000 * MS), Wait::Try).unwrap();
    let sent = drain(&mut engine);
    assert_eq!(sent.len(), 3);
    assert_eq!(engine.poll_timeout(), Some(ms(50)), "the round's node timeout");
    for req in sent {
        engine.handle_reply(ms(1), req.id, Ok(Reply::Int(1)));
    }
    assert!(matches!(engine.poll_event(), Some(Event::Completed { outcome: RedlockOutcome::Acquired { .. }, .. })));
    assert_eq!(engine.poll_timeout(), Some(ms(1000)), "the renewal, a third into the lease from the send");
    for early in [2, 500, 999] {
        engine.handle_timeout(ms(early));
        assert!(drain(&mut engine).is_empty(), "nothing is due at {early} ms");
    }
    engine.handle_timeout(ms(1000));
    assert_eq!(drain(&mut engine).len(), 3, "one renewal round");
    engine.handle_timeout(ms(1000));
    assert!(drain(&mut engine).is_empty(), "the round is on the wire");
    assert_eq!(engine.poll_timeout(), Some(ms(1050)), "its node timeout");
    // Nobody answers: the round times out without a majority and the renewal is retried after
    // a tenth of the lease (at most 500 ms).
    engine.handle_timeout(ms(1050));
    assert!(matches!(engine.poll_event(), Some(Event::AtRisk { .. })), "at risk, not lost: the validity has not run out");
    assert!(engine.poll_event().is_none(), "not lost: the validity has not run out");
    assert_eq!(engine.poll_timeout(), Some(ms(1350)));
    engine.handle_timeout(ms(1350));
    assert_eq!(drain(&mut engine).len(), 3, "the renewal again");
}

/// Every Redlock round of a lock's own calls is told as a telemetry event with its votes: a
/// grant with two masters down, a round refused by a holder elsewhere, a release; a round
/// that falls short of a quorum says so (not "held elsewhere").
#[test]
fn each_round_is_told_with_its_votes() {
    use lockgate_core::engine::{Happened, TelemetryConfig};
    let mut sim = Sim::new(5, 2);
    for c in &mut sim.clients {
        c.enable_telemetry(TelemetryConfig { backend: "redlock", lock_names: false, held_too_long: None });
    }
    let rounds = |sim: &Sim, c: usize| -> Vec<(&'static str, &'static str, u32, u32, u32, u32, bool)> {
        sim.events
            .iter()
            .filter_map(|(i, e)| match e {
                Event::Telemetry(t) if *i == c => match &t.what {
                    Happened::RedlockRound { op, round } => Some((round.call, round.outcome, round.yes, round.no, round.failed, round.unanswered, op.is_some())),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    };
    sim.masters[0].up = false;
    sim.masters[3].up = false;
    let op = sim.acquire(0, "a", &fixed(1000), Wait::Try);
    sim.run_for(100 * MS);
    let (lease, _) = acquired(sim.outcome(0, op));
    assert_eq!(rounds(&sim, 0), [("acquire", "granted", 3, 0, 2, 0, true)]);
    // The round's event comes before the grant it made.
    let names: Vec<_> = sim.events.iter().filter_map(|(i, e)| match e {
        Event::Telemetry(t) if *i == 0 => Some(t.what.name()),
        _ => None,
    }).collect();
    assert_eq!(names, ["acquire.started", "redlock.round", "acquire.granted"]);

    let other = sim.acquire(1, "a", &fixed(1000), Wait::Try);
    sim.run_for(100 * MS);
    assert!(matches!(sim.outcome(1, other), Some(RedlockOutcome::NotAcquired)), "{:?}", sim.outcome(1, other));
    // Decided as soon as no majority can grant (two refusals, one master down): the others had
    // not answered yet.
    assert_eq!(rounds(&sim, 1), [("acquire", "refused", 0, 2, 1, 2, true)]);

    sim.clients[0].release(sim.now, lease);
    sim.run_for(100 * MS);
    assert_eq!(rounds(&sim, 0)[1..], [("release", "confirmed", 3, 0, 2, 0, false)]);

    sim.masters[4].up = false;
    let op = sim.acquire(1, "b", &fixed(1000), Wait::Try);
    sim.run_for(100 * MS);
    failed(sim.outcome(1, op));
    assert_eq!(rounds(&sim, 1)[1..], [("acquire", "no_quorum", 2, 0, 3, 0, true)]);
}
