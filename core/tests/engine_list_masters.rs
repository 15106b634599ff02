//! Listing over several masters (PROTOCOL.md §16) through the sans-IO engine. On a stand-in
//! Redis Cluster every page asks for the masters, then SCANs one of them; the cursor carries the
//! master and its own SCAN position, so pages smaller than a master's locks, empty masters and
//! a master set that changes between pages all list each lock at most once, and a garbled
//! cursor changes nothing. On stand-in Redlock masters each lock held by a majority is listed
//! once, whichever masters hold it, and a minority's key is not.

use std::collections::BTreeMap;

use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::{Command, EngineConfig, RequestKind};
use lockgate_core::listing::Page;
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Engine, Event, Outcome};

/// A stand-in cluster: each master's keys, in its SCAN order. A SCAN step returns 3 keys
/// (whatever its COUNT), its cursor the index of the next.
struct Cluster {
    masters: BTreeMap<String, Vec<String>>,
    scans: Vec<String>,
}

impl Cluster {
    fn new(masters: &[(&str, &[&str])]) -> Cluster {
        let masters = masters
            .iter()
            .map(|(a, locks)| {
                // Each lock's holder key and a fence beside it (which finds nothing).
                let keys = locks.iter().flat_map(|n| [format!("lockgate:{{{n}}}"), format!("lockgate:{{{n}}}:fence")]).collect();
                (a.to_string(), keys)
            })
            .collect();
        Cluster { masters, scans: Vec::new() }
    }

    fn scan(&mut self, node: &str, c: &Command) -> Reply {
        let bulk = |s: &str| Reply::Data(s.as_bytes().to_vec());
        assert_eq!(c.name(), "SCAN");
        self.scans.push(node.to_string());
        let at: usize = std::str::from_utf8(&c.0[1]).unwrap().parse().unwrap();
        let keys = &self.masters[node];
        let end = (at + 3).min(keys.len());
        let next = if end == keys.len() { 0 } else { end };
        Reply::Array(vec![bulk(&next.to_string()), Reply::Array(keys[at..end].iter().map(|k| bulk(k)).collect())])
    }

    /// The answer to one request: the masters (in reverse order: the engine sorts them), a
    /// SCAN, a subscription, or INSPECT replies showing every lock held.
    fn serve(&mut self, kind: RequestKind) -> Vec<Reply> {
        match kind {
            RequestKind::Masters => self.masters.keys().rev().map(|a| Reply::Data(a.clone().into_bytes())).collect(),
            RequestKind::OnNode { node, commands } => commands.iter().map(|c| self.scan(&node, c)).collect(),
            RequestKind::Subscribe(_) => Vec::new(),
            RequestKind::Pipeline(commands) => commands
                .iter()
                .map(|_| {
                    let no = || Reply::Array(Vec::new());
                    Reply::Array(vec![Reply::Int(1_000_000), Reply::Data(b"tok".to_vec()), Reply::Int(5000), Reply::Int(7), no(), no()])
                })
                .collect(),
            other => panic!("unexpected request {other:?}"),
        }
    }
}

fn engine() -> Engine {
    let config = EngineConfig { split_pipelines: true, ..EngineConfig::default() };
    Engine::new(config, Box::new(SeededRandom::new(5))).unwrap()
}

/// One page, every request answered by `cluster`.
fn page(engine: &mut Engine, cluster: &mut Cluster, limit: u64, cursor: Option<&str>) -> Result<Page, lockgate_core::Error> {
    let now = Instant::from_origin(Duration::from_secs(1));
    let op = engine.list(now, "", Some(limit), cursor)?;
    loop {
        while let Some(req) = engine.poll_request() {
            let replies = cluster.serve(req.kind);
            engine.handle_reply(now, req.id, Ok(replies));
        }
        match engine.poll_event() {
            Some(Event::Completed { op: done, outcome }) if done == op => {
                return match outcome {
                    Outcome::Listed(p) => Ok(p),
                    Outcome::Failed(e) => Err(e),
                    other => panic!("unexpected outcome {other:?}"),
                };
            }
            Some(_) => {}
            None => panic!("the page never completed"),
        }
    }
}

