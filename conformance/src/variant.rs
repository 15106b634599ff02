//! The server variants of the matrix: each is a backend deployment with a fixture, the URL and
//! options actors connect with, and the capabilities scenarios may need.

use std::time::{Duration, Instant};

use lockgate_conformance::deploy::{Deployment, Kind};
use lockgate_conformance::fixture::etcd::EtcdFixture;
use lockgate_conformance::fixture::memcached::MemcachedFixture;
use lockgate_conformance::fixture::redis::RedisFixture;
use lockgate_conformance::fixture::sql::SqlFixture;
use lockgate_conformance::fixture::zookeeper::ZooKeeperFixture;
use lockgate_conformance::fixture::Fixture;
use lockgate_conformance::sql::Engine;
use lockgate_core::connect::Backend;

/// The Redlock deployment's max lease: every actor is told it, and a fresh master grants nothing
/// until it has been up this long plus a second (PROTOCOL.md §8).
pub const REDLOCK_MAX_LEASE_MS: u64 = 5000;
/// Independent masters of the Redlock variant.
const REDLOCK_MASTERS: usize = 3;
/// The session timeout every actor of a ZooKeeper variant asks for. A crashed client's nodes go
/// when its session expires, so this is the ZooKeeper counterpart of the short leases the
/// crash scenarios give (a crashed holder is replaced within 1.5 s); the test servers' 200 ms
/// tick lets the ensemble grant it.
pub const ZOOKEEPER_SESSION_MS: u64 = 1000;
/// Members of the `zookeeper-ensemble` variant.
const ZOOKEEPER_MEMBERS: usize = 3;
/// The session lease TTL every actor of an etcd variant asks for. Unlike a ZooKeeper session
/// it bounds no crash scenario: a key lives on a lease of its lock's own lease (rounded up to
/// whole seconds, 1 s for the crash scenarios' 600 ms), the session's TTL only capping it. So
/// it only sets how long a default-lease (30 s) hold stays valid between keepalives: two
/// thirds of it. At 1 s that was 667 ms, and a loaded run's half-second stalls of an actor
/// lost such holds honestly (a leader's release then found it was not held); 3 s gives 2 s.
pub const ETCD_SESSION_MS: u64 = 3000;
/// Members of the `etcd-cluster` variant.
const ETCD_MEMBERS: usize = 3;
/// Servers of the `memcached` variant (locks spread over both).
const MEMCACHED_SERVERS: usize = 2;
/// What the memcached variant leaves out of the scenarios its capabilities allow: the two crash
/// bounds. memcached frees a crashed holder's lock 2 to 3 s after its lease (whole-second
/// expiries plus the clock slack, README "What a crash costs"): `crash_bound_is_the_lease`'s
/// 1.2 s tolerance over its 2 s lease falls inside that spread (it would pass or fail by the
/// phase of memcached's clock), and `holder_crash_frees_within_lease` always fails (its 600 ms
/// lease is freed after 2 s at least) and would cost 26 s of every run to say so. memcached's
/// own bound is tested on a real server instead (`core/tests/memcached_faults.rs`).
const MEMCACHED_LEFT_OUT: &[&str] = &["crash_bound_is_the_lease", "holder_crash_frees_within_lease"];

/// The scenarios the ensemble runs besides its own (`needs: ["ensemble"]`): a mixed-language
/// subset of every primitive on three members, where reads may come from followers.
const ENSEMBLE_SUBSET: &[&str] = &[
    "mutual_exclusion",
    "waiters_served_in_arrival_order",
    "holder_crash_frees_within_lease",
    "paused_holder_loses_before_next_grant",
    "semaphore_never_exceeds_permits",
    "writers_exclusive_under_contention",
    "election_resign_hands_over",
];

/// What the library says a client of `backend` can do (`Capabilities`, by name): the variant's
/// capabilities come from the core, so a backend gaining one runs the scenarios needing it.
fn library(backend: Backend, replica_acks: bool) -> Vec<&'static str> {
    backend.capabilities(false, replica_acks).pairs().into_iter().filter(|(_, on)| *on).map(|(name, _)| name).collect()
}

