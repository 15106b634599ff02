//! The engine half over an in-memory memcached: grants, polling with bounded backoff, owner
//! checks that never resurrect, eviction and restarts as loss, the refusals.

use std::collections::HashMap;

use super::backend::{exptime, POLL_CAP};
use super::request::{McAnswer, McCommand, McRequest};
use super::{MemcachedConfig, MemcachedEngine};
use crate::engine::{Done, Event, LeaseId, OpId, Wait};
use crate::error::{Error, ErrorKind};
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::SeededRandom;
use crate::time::{Duration, Instant};

/// memcached as the lock sees it: items with a value, a cas unique and an expiry. An item
/// stored with expiry `n` lives `n - 2` s here: the shortest a real server may keep it.
struct Cache {
    items: HashMap<String, (Vec<u8>, u64, Instant)>,
    next_cas: u64,
    /// Every command served, per server.
    served: Vec<usize>,
    /// When the servers (re)started.
    started: Instant,
}

impl Default for Cache {
    fn default() -> Self {
        Cache { items: HashMap::new(), next_cas: 0, served: Vec::new(), started: Instant::from_origin(Duration::ZERO) }
    }
}

impl Cache {
    /// Empties the servers and starts their clocks again, as a restart does.
    fn restart(&mut self, now: Instant) {
        self.items.clear();
        self.started = now;
    }

    fn live(&mut self, now: Instant, key: &str) -> Option<&(Vec<u8>, u64, Instant)> {
        if self.items.get(key).is_some_and(|i| i.2 <= now) {
            self.items.remove(key);
        }
        self.items.get(key)
    }

    fn store(&mut self, now: Instant, key: &str, value: &str, exptime: i64) {
        self.next_cas += 1;
        let life = Duration::from_secs(exptime.saturating_sub(2).max(0) as u64);
        self.items.insert(key.to_string(), (value.as_bytes().to_vec(), self.next_cas, now + life));
    }

    fn serve(&mut self, now: Instant, r: &McRequest) -> McAnswer {
        if self.served.len() <= r.server {
            self.served.resize(r.server + 1, 0);
        }
        self.served[r.server] += 1;
        match &r.command {
            McCommand::Add { key, value, exptime } => {
                if self.live(now, key).is_some() {
                    return McAnswer::NotStored;
                }
                self.store(now, key, value, *exptime);
                McAnswer::Stored
            }
            // memcached 1.6 says 2 at its start.
            McCommand::Stats => McAnswer::Uptime(now.saturating_duration_since(self.started).as_secs() + 2),
            McCommand::Gets { key } => match self.live(now, key) {
                Some((value, cas, _)) => McAnswer::Value { value: value.clone(), cas: *cas },
                None => McAnswer::Miss,
            },
            McCommand::Cas { key, value, exptime, cas } => match self.live(now, key).map(|i| i.1) {
                None => McAnswer::NotFound,
                Some(c) if c != *cas => McAnswer::Exists,
                Some(_) if *exptime < 0 => {
                    self.items.remove(key);
                    McAnswer::Stored
                }
                Some(_) => {
                    self.store(now, key, value, *exptime);
                    McAnswer::Stored
                }
            },
        }
    }
}

struct World {
    now: Instant,
    cache: Cache,
    engines: Vec<MemcachedEngine>,
    done: HashMap<(usize, OpId), Done>,
    lost: Vec<(usize, LeaseId)>,
    /// Requests held back instead of served (to interleave or lose them).
    held: Vec<(usize, McRequest)>,
    hold: bool,
    /// The servers are down: every request fails with `CONNECTION`.
    down: bool,
    /// Commands sent, per client.
    sent: Vec<usize>,
}

impl World {
    fn new(clients: usize) -> World {
        let config = MemcachedConfig { key_prefix: "lockgate:".into(), servers: vec!["a:11211".into(), "b:11211".into()], max_lease: Duration::from_secs(30) };
        let engines = (0..clients).map(|c| MemcachedEngine::new(config.clone(), Box::new(SeededRandom::new(c as u64 + 1))).unwrap()).collect();
        World { now: Instant::from_origin(Duration::from_secs(100)), cache: Cache::default(), engines, done: HashMap::new(), lost: Vec::new(), held: Vec::new(), hold: false, down: false, sent: vec![0; clients] }
    }

