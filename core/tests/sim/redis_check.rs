//! The Redis model's server-side checks (its holders sets, published grants, lock keys and
//! fence counters), beside the generic ones of `check.rs`, which this module re-exports so a
//! Redis test reaches both as `check::`.

use std::collections::BTreeMap;

use lockgate_core::time::Instant;

pub use super::check::*;
use super::redis::RedisSim as Sim;

/// Server side, for the shared primitives: the live members of every holders set (each with
/// its lease on the server clock) are compatible at every instant. Holds across restarts too.
pub fn server_exclusion(sim: &Sim) {
    let mut keys: Vec<&str> =
        sim.server.grants.iter().filter(|g| g.key.ends_with(":holders")).map(|g| g.key.as_str()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let spans = sim.server.store.memberships_of(key);
        let mut tokens: Vec<&str> = spans.iter().map(|s| s.0.as_str()).collect();
        tokens.sort();
        tokens.dedup();
        let items: Vec<Span> = spans
            .iter()
            .filter(|s| s.1 < s.2)
            .map(|(m, from, to)| {
                let g = sim
                    .server
                    .grants
                    .iter()
                    .find(|g| g.key == key && &g.token == m)
                    .expect("every holder was granted");
                let owner = tokens.binary_search(&m.as_str()).expect("listed");
                (*from, *to, owner, g.kind, g.limit)
            })
            .collect();
        sweep(key, "server-side", &items, |o| {
            format!("token {} during {:?}", tokens[o], sim.server.store.memberships(key, tokens[o]))
        });
    }
}

/// Every pushed grant wakes exactly one waiter: each `granted` message belongs to exactly one
/// promotion, is published once, and goes to the channel of the client that queued the token.
pub fn one_wakeup_per_grant(sim: &Sim) {
    let promoted: Vec<_> = sim.server.grants.iter().filter(|g| g.promoted).collect();
    assert_eq!(promoted.len(), sim.server.published.len(), "promotions and published messages differ");
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (c, client) in sim.clients.iter().enumerate() {
        for (_, req) in &client.requests {
            if let lockgate_core::backend::redis::RequestKind::Pipeline(cmds) = &req.kind {
                for cmd in cmds {
                    let script = super::redis::script_of(cmd);
                    if matches!(script, Some("acquire" | "shared_acquire")) {
                        let n: usize = String::from_utf8_lossy(&cmd.0[2]).parse().expect("numkeys");
                        let token = String::from_utf8_lossy(&cmd.0[3 + n]).into_owned();
                        let prev = owner.insert(token.clone(), c);
                        assert!(prev.is_none_or(|p| p == c), "token {token} used by two clients");
                    }
                }
            }
        }
    }
    let channels: std::collections::BTreeSet<&str> = sim.clients.iter().map(|c| c.engine.channel()).collect();
    assert_eq!(channels.len(), sim.clients.len(), "two clients share a channel");
    for (g, p) in promoted.iter().zip(&sim.server.published) {
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
            .server
            .grants
            .iter()
            .find(|g| g.key == b.key && Some(g.fence) == b.fence)
            .unwrap_or_else(|| panic!("no server grant with the fencing token the client saw: {:?}", describe(b)));
        let held = if b.key.ends_with(":holders") {
            merged(sim.server.store.memberships(&b.key, &grant.token))
        } else {
            merged(sim.server.store.holdings(&b.key, &grant.token))
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
    for g in &sim.server.grants {
        if let Some(&prev) = last.get(g.key.as_str()) {
            assert!(g.fence > prev, "fence {} of {} at {:?} does not exceed the previous {prev}", g.fence, g.key, g.at);
        }
        last.insert(&g.key, g.fence);
    }
    // And what clients were told matches what the server issued, in grant order.
    for b in &sim.beliefs {
        assert!(
            sim.server.grants.iter().any(|g| g.key == b.key && Some(g.fence) == b.fence),
            "unknown fence {b:?}"
        );
    }
}

/// Nothing but fence counters is left on the server (no lock, queue or waiters key), and every
/// fence counter expires.
pub fn no_lock_state_left(sim: &mut Sim) {
    nothing_left(sim);
    let now: Instant = sim.now;
    sim.server.store.set_now(now);
    for k in sim.server.store.keys() {
        assert!(sim.server.store.pttl(&k) >= 0, "fence key {k} has no TTL");
    }
}

/// All safety checks that hold in every scenario without server data loss.
pub fn safety(sim: &Sim) {
    mutual_exclusion(sim);
    server_exclusion(sim);
    beliefs_within_server_leases(sim);
    fences_increase(sim);
}