/// The library's capabilities plus what the variant's fixture offers: `redis` (Redis-fixture
/// operations such as `forget_fence`), `transient_errors` (the server can answer "try again"
/// for a while), `proxy` (actors reached through the fault proxy), `restart` (the one server
/// can be restarted empty), `redlock` (independent masters: `master: i` steps and `connect` over
/// some masters), `zookeeper` (a ZooKeeper fixture), `ensemble` (three ZooKeeper members),
/// `etcd` (an etcd fixture), `sql` (a SQL fixture: PostgreSQL or MariaDB), `memcached` (a
/// memcached fixture), `labels` (the backend stores each client's `label` with its entries and
/// the fixture reads them: `expect_labels`), `inspect` (the backend answers `inspect`, issue 25;
/// listed per variant while the backends gain it), `break` (the backend breaks a lock: issue
/// 25, PROTOCOL.md §15).
/// listed per variant while the backends gain it). Listing is the library's `list_locks`.
fn with(mut library: Vec<&'static str>, fixture: &[&'static str]) -> Vec<&'static str> {
    library.extend(fixture);
    library
}

/// Which scenarios a variant runs of those whose needs it meets. A new scenario runs on a
/// variant that leaves some out (`AllBut`) unless listed there.
#[derive(Clone, Copy, Debug)]
pub enum Runs {
    /// Every one.
    All,
    /// Only these (and those needing something only this variant offers).
    Only(&'static [&'static str]),
    /// Every one but these.
    AllBut(&'static [&'static str]),
}

/// A variant's name, its capabilities and the servers it runs on.
pub struct Spec {
    pub name: &'static str,
    pub capabilities: Vec<&'static str>,
    /// Which of the scenarios whose needs it meets run here.
    pub subset: Runs,
    /// Whether a run without `--variants` (`./run test`) includes it; the others run only when
    /// named.
    pub default: bool,
    kind: Kind,
}

/// Every variant, in run order (the Redlock masters' delayed-restart wait passes meanwhile).
/// With `--jobs 2` the variants alternate between two streams: single, replica, the ensemble
/// and etcd in one, cluster, Redlock, the standalone ZooKeeper and etcd-cluster in the other,
/// so both take about as long; PostgreSQL joins the first and MariaDB the second.
pub fn all() -> Vec<Spec> {
    let redis = &["redis", "transient_errors", "labels", "inspect", "break"];
    vec![
        Spec { name: "single", capabilities: with(library(Backend::Redis, false), &["redis", "transient_errors", "proxy", "restart", "labels", "inspect", "break"]), subset: Runs::All, default: true, kind: Kind::Single },
        Spec { name: "cluster", capabilities: with(library(Backend::RedisCluster, false), redis), subset: Runs::All, default: true, kind: Kind::Cluster },
        Spec { name: "replica", capabilities: with(library(Backend::Redis, true), redis), subset: Runs::All, default: true, kind: Kind::Replica { replicas: 1 } },
        Spec { name: "redlock", capabilities: with(library(Backend::Redlock, false), &["redlock", "redis", "labels", "inspect", "break"]), subset: Runs::All, default: true, kind: Kind::Redlock { masters: REDLOCK_MASTERS } },
        Spec {
            name: "zookeeper-ensemble",
            capabilities: with(library(Backend::ZooKeeper, false), &["zookeeper", "ensemble", "labels"]),
            subset: Runs::Only(ENSEMBLE_SUBSET),
            default: true,
           
            kind: Kind::ZooKeeper { members: ZOOKEEPER_MEMBERS, proxied: false },
        },
        Spec {
            name: "zookeeper",
            capabilities: with(library(Backend::ZooKeeper, false), &["zookeeper", "proxy", "labels", "inspect", "break"]),
            subset: Runs::All,
            default: true,
           
            kind: Kind::ZooKeeper { members: 1, proxied: false },
        },
        // etcd (issue 16): one member, and the ensemble's subset on a 3-member cluster.
        Spec {
            name: "etcd",
            capabilities: with(library(Backend::Etcd, false), &["etcd", "proxy", "labels", "inspect", "break"]),
            subset: Runs::All,
            default: true,
            kind: Kind::Etcd { members: 1, proxied: false },
        },
        Spec {
            name: "etcd-cluster",
            capabilities: with(library(Backend::Etcd, false), &["etcd", "labels"]),
            subset: Runs::Only(ENSEMBLE_SUBSET),
            default: true,
            kind: Kind::Etcd { members: ETCD_MEMBERS, proxied: false },
        },
        // SQL (issue 17): one PostgreSQL and one MariaDB server, actors reach them through the
        // fault proxy where a scenario needs it.
        Spec {
            name: "postgres",
            capabilities: with(library(Backend::Postgres, false), &["sql", "proxy", "labels", "inspect", "break"]),
            subset: Runs::All,
            default: true,
            kind: Kind::Sql { engine: Engine::Postgres, proxied: false },
        },
        Spec {
            name: "mariadb",
            capabilities: with(library(Backend::MySql, false), &["sql", "proxy", "labels", "inspect", "break"]),
            subset: Runs::All,
            default: true,
            kind: Kind::Sql { engine: Engine::MariaDb, proxied: false },
        },
        // memcached (issue 29): two servers, each lock's item on one of them; actors reach them
        // through fault proxies where a scenario needs it; a server restarts empty.
        Spec {
            name: "memcached",
            capabilities: with(library(Backend::Memcached, false), &["memcached", "proxy", "restart", "inspect", "break"]),
            subset: Runs::AllBut(MEMCACHED_LEFT_OUT),
            default: true,
            kind: Kind::Memcached { servers: MEMCACHED_SERVERS, memory_mb: lockgate_conformance::memcached::DEFAULT_MEMORY_MB },
        },
    ]
}