    fn settle(&mut self) {
        loop {
            let mut progress = false;
            for c in 0..self.engines.len() {
                while let Some(r) = self.engines[c].poll_request() {
                    progress = true;
                    self.sent[c] += 1;
                    if self.hold {
                        self.held.push((c, r));
                        continue;
                    }
                    if self.down {
                        self.engines[c].handle_reply(self.now, r.id, Err(Error::new(ErrorKind::Connection, "refused")));
                        continue;
                    }
                    let answer = self.cache.serve(self.now, &r);
                    self.engines[c].handle_reply(self.now, r.id, Ok(answer));
                }
                while let Some(ev) = self.engines[c].poll_event() {
                    match ev {
                        Event::Completed { op, outcome } => {
                            self.done.insert((c, op), outcome);
                        }
                        Event::Lost { lease, .. } => self.lost.push((c, lease)),
                        _ => {}
                    }
                }
            }
            if !progress {
                return;
            }
        }
    }

    /// Runs every client's timers up to `now + d`, jumping from one to the next.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.settle();
            let next = self.engines.iter().filter_map(|e| e.poll_timeout()).min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    let now = self.now;
                    for e in &mut self.engines {
                        e.handle_timeout(now);
                    }
                }
                _ => break,
            }
        }
        self.now = end;
        self.settle();
    }

    fn acquire(&mut self, c: usize, name: &str, options: &LockOptions, wait: Wait) -> OpId {
        let op = self.engines[c].acquire(self.now, name, options, wait).unwrap();
        self.settle();
        op
    }

    fn granted(&self, c: usize, op: OpId) -> Option<(LeaseId, Instant)> {
        match self.done.get(&(c, op)) {
            Some(Done::Acquired { lease, fencing_token: None, valid_until }) => Some((*lease, *valid_until)),
            _ => None,
        }
    }

    fn release(&mut self, c: usize, lease: LeaseId) -> Option<Done> {
        let op = self.engines[c].release(self.now, lease);
        self.settle();
        self.done.get(&(c, op)).cloned()
    }

    fn commands(&self) -> usize {
        self.cache.served.iter().sum()
    }
}

fn lease(ms: u64) -> LockOptions {
    LockOptions::fixed_lease(Duration::from_millis(ms))
}

#[test]
fn leases_become_whole_second_expiries_with_the_clock_slack_and_long_ones_are_refused() {
    assert_eq!(exptime(Duration::from_millis(10)), 3);
    assert_eq!(exptime(Duration::from_millis(1000)), 3);
    assert_eq!(exptime(Duration::from_millis(1001)), 4);
    assert_eq!(exptime(Duration::from_secs(30)), 32);
    let mut w = World::new(1);
    let too_long = LockOptions::fixed_lease(Duration::from_secs(30 * 24 * 3600));
    let e = w.engines[0].acquire(w.now, "x", &too_long, Wait::Try).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    for primitive in [Primitive::Semaphore { permits: 2 }, Primitive::Write, Primitive::Read { writers_first: true }, Primitive::Leader { value: "v".into() }] {
        let e = w.engines[0].acquire_primitive(w.now, "x", &primitive, &lease(1000), Wait::Try).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{primitive:?}");
    }
    assert_eq!(w.engines[0].observe_leader(w.now, "x").unwrap_err().kind(), ErrorKind::Unsupported);
    assert!(w.engines[0].poll_request().is_none(), "nothing is sent for a refused handle");
}

#[test]
fn a_grant_is_an_add_and_a_stats_and_its_validity_ends_before_the_item_can() {
    let mut w = World::new(2);
    let op = w.acquire(0, "orders", &lease(1500), Wait::Try);
    let (lease_id, valid_until) = w.granted(0, op).expect("granted");
    assert_eq!(w.commands(), 2, "an add, and the stats that shows the server is old enough");
    let (_, _, expires) = w.cache.items.values().next().unwrap().clone();
    assert!(valid_until <= expires, "validity {valid_until:?} outlives the item {expires:?}");
    // Held: a one-shot attempt of another client is one refused add, nothing else.
    let other = w.acquire(1, "orders", &lease(1500), Wait::Try);
    assert_eq!(w.done.get(&(1, other)), Some(&Done::NotAcquired));
    assert_eq!(w.commands(), 3);
    assert_eq!(w.release(0, lease_id), Some(Done::Released { was_held: true }));
    assert!(w.cache.items.is_empty());
}