/// Every page from `cursor` on: the names listed (in order) and how many pages.
fn all_pages(engine: &mut Engine, cluster: &mut Cluster, limit: u64, mut cursor: Option<String>) -> (Vec<String>, usize) {
    let (mut names, mut pages) = (Vec::new(), 0);
    loop {
        let p = page(engine, cluster, limit, cursor.as_deref()).unwrap();
        pages += 1;
        assert!(p.entries.len() <= limit as usize);
        names.extend(p.entries.into_iter().map(|e| e.name));
        match p.cursor {
            Some(c) => cursor = Some(c),
            None => return (names, pages),
        }
        assert!(pages < 100, "the listing never ends");
    }
}

#[test]
fn pages_smaller_than_a_master_list_every_lock_once_across_masters() {
    let mut cluster = Cluster::new(&[
        ("10.0.0.1:7000", &["a1", "a2", "a3", "a4", "a5"]),
        ("10.0.0.2:7000", &[]),
        ("10.0.0.3:7000", &["c1", "c2", "c3", "c4"]),
    ]);
    let mut e = engine();
    let (names, pages) = all_pages(&mut e, &mut cluster, 2, None);
    assert_eq!(names, ["a1", "a2", "a3", "a4", "a5", "c1", "c2", "c3", "c4"]);
    // Each master scanned in address order, each SCAN step once per page it fills.
    let order: Vec<&str> = cluster.scans.iter().map(String::as_str).collect();
    assert_eq!(order.first(), Some(&"10.0.0.1:7000"));
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    assert!(order.contains(&"10.0.0.2:7000"), "the empty master is scanned too");
    assert!(pages >= 6, "{pages} pages");
    // A page can be resumed from its cursor by another client: the cursor carries it all.
    let first = page(&mut e, &mut cluster, 2, None).unwrap();
    let cursor = first.cursor.expect("more to come");
    assert!(cursor.ends_with(":10.0.0.1:7000"), "{cursor}");
    let (rest, _) = all_pages(&mut engine(), &mut cluster, 2, Some(cursor));
    assert_eq!(rest, ["a3", "a4", "a5", "c1", "c2", "c3", "c4"]);
}

#[test]
fn a_master_gone_between_pages_is_continued_by_the_next_one() {
    let mut cluster = Cluster::new(&[("10.0.0.1:7000", &["a1", "a2", "a3"]), ("10.0.0.3:7000", &["c1"])]);
    let mut e = engine();
    let first = page(&mut e, &mut cluster, 1, None).unwrap();
    assert_eq!(first.entries[0].name, "a1");
    // A failover: 10.0.0.1's replica, at 10.0.0.2, is now the master of its slots.
    let moved = cluster.masters.remove("10.0.0.1:7000").unwrap();
    cluster.masters.insert("10.0.0.2:7000".into(), moved);
    let (rest, _) = all_pages(&mut e, &mut cluster, 1, first.cursor);
    // The new master sorts after the gone one: scanned from its start (a1 shows again).
    assert_eq!(rest, ["a1", "a2", "a3", "c1"]);
    // A cursor on a master after every current one: nothing is left.
    let last = page(&mut e, &mut cluster, 1, Some("5:0:10.0.0.9:7000")).unwrap();
    assert_eq!((last.entries.len(), last.cursor), (0, None));
}

#[test]
fn a_garbled_cursor_is_invalid_and_sends_nothing() {
    let mut cluster = Cluster::new(&[("10.0.0.1:7000", &["a1"])]);
    let mut e = engine();
    for bad in ["x", "17:0", "17:x:10.0.0.1:7000", "-1:0:10.0.0.1:7000", "1:0:", "1:0:bad\naddress"] {
        let scans = cluster.scans.len();
        let err = page(&mut e, &mut cluster, 2, Some(bad)).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{bad}");
        assert_eq!(cluster.scans.len(), scans, "{bad}: nothing scanned");
    }
    // A single server's cursor is not a Cluster's either, nor a Cluster's a single server's.
    let single = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(5))).unwrap();
    let mut single = single;
    assert_eq!(page(&mut single, &mut cluster, 2, Some("0:0:10.0.0.1:7000")).unwrap_err().code(), "INVALID_ARGUMENT");
}

