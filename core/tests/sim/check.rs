//! Safety properties over a finished (or paused) simulation, for every backend: what clients
//! believed (the harness's beliefs) against what the model says each grant was. The Redis
//! model's server-side checks are in `redis_check.rs`.

use std::collections::BTreeMap;

use lockgate_core::time::Instant;

use super::harness::{Belief, Sim};
use super::model::Model;

/// No two leases of one lock were believed held at the same virtual instant; for the shared
/// primitives, holds overlap only as their modes allow (see [`exclusion`]).
pub fn mutual_exclusion<M: Model>(sim: &Sim<M>) {
    exclusion(sim);
}

/// Whether holds of these modes may coexist: any `w` only alone, `r` up to the smallest limit.
fn compatible(active: &[(char, u64)]) -> bool {
    if active.len() <= 1 {
        return true;
    }
    if active.iter().any(|a| a.0 == 'w') {
        return false;
    }
    let limit = active.iter().map(|a| a.1).filter(|&l| l > 0).min();
    limit.is_none_or(|l| active.len() as u64 <= l)
}

/// One stretch of a hold on one lock: (from, to, owner, mode, limit).
pub type Span = (Instant, Instant, usize, char, u64);

/// Checks that at every instant the intervals active on one key are compatible; `what(i)`
/// describes owner `i` for the failure message.
pub fn sweep(key: &str, side: &str, items: &[Span], what: impl Fn(usize) -> String) {
    for &(t, _, _, _, _) in items {
        let active: Vec<&Span> = items.iter().filter(|x| x.0 <= t && t < x.1).collect();
        let mut owners: Vec<usize> = active.iter().map(|x| x.2).collect();
        owners.sort();
        owners.dedup();
        let modes: Vec<(char, u64)> = owners
            .iter()
            .map(|o| {
                let x = active.iter().find(|x| x.2 == *o).expect("listed");
                (x.3, x.4)
            })
            .collect();
        assert!(
            compatible(&modes),
            "{side} exclusion violated on {key} at {t:?}: {modes:?} held together by\n{}",
            owners.iter().map(|&o| what(o)).collect::<Vec<_>>().join("\n")
        );
    }
}

/// Client side: the leases believed held at one instant are compatible — one mutex holder, one
/// writer or leader alone, readers together, at most `permits` semaphore holders. A belief
/// lasts from the outcome that granted it until its `valid_until` (as renewals and extends
/// moved it), its release, its loss or its client's crash.
pub fn exclusion<M: Model>(sim: &Sim<M>) {
    let mut by_key: BTreeMap<&str, Vec<Span>> = BTreeMap::new();
    for (i, b) in sim.beliefs.iter().enumerate() {
        let (mode, limit) = sim.server.hold_mode(&b.key, b.fence);
        for (from, to) in b.segments() {
            by_key.entry(&b.key).or_default().push((from, to, i, mode, limit));
        }
    }
    for (key, items) in by_key {
        sweep(key, "client-side", &items, |i| describe(&sim.beliefs[i]));
    }
}

/// The most holds of `key` believed at one instant (to show that sharing really happened).
pub fn max_concurrent_beliefs<M: Model>(sim: &Sim<M>, key: &str) -> usize {
    let segs: Vec<(Instant, Instant)> =
        sim.beliefs.iter().filter(|b| b.key == key).flat_map(|b| merged(b.segments())).collect();
    segs.iter().map(|&(t, _)| segs.iter().filter(|s| s.0 <= t && t < s.1).count()).max().unwrap_or(0)
}

/// Leadership terms (fencing tokens) strictly increase from one believed holder of `key` to
/// the next, in the order they started to hold.
pub fn terms_increase<M: Model>(sim: &Sim<M>, key: &str) {
    let mut firsts: Vec<(Instant, u64, usize)> = sim
        .beliefs
        .iter()
        .filter(|b| b.key == key)
        .filter_map(|b| {
            let fence = b.fence.unwrap_or_else(|| panic!("a grant without a fencing token: {}", describe(b)));
            b.segments().first().map(|s| (s.0, fence, b.client))
        })
        .collect();
    firsts.sort();
    for w in firsts.windows(2) {
        assert!(
            w[1].1 > w[0].1,
            "term {} (client {}) from {:?} does not exceed the earlier leader's {} (client {})",
            w[1].1,
            w[1].2,
            w[1].0,
            w[0].1,
            w[0].2
        );
    }
}

/// Every exclusive lock's fencing tokens strictly increase in the order its holders started
/// to hold (for backends that issue them).
pub fn fences_follow_holding_order<M: Model>(sim: &Sim<M>) {
    let mut keys: Vec<&str> = sim
        .beliefs
        .iter()
        .filter(|b| sim.server.hold_mode(&b.key, b.fence).0 == 'w')
        .map(|b| b.key.as_str())
        .collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        terms_increase(sim, key);
    }
}

/// Fencing tokens order every hold of a lock that excludes another: for each two holds of one
/// key of which at least one is exclusive (`w`), the one that started to hold first has the
/// smaller token. Shared holds (readers, semaphore permits) may start in any order among
/// themselves (two readers' grants race), which [`fences_follow_holding_order`] would not allow.
pub fn fences_order_exclusive_holds<M: Model>(sim: &Sim<M>) {
    let mut by_key: BTreeMap<&str, Vec<(Instant, u64, char, &Belief)>> = BTreeMap::new();
    for b in &sim.beliefs {
        let mode = sim.server.hold_mode(&b.key, b.fence).0;
        let fence = b.fence.unwrap_or_else(|| panic!("a grant without a fencing token: {}", describe(b)));
        if let Some(s) = b.segments().first() {
            by_key.entry(&b.key).or_default().push((s.0, fence, mode, b));
        }
    }
    for (key, mut holds) in by_key {
        holds.sort_by_key(|h| (h.0, h.1));
        for (i, later) in holds.iter().enumerate() {
            for earlier in &holds[..i] {
                if earlier.2 == 'w' || later.2 == 'w' {
                    assert!(
                        later.1 > earlier.1,
                        "{key}: token {} ({}) from {:?} does not exceed the token {} ({}) of a hold that started earlier:\n{}\n{}",
                        later.1,
                        later.2,
                        later.0,
                        earlier.1,
                        earlier.2,
                        describe(earlier.3),
                        describe(later.3)
                    );
                }
            }
        }
    }
}

/// No grant came with a fencing token (a backend that cannot give one, like Redlock).
pub fn no_fencing_tokens<M: Model>(sim: &Sim<M>) {
    for b in &sim.beliefs {
        assert!(b.fence.is_none(), "a fencing token from a backend that has none: {}", describe(b));
    }
}

/// Nothing is left on the servers that must not outlive its users.
pub fn nothing_left<M: Model>(sim: &mut Sim<M>) {
    let left = sim.lock_state_keys();
    assert!(left.is_empty(), "keys left on the server after everything was released: {left:?}");
}

pub fn merged(mut v: Vec<(Instant, Instant)>) -> Vec<(Instant, Instant)> {
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

pub fn describe(b: &Belief) -> String {
    format!(
        "client {} lease {:?} fence {:?} claims {:?} end {:?} segments {:?}",
        b.client,
        b.lease,
        b.fence,
        b.claims,
        b.end,
        b.segments()
    )
}
