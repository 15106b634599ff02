//! Safety properties over a finished (or paused) simulation.

use std::collections::BTreeMap;

use lockgate_core::time::Instant;

use super::harness::{Belief, Sim};

/// No two leases of one lock were believed held at the same virtual instant; for the shared
/// primitives, holds overlap only as their modes allow (see [`exclusion`]).
pub fn mutual_exclusion(sim: &Sim) {
    exclusion(sim);
}

/// The mode (`'r'`/`'w'`) and shared-hold limit of the grant with `fence` on `key` (a mutex
/// grant is `'w'`).
fn mode_of(sim: &Sim, key: &str, fence: u64) -> (char, u64) {
    sim.redis
        .grants
        .iter()
        .find(|g| g.key == key && g.fence == fence)
        .map_or(('w', 0), |g| (g.kind, g.limit))
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
    limit.map_or(true, |l| active.len() as u64 <= l)
}

/// Checks that at every instant the intervals active on one key are compatible; `what(i)`
/// describes interval `i` for the failure message. Items: (from, to, owner, mode, limit).
fn sweep(
    key: &str,
    side: &str,
    items: &[(Instant, Instant, usize, char, u64)],
    what: impl Fn(usize) -> String,
) {
    for &(t, _, _, _, _) in items {
        let active: Vec<&(Instant, Instant, usize, char, u64)> =
            items.iter().filter(|x| x.0 <= t && t < x.1).collect();
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
            owners
                .iter()
                .map(|&o| what(o))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Client side: the leases believed held at one instant are compatible — one mutex holder, one
/// writer or leader alone, readers together, at most `permits` semaphore holders.
pub fn exclusion(sim: &Sim) {
    let mut by_key: BTreeMap<&str, Vec<(Instant, Instant, usize, char, u64)>> = BTreeMap::new();
    for (i, b) in sim.beliefs.iter().enumerate() {
        let (mode, limit) = mode_of(sim, &b.key, b.fence);
        for (from, to) in b.segments() {
            by_key
                .entry(&b.key)
                .or_default()
                .push((from, to, i, mode, limit));
        }
    }
    for (key, items) in by_key {
        sweep(key, "client-side", &items, |i| describe(&sim.beliefs[i]));
    }
}

/// Server side, for the shared primitives: the live members of every holders set (each with
/// its lease on the server clock) are compatible at every instant. Holds across restarts too.
pub fn server_exclusion(sim: &Sim) {
    let mut keys: Vec<&str> = sim
        .redis
        .grants
        .iter()
        .filter(|g| g.key.ends_with(":holders"))
        .map(|g| g.key.as_str())
        .collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let spans = sim.redis.store.memberships_of(key);
        let mut tokens: Vec<&str> = spans.iter().map(|s| s.0.as_str()).collect();
        tokens.sort();
        tokens.dedup();
        let items: Vec<(Instant, Instant, usize, char, u64)> = spans
            .iter()
            .filter(|s| s.1 < s.2)
            .map(|(m, from, to)| {
                let g = sim
                    .redis
                    .grants
                    .iter()
                    .find(|g| g.key == key && &g.token == m)
                    .expect("every holder was granted");
                let owner = tokens.binary_search(&m.as_str()).expect("listed");
                (*from, *to, owner, g.kind, g.limit)
            })
            .collect();
        sweep(key, "server-side", &items, |o| {
            format!(
                "token {} during {:?}",
                tokens[o],
                sim.redis.store.memberships(key, tokens[o])
            )
        });
    }
}

/// The most holds of `key` believed at one instant (to show that sharing really happened).
pub fn max_concurrent_beliefs(sim: &Sim, key: &str) -> usize {
    let segs: Vec<(Instant, Instant)> = sim
        .beliefs
        .iter()
        .filter(|b| b.key == key)
        .flat_map(|b| merged(b.segments()))
        .collect();
    segs.iter()
        .map(|&(t, _)| segs.iter().filter(|s| s.0 <= t && t < s.1).count())
        .max()
        .unwrap_or(0)
}

/// Leadership terms (fencing tokens) strictly increase from one believed holder of `key` to
/// the next, in the order they started to hold.
pub fn terms_increase(sim: &Sim, key: &str) {
    let mut firsts: Vec<(Instant, u64, usize)> = sim
        .beliefs
        .iter()
        .filter(|b| b.key == key)
        .filter_map(|b| b.segments().first().map(|s| (s.0, b.fence, b.client)))
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

/// Every pushed grant wakes exactly one waiter: each `granted` message belongs to exactly one
/// promotion, is published once, and goes to the channel of the client that queued the token.
pub fn one_wakeup_per_grant(sim: &Sim) {
    let promoted: Vec<_> = sim.redis.grants.iter().filter(|g| g.promoted).collect();
    assert_eq!(
        promoted.len(),
        sim.redis.published.len(),
        "promotions and published messages differ"
    );
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (c, client) in sim.clients.iter().enumerate() {
        for (_, req) in &client.requests {
            if let lockgate_core::RequestKind::Pipeline(cmds) = &req.kind {
                for cmd in cmds {
                    let script = super::redis::script_of(cmd);
                    if matches!(script, Some("acquire" | "shared_acquire")) {
                        let n: usize = String::from_utf8_lossy(&cmd.0[2]).parse().expect("numkeys");
                        let token = String::from_utf8_lossy(&cmd.0[3 + n]).into_owned();
                        let prev = owner.insert(token.clone(), c);
                        assert!(
                            prev.map_or(true, |p| p == c),
                            "token {token} used by two clients"
                        );
                    }
                }
            }
        }
    }
    let channels: std::collections::BTreeSet<&str> =
        sim.clients.iter().map(|c| c.engine.channel()).collect();
    assert_eq!(
        channels.len(),
        sim.clients.len(),
        "two clients share a channel"
    );
    for (g, p) in promoted.iter().zip(&sim.redis.published) {
        assert_eq!(p.payload, format!("granted {} {}", g.token, g.fence));
        let c = owner[&g.token];
        assert_eq!(
            p.channel,
            sim.clients[c].engine.channel(),
            "the grant of {} went to another client's channel",
            g.token
        );
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
        let held = if b.key.ends_with(":holders") {
            merged(sim.redis.store.memberships(&b.key, &grant.token))
        } else {
            merged(sim.redis.store.holdings(&b.key, &grant.token))
        };
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
    server_exclusion(sim);
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