#[test]
fn waiters_poll_with_capped_jittered_backoff_and_get_the_lock_after_a_release() {
    let mut w = World::new(2);
    let held = w.acquire(0, "L", &LockOptions::renewed_lease(Duration::from_secs(3)), Wait::Try);
    let (lease_id, _) = w.granted(0, held).unwrap();
    let waiter = w.acquire(1, "L", &lease(3000), Wait::Forever);
    // Ten seconds of waiting: the waiter's adds stay within the documented bound (at most 12
    // in the first second, 10 a second after), and it keeps polling (at least 5 a second).
    w.advance(Duration::from_secs(10));
    assert!(w.granted(1, waiter).is_none());
    let polls = w.sent[1];
    assert!((50..=12 + 9 * 10).contains(&polls), "{polls} polls in 10 s");
    assert!(w.sent[0] <= 2 + 10 * 3 * 2, "renewals: a gets and a cas per third of the lease: {}", w.sent[0]);
    w.release(0, lease_id);
    w.advance(POLL_CAP);
    assert!(w.granted(1, waiter).is_some(), "the waiter sees the release within one capped pause");
}

#[test]
fn release_and_extend_never_touch_another_owners_item_nor_resurrect_one() {
    let mut w = World::new(2);
    let op = w.acquire(0, "L", &lease(1000), Wait::Try);
    let (mine, _) = w.granted(0, op).unwrap();
    // The item expires (the holder missed its lease); another owner takes the lock.
    w.cache.items.clear();
    let theirs = w.acquire(1, "L", &lease(1000), Wait::Try);
    assert!(w.granted(1, theirs).is_some());
    let ext = w.engines[0].extend(w.now, mine, Duration::from_secs(5)).unwrap();
    w.settle();
    assert!(matches!(w.done.get(&(0, ext)), Some(Done::Failed(e)) if e.kind() == ErrorKind::NotHeld), "{:?}", w.done.get(&(0, ext)));
    assert_eq!(w.release(0, mine), Some(Done::Released { was_held: false }));
    let (value, _, _) = w.cache.items.values().next().expect("the other owner's item is still there");
    assert_ne!(value.as_slice(), b"", "untouched");
    // An extend after expiry with nobody else: nothing is written back.
    let mut w = World::new(1);
    let op = w.acquire(0, "M", &lease(1000), Wait::Try);
    let (mine, _) = w.granted(0, op).unwrap();
    w.cache.items.clear();
    let ext = w.engines[0].extend(w.now, mine, Duration::from_secs(5)).unwrap();
    w.settle();
    assert!(matches!(w.done.get(&(0, ext)), Some(Done::Failed(_))));
    assert!(w.cache.items.is_empty(), "an extend never resurrects");
}

#[test]
fn an_evicted_or_restarted_item_is_a_lost_lease_at_the_next_renewal() {
    let mut w = World::new(2);
    let op = w.acquire(0, "L", &LockOptions::renewed_lease(Duration::from_secs(3)), Wait::Try);
    let (lease_id, _) = w.granted(0, op).unwrap();
    w.advance(Duration::from_secs(5));
    assert!(w.lost.is_empty(), "renewals keep it");
    w.cache.items.clear(); // evicted under memory pressure, or the server restarted empty
    w.advance(Duration::from_millis(1100));
    assert_eq!(w.lost, [(0, lease_id)], "the next renewal reports the loss");
    let other = w.acquire(1, "L", &lease(1000), Wait::Try);
    assert!(w.granted(1, other).is_some());
    assert_eq!(w.cache.items.len(), 1, "the loser wrote nothing back");
}