/// The variants a run without `--variants` runs.
pub fn defaults() -> Vec<Spec> {
    all().into_iter().filter(|s| s.default).collect()
}

/// A started variant.
pub struct Variant {
    pub name: &'static str,
    pub capabilities: Vec<&'static str>,
    pub subset: Runs,
    pub fixture: Box<dyn Fixture>,
    /// When its servers may be used (Redlock masters refuse grants for a while after a start).
    pub ready_at: Instant,
}

impl Variant {
    /// Starts the variant's servers; actors will put their keys under `prefix` (on Redis).
    pub fn start(spec: Spec, prefix: &str) -> Result<Variant, String> {
        let redlock = matches!(spec.kind, Kind::Redlock { .. });
        let zookeeper = matches!(spec.kind, Kind::ZooKeeper { .. });
        let etcd = matches!(spec.kind, Kind::Etcd { .. });
        let sql = matches!(spec.kind, Kind::Sql { .. });
        let memcached = matches!(spec.kind, Kind::Memcached { .. });
        let servers = Deployment::start(spec.kind, &[]).map_err(|e| format!("{}: {e}", spec.name))?;
        let ready_at = if redlock {
            Instant::now() + Duration::from_millis(REDLOCK_MAX_LEASE_MS + 2000)
        } else if memcached {
            // memcached's uptime reads up to 3 s more than the server has been up.
            Instant::now() + Duration::from_millis(lockgate_conformance::fixture::memcached::MAX_LEASE_MS + 3500)
        } else {
            Instant::now()
        };
        let fixture: Box<dyn Fixture> = if zookeeper {
            Box::new(ZooKeeperFixture::new(servers, ZOOKEEPER_SESSION_MS))
        } else if etcd {
            Box::new(EtcdFixture::new(servers, ETCD_SESSION_MS))
        } else if sql {
            Box::new(SqlFixture::new(servers))
        } else if memcached {
            Box::new(MemcachedFixture::new(servers))
        } else {
            Box::new(RedisFixture::new(servers, prefix, REDLOCK_MAX_LEASE_MS))
        };
        Ok(Variant { name: spec.name, capabilities: spec.capabilities, subset: spec.subset, fixture, ready_at })
    }

    /// Whether the variant offers everything in `needs`.
    /// A need `!name` asks for a variant that lacks `name` (a scenario of what is refused there).
    pub fn offers(capabilities: &[&str], needs: &[String]) -> bool {
        needs.iter().all(|n| match n.strip_prefix('!') {
            Some(lacked) => !capabilities.contains(&lacked),
            None => capabilities.contains(&n.as_str()),
        })
    }

    /// Whether scenario `name` needing `needs` runs on a variant with these `capabilities` and
    /// `subset`: it needs nothing the variant lacks, and the subset takes it (a variant running
    /// only some runs those listed and those needing what only such a variant offers,
    /// `ensemble`).
    pub fn runs(capabilities: &[&str], subset: Runs, name: &str, needs: &[String]) -> bool {
        Self::offers(capabilities, needs)
            && match subset {
                Runs::All => true,
                Runs::Only(s) => s.contains(&name) || needs.iter().any(|n| n == "ensemble"),
                Runs::AllBut(s) => !s.contains(&name),
            }
    }
}
