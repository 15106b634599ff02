//! Safety properties over a finished (or paused) simulation.

use std::collections::BTreeMap;

use lockgate_core::time::Instant;

use super::harness::{Belief, Sim};

/// No two leases of one lock were believed held at the same virtual instant.
pub fn mutual_exclusion(sim: &Sim) {
    let mut by_key: BTreeMap<&str, Vec<(Instant, Instant, usize)>> = BTreeMap::new();
    for (i, b) in sim.beliefs.iter().enumerate() {
        for (from, to) in b.segments() {
            by_key.entry(&b.key).or_default().push((from, to, i));
        }
    }
    for (key, mut segs) in by_key {
        segs.sort();
        let mut reach: Option<(Instant, usize)> = None;
        for (from, to, i) in segs {
            if let Some((until, j)) = reach {
                assert!(
                    !(from < until && i != j),
                    "mutual exclusion violated on {key}: {:?}\n overlaps {:?}",
                    describe(&sim.beliefs[j]),
                    describe(&sim.beliefs[i])
                );
            }
            if reach.map_or(true, |(until, _)| to > until) {
                reach = Some((to, i));
            }
        }
    }
}

/// Every instant a client believed it held a lease, the server's lock key held that grant's
/// token: a holder's `valid_until` never exceeds the server-side expiry of its grant.
pub fn beliefs_within_server_leases(sim: &Sim) {
    for b in &sim.beliefs {
        let grant = sim
            .redis
            .grants
            .iter()
            .find(|g| g.key == b.key && g.fence == b.fence)
            .unwrap_or_else(|| {
                panic!(
                    "no server grant with the fencing token the client saw: {:?}",
                    describe(b)
                )
            });
        let held = merged(sim.redis.store.holdings(&b.key, &grant.token));
        for (from, to) in b.segments() {
            assert!(
                held.iter().any(|&(s, e)| s <= from && to <= e),
                "client {} believed it held {} during {from:?}..{to:?}, but the server held its token only during {held:?}\n{:?}",
                b.client,
                b.key,
                describe(b)
            );
        }
    }
}

/// Fencing tokens of one lock strictly increase over every grant the server ever made.
pub fn fences_increase(sim: &Sim) {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for g in &sim.redis.grants {
        if let Some(&prev) = last.get(g.key.as_str()) {
            assert!(
                g.fence > prev,
                "fence {} of {} at {:?} does not exceed the previous {prev}",
                g.fence,
                g.key,
                g.at
            );
        }
        last.insert(&g.key, g.fence);
    }
    // And what clients were told matches what the server issued, in grant order.
    for b in &sim.beliefs {
        assert!(
            sim.redis
                .grants
                .iter()
                .any(|g| g.key == b.key && g.fence == b.fence),
            "unknown fence {b:?}"
        );
    }
}

/// Nothing but fence counters is left on the server (no lock, queue or waiters key).
pub fn no_lock_state_left(sim: &mut Sim) {
    let left = sim.lock_state_keys();
    assert!(
        left.is_empty(),
        "keys left on the server after everything was released: {left:?}"
    );
    let now = sim.now;
    sim.redis.store.set_now(now);
    for k in sim.redis.store.keys() {
        assert!(sim.redis.store.pttl(&k) >= 0, "fence key {k} has no TTL");
    }
}

/// All safety checks that hold in every scenario without server data loss.
pub fn safety(sim: &Sim) {
    mutual_exclusion(sim);
    beliefs_within_server_leases(sim);
    fences_increase(sim);
}

fn merged(mut v: Vec<(Instant, Instant)>) -> Vec<(Instant, Instant)> {
    v.sort();
    let mut out: Vec<(Instant, Instant)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn describe(b: &Belief) -> String {
    format!(
        "client {} lease {:?} fence {} claims {:?} end {:?} segments {:?}",
        b.client,
        b.lease,
        b.fence,
        b.claims,
        b.end,
        b.segments()
    )
}