#[test]
fn a_cas_that_lost_a_race_reads_again() {
    let mut w = World::new(1);
    let op = w.acquire(0, "L", &LockOptions::renewed_lease(Duration::from_secs(3)), Wait::Try);
    let (lease_id, _) = w.granted(0, op).unwrap();
    w.hold = true;
    let ext = w.engines[0].extend(w.now, lease_id, Duration::from_secs(6)).unwrap();
    w.settle();
    let (c, gets) = w.held.remove(0);
    let answer = w.cache.serve(w.now, &gets);
    // Someone (a renewal of the same lease) rewrites the item between gets and cas.
    let key = w.cache.items.keys().next().unwrap().clone();
    let value = String::from_utf8(w.cache.items[&key].0.clone()).unwrap();
    w.cache.store(w.now, &key, &value, 5);
    w.hold = false;
    w.engines[c].handle_reply(w.now, gets.id, Ok(answer));
    w.settle();
    assert!(matches!(w.done.get(&(0, ext)), Some(Done::Extended { .. })), "{:?}", w.done.get(&(0, ext)));
}

#[test]
fn a_lost_add_reply_is_undone_before_the_retry() {
    let mut w = World::new(1);
    w.hold = true;
    let op = w.acquire(0, "L", &lease(2000), Wait::For(Duration::from_secs(5)));
    let (c, add) = w.held.remove(0);
    w.cache.serve(w.now, &add); // stored, but the reply is lost
    w.hold = false;
    w.engines[c].handle_reply(w.now, add.id, Err(Error::new(ErrorKind::Connection, "reset")));
    w.advance(Duration::from_secs(1));
    assert!(w.granted(0, op).is_some(), "the orphan item was removed and the retry granted");
    assert_eq!(w.cache.items.len(), 1);
}

#[test]
fn calls_of_one_token_run_one_at_a_time_so_an_undo_never_races_the_retry() {
    let mut w = World::new(1);
    w.hold = true;
    let op = w.acquire(0, "L", &lease(2000), Wait::For(Duration::from_secs(5)));
    let (c, add) = w.held.remove(0);
    w.cache.serve(w.now, &add); // stored, but the reply is lost
    w.engines[c].handle_reply(w.now, add.id, Err(Error::new(ErrorKind::Connection, "reset")));
    // The undo's gets is on the wire; the retry falls due meanwhile and waits behind it.
    w.advance(Duration::from_millis(500));
    let kinds: Vec<&McCommand> = w.held.iter().map(|(_, r)| &r.command).collect();
    assert!(matches!(kinds.as_slice(), [McCommand::Gets { .. }]), "{kinds:?}");
    w.hold = false;
    let held = std::mem::take(&mut w.held);
    for (c, r) in held {
        let answer = w.cache.serve(w.now, &r);
        w.engines[c].handle_reply(w.now, r.id, Ok(answer));
    }
    w.advance(Duration::from_secs(1));
    let (lease_id, _) = w.granted(0, op).expect("granted after the undo");
    assert_eq!(w.cache.items.len(), 1, "the retry's item is not the undo's victim");
    assert_eq!(w.release(0, lease_id), Some(Done::Released { was_held: true }));
}

#[test]
fn a_grant_after_an_outage_is_released_as_held() {
    let mut w = World::new(1);
    w.down = true;
    let op = w.acquire(0, "L", &lease(3000), Wait::For(Duration::from_secs(20)));
    w.advance(Duration::from_secs(3));
    assert!(w.granted(0, op).is_none());
    w.down = false;
    w.advance(Duration::from_secs(3));
    let (lease_id, _) = w.granted(0, op).expect("granted once the server is back");
    assert_eq!(w.cache.items.len(), 1, "its item is there");
    assert_eq!(w.release(0, lease_id), Some(Done::Released { was_held: true }));
    assert!(w.cache.items.is_empty());
}