/// Stand-in Redlock masters: each master's keys and values (a lock key `lockgate:{N}:redlock`
/// holds its owner value; its label key `…:label` finds nothing).
struct Masters(Vec<BTreeMap<String, String>>);

impl Masters {
    fn serve(&self, master: usize, c: &Command) -> Reply {
        let bulk = |s: &str| Reply::Data(s.as_bytes().to_vec());
        let arg = |i: usize| std::str::from_utf8(&c.0[i]).unwrap().to_string();
        let keys = &self.0[master];
        match c.name() {
            // One step holds every key, the label keys too (the pattern is the engine's to get right).
            "SCAN" => Reply::Array(vec![bulk("0"), Reply::Array(keys.keys().flat_map(|k| [bulk(k), bulk(&format!("{k}:label"))]).collect())]),
            "MGET" => Reply::Array((1..c.0.len()).map(|i| keys.get(&arg(i)).map_or(Reply::Nil, |v| bulk(v))).collect()),
            // REDLOCK_INSPECT: {owner value or '', pttl, label}.
            "EVALSHA" => match keys.get(&arg(3)) {
                Some(v) => Reply::Array(vec![bulk(v), Reply::Int(4000), bulk("")]),
                None => Reply::Array(vec![bulk(""), Reply::Int(-2), bulk("")]),
            },
            other => panic!("unexpected command {other}"),
        }
    }
}

#[test]
fn a_redlock_lists_each_majority_held_lock_once() {
    use lockgate_core::backend::redlock::{RedlockConfig, RedlockEngine, RedlockOutcome};
    let key = |n: &str| format!("lockgate:{{{n}}}:redlock");
    let mut masters = Masters(vec![BTreeMap::new(), BTreeMap::new(), BTreeMap::new()]);
    // "a" on masters 0 and 1, "b" on 1 and 2, "c" on 0 and 2, "e" on all three; "d" is a
    // minority's key (one master), "f" two different owners on two masters: neither is held.
    for (name, on) in [("a", &[0, 1][..]), ("b", &[1, 2]), ("c", &[0, 2]), ("e", &[0, 1, 2]), ("d", &[2])] {
        for m in on {
            masters.0[*m].insert(key(name), format!("tok-{name}:3"));
        }
    }
    masters.0[0].insert(key("f"), "one:3".into());
    masters.0[1].insert(key("f"), "other:3".into());
    let config = RedlockConfig { masters: 3, ..RedlockConfig::default() };
    let mut engine = RedlockEngine::new(config, Box::new(SeededRandom::new(3))).unwrap();
    let now = Instant::from_origin(Duration::from_secs(1));
    let mut scanned = Vec::new();
    let mut page = |cursor: Option<&str>| {
        let op = engine.list(now, "", Some(1), cursor).unwrap();
        loop {
            while let Some(req) = engine.poll_request() {
                if req.command.name() == "SCAN" {
                    scanned.push(req.master);
                }
                let reply = masters.serve(req.master, &req.command);
                engine.handle_reply(now, req.id, Ok(reply));
            }
            match engine.poll_event() {
                Some(Event::Completed { op: done, outcome }) if done == op => return outcome,
                Some(_) => {}
                None => panic!("the page never completed"),
            }
        }
    };
    let (mut names, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let RedlockOutcome::Listed(p) = page(cursor.as_deref()) else { panic!("not listed") };
        pages += 1;
        names.extend(p.entries.into_iter().map(|e| e.name));
        match p.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 50, "the listing never ends");
    }
    names.sort();
    assert_eq!(names, ["a", "b", "c", "e"]);
    for bad in ["0:0:2", "0:0", "0:0:x"] {
        let RedlockOutcome::Failed(e) = page(Some(bad)) else { panic!("{bad} accepted") };
        assert_eq!(e.code(), "INVALID_ARGUMENT", "{bad}");
    }
    // Only the first two masters are scanned (every majority of three includes one of them),
    // in order; a garbled cursor scanned nothing.
    scanned.dedup();
    assert_eq!(scanned, [0, 1]);
}
