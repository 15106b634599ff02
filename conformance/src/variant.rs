//! The server variants of the matrix: each is a backend deployment with a fixture, the URL and
//! options actors connect with, and the capabilities scenarios may need.

use std::time::{Duration, Instant};

use lockgate_conformance::deploy::{Deployment, Kind};
use lockgate_conformance::fixture::redis::RedisFixture;
use lockgate_conformance::fixture::Fixture;

/// The Redlock deployment's max lease: every actor is told it, and a fresh master grants nothing
/// until it has been up this long plus a second (PROTOCOL.md §8).
pub const REDLOCK_MAX_LEASE_MS: u64 = 5000;
/// Independent masters of the Redlock variant.
const REDLOCK_MASTERS: usize = 3;

/// What the client of a variant can do (the library's `Capabilities`), plus what the variant's
/// fixture offers: `redis` (Redis-fixture operations such as `forget_fence`), `proxy` (actors
/// reached through the fault proxy), `restart` (the one server can be restarted empty),
/// `redlock` (independent masters: `master: i` steps and `connect` over some masters).
const EVERYTHING: &[&str] = &["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "redis"];

/// A variant's name, its capabilities and the servers it runs on.
pub struct Spec {
    pub name: &'static str,
    pub capabilities: Vec<&'static str>,
    kind: Kind,
}

/// Every variant, in run order (the Redlock masters' delayed-restart wait passes meanwhile).
pub fn all() -> Vec<Spec> {
    let with = |extra: &[&'static str]| EVERYTHING.iter().chain(extra).copied().collect::<Vec<_>>();
    vec![
        Spec { name: "single", capabilities: with(&["proxy", "restart"]), kind: Kind::Single },
        Spec { name: "cluster", capabilities: with(&[]), kind: Kind::Cluster },
        Spec { name: "replica", capabilities: with(&["replica_acks"]), kind: Kind::Replica { replicas: 1 } },
        Spec { name: "redlock", capabilities: vec!["redlock", "redis", "reentrant"], kind: Kind::Redlock { masters: REDLOCK_MASTERS } },
    ]
}

/// A started variant.
pub struct Variant {
    pub name: &'static str,
    pub capabilities: Vec<&'static str>,
    pub fixture: Box<dyn Fixture>,
    /// When its servers may be used (Redlock masters refuse grants for a while after a start).
    pub ready_at: Instant,
}

impl Variant {
    /// Starts the variant's servers; actors will put their keys under `prefix`.
    pub fn start(spec: Spec, prefix: &str) -> Result<Variant, String> {
        let redlock = matches!(spec.kind, Kind::Redlock { .. });
        let servers = Deployment::start(spec.kind, &[]).map_err(|e| format!("{}: {e}", spec.name))?;
        let ready_at = if redlock { Instant::now() + Duration::from_millis(REDLOCK_MAX_LEASE_MS + 2000) } else { Instant::now() };
        let fixture = Box::new(RedisFixture::new(servers, prefix, REDLOCK_MAX_LEASE_MS));
        Ok(Variant { name: spec.name, capabilities: spec.capabilities, fixture, ready_at })
    }

    /// Whether the variant offers everything in `needs`.
    pub fn offers(capabilities: &[&str], needs: &[String]) -> bool {
        needs.iter().all(|n| capabilities.contains(&n.as_str()))
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains(&capability)
    }
}