#[test]
fn a_restarted_server_grants_nothing_until_every_lease_it_forgot_has_ended() {
    let mut w = World::new(2);
    let max_lease = Duration::from_secs(30);
    let held = w.acquire(0, "L", &LockOptions::renewed_lease(max_lease), Wait::Try);
    let (lease_id, _) = w.granted(0, held).expect("an old server grants");
    w.advance(Duration::from_secs(4));
    let restarted = w.now;
    w.cache.restart(restarted);
    let waiter = w.acquire(1, "L", &lease(3000), Wait::Forever);
    let try_now = w.acquire(1, "M", &lease(3000), Wait::Try);
    assert_eq!(w.done.get(&(1, try_now)), Some(&Done::NotAcquired), "a one-shot attempt on a young server is refused");
    assert!(w.cache.items.is_empty(), "and its item removed");
    // Step by step: no grant while the holder's lease could still be counted valid.
    let mut granted_at = None;
    for _ in 0..400 {
        w.advance(Duration::from_millis(100));
        if granted_at.is_none() && w.granted(1, waiter).is_some() {
            granted_at = Some(w.now);
        }
    }
    assert_eq!(w.lost.iter().filter(|(c, _)| *c == 0).collect::<Vec<_>>(), [&(0, lease_id)], "the holder learns its loss at its next renewal");
    let at = granted_at.expect("granted once the server is old enough");
    assert!(at >= restarted + max_lease, "granted {:?} after the restart", at.saturating_duration_since(restarted));
    assert!(at <= restarted + max_lease + Duration::from_secs(5), "granted {:?} after the restart", at.saturating_duration_since(restarted));
    // While young, the waiter's polls were answered without commands.
    assert!(w.sent[1] < 40, "{} commands while the server was young", w.sent[1]);
}

#[test]
fn the_uptime_rule_counts_memcached_clock_and_the_time_since_the_add() {
    use super::backend::old_enough;
    let max = Duration::from_secs(5);
    assert!(!old_enough(2, Duration::ZERO, max), "a fresh server");
    assert!(!old_enough(7, Duration::ZERO, max), "uptime says 2 at the start and may be a second ahead");
    assert!(old_enough(8, Duration::ZERO, max));
    assert!(!old_enough(8, Duration::from_millis(10), max), "the add was taken before the stats");
    assert!(old_enough(9, Duration::from_millis(990), max));
    assert!(!old_enough(9, Duration::from_millis(991), max), "1 % for the clocks' rates");
}

#[test]
fn max_lease_is_redlocks_option_and_bounds_every_lease() {
    use crate::connect::{ClientOptions, Spelling};
    let mut o = ClientOptions::new("memcached://h");
    o.max_lease = Some(Duration::from_secs(5));
    assert_eq!(o.memcached_config().unwrap().max_lease, Duration::from_secs(5));
    assert_eq!(ClientOptions::new("memcached://h").memcached_config().unwrap().max_lease, Duration::from_secs(30));
    let lock = o.lock_options(None, None, None, None, &Spelling::RUST).unwrap();
    assert_eq!(lock.lease, Duration::from_secs(5), "a lease not given is max_lease when shorter than 30 s");
    let e = o.lock_options(Some(Duration::from_secs(6)), None, None, None, &Spelling::RUST).unwrap_err();
    assert!(e.message().contains("max_lease"), "{e}");
    let mut w = World::new(1);
    let e = w.engines[0].acquire(w.now, "x", &lease(31_000), Wait::Try).unwrap_err();
    assert!(e.message().contains("max_lease of 30000 ms"), "{e}");
    // The other Redlock settings stay refused.
    let mut other = ClientOptions::new("memcached://h");
    other.node_timeout = Some(Duration::from_millis(10));
    assert!(other.validate().unwrap_err().message().contains("Redlock setting"));
    o.max_lease = Some(Duration::from_millis(5));
    assert_eq!(o.validate().unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn an_undo_waiting_behind_the_granted_retry_does_not_delete_the_grant() {
    let mut w = World::new(1);
    w.hold = true;
    let op = w.acquire(0, "L", &lease(3000), Wait::For(Duration::from_secs(10)));
    let fail = |w: &mut World| {
        for (c, r) in std::mem::take(&mut w.held) {
            w.engines[c].handle_reply(w.now, r.id, Err(Error::new(ErrorKind::Connection, "reset")));
        }
        w.settle();
    };
    // The add and then the undo's gets fail (an outage): the undo is retried later.
    fail(&mut w);
    fail(&mut w);
    // Step until the retry's add is on the wire, then past the undo's retry: it waits behind.
    while !w.held.iter().any(|(_, r)| matches!(r.command, McCommand::Add { .. })) {
        fail(&mut w);
        w.advance(Duration::from_millis(1));
    }
    w.advance(Duration::from_millis(100));
    assert!(w.held.iter().all(|(_, r)| matches!(r.command, McCommand::Add { .. })), "only the add is on the wire: {:?}", w.held);
    // The server is back: the add is stored and the stats shows an old server.
    w.hold = false;
    for (c, r) in std::mem::take(&mut w.held) {
        let answer = w.cache.serve(w.now, &r);
        w.engines[c].handle_reply(w.now, r.id, Ok(answer));
    }
    w.advance(Duration::from_secs(2));
    let (lease_id, _) = w.granted(0, op).expect("granted");
    assert_eq!(w.cache.items.len(), 1, "the grant's item is still there");
    assert_eq!(w.release(0, lease_id), Some(Done::Released { was_held: true }));
}

#[test]
fn inspect_reads_the_holder_without_label_fence_or_waiters() {
    use crate::inspect::{Kind, Snapshot};
    let mut w = World::new(2);
    let op = w.engines[1].inspect(w.now, "orders", Kind::Mutex).unwrap();
    w.settle();
    assert_eq!(w.done.get(&(1, op)), Some(&Done::Inspected(Snapshot::empty(Kind::Mutex))));
    let a = w.acquire(0, "orders", &lease(5000), Wait::Try);
    let (held, _) = w.granted(0, a).unwrap();
    let waiting = w.acquire(1, "orders", &lease(5000), Wait::For(Duration::from_secs(5)));
    let mine = w.engines[0].inspect(w.now, "orders", Kind::Mutex).unwrap();
    let theirs = w.engines[1].inspect(w.now, "orders", Kind::Mutex).unwrap();
    w.settle();
    let Some(Done::Inspected(s)) = w.done.get(&(0, mine)) else { panic!("{:?}", w.done.get(&(0, mine))) };
    assert_eq!((s.holders.len(), s.holders[0].holds, s.holders[0].label.clone(), s.holders[0].fencing_token), (1, Some(1), None, None));
    assert!(s.waiters.is_empty(), "a poller leaves no entry");
    let Some(Done::Inspected(s)) = w.done.get(&(1, theirs)) else { panic!() };
    assert_eq!(s.holders[0].holds, None);
    w.release(0, held);
    w.engines[1].cancel(w.now, waiting);
    w.settle();
    // A server's answer that makes no sense is an error, not a panic.
    assert_eq!(super::backend::inspected_for_test(Ok(McAnswer::Stored)).unwrap_err().code(), "PROTOCOL");
    assert_eq!(super::backend::inspected_for_test(Ok(McAnswer::Value { value: vec![0xff], cas: 1 })).unwrap_err().code(), "PROTOCOL");
}

#[test]
fn break_deletes_the_holders_item_and_refuses_a_token() {
    use crate::break_lock::Broken;
    use crate::inspect::Kind;
    let mut w = World::new(2);
    let a = w.acquire(0, "orders", &lease(5000), Wait::Try);
    let (held, _) = w.granted(0, a).unwrap();
    // memcached issues no fencing tokens: a break cannot name a holder by one.
    assert_eq!(w.engines[1].break_lock(w.now, "orders", Kind::Mutex, Some(7)).unwrap_err().code(), "UNSUPPORTED");
    let op = w.engines[1].break_lock(w.now, "orders", Kind::Mutex, None).unwrap();
    w.settle();
    assert_eq!(w.done.get(&(1, op)), Some(&Done::Broken(Some(Broken { label: None, fencing_token: None }))));
    assert!(w.cache.items.is_empty(), "the holder's item is gone");
    assert_eq!(w.release(0, held), Some(Done::Released { was_held: false }));
    let again = w.engines[1].break_lock(w.now, "orders", Kind::Mutex, None).unwrap();
    w.settle();
    assert_eq!(w.done.get(&(1, again)), Some(&Done::Broken(None)));
}

#[test]
fn listing_is_unsupported_and_sends_nothing() {
    // memcached cannot enumerate its keys (PROTOCOL.md §16): refused before anything is sent.
    let mut w = World::new(1);
    let e = w.engines[0].list(w.now, "orders", None, None).unwrap_err();
    assert_eq!(e.code(), "UNSUPPORTED");
    assert!(w.engines[0].poll_request().is_none());
}
