//! The one public Rust client: `Client` → `Lock` / `ReadWriteLock` / `Election` → `Lease`, for
//! every backend a URL can name (Redis, Redis Cluster, Redlock). What a backend cannot do is
//! refused with `UNSUPPORTED` when the handle is made ([`Client::capabilities`] says so
//! beforehand).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::message::Msg;
use crate::capabilities::Capabilities;
use crate::connect::registry;
use crate::connect::{self, Backend, ClientOptions, Spelling};
use crate::engine::Primitive;
use crate::inspect::{Kind, Snapshot};
use crate::listing::Page;
use crate::error::{Error, ErrorKind, Result};
use crate::options::LockOptions;
use crate::connect::LeaseBound;
use crate::time::Duration;

// `ClientOptions` (the data, its defaults and rules) lives in `crate::connect`, shared with
// the Node binding; connecting is the native driver's part.
impl ClientOptions {
    /// Connects to the backend the URL's scheme names and authenticates; a failed AUTH is an
    /// `AUTHENTICATION` error, never a fallback. A Redlock connects to every master it can
    /// reach (the others are retried in the background and count as failed votes meanwhile)
    /// and fails only if none is reachable.
    pub async fn connect(self) -> Result<Client> {
        self.validate()?;
        let target = self.target()?;
        let backend = self.backend()?;
        // The backend's spec starts its transport (which connects and starts the driver).
        let spec = registry::spec_of(backend).0;
        let tx = (spec.connect_native)(&self, &target).await?;
        // Telemetry is always on in the native client: it costs a few small events per call,
        // and `tracing` and `metrics` drop them until the application installs a subscriber
        // or recorder (see native/telemetry.rs).
        let _ = tx.send(Msg::Telemetry(telemetry_config(backend, self.telemetry_lock_names, self.held_too_long)));
        let bound = spec.lease_bound.map(|bound| bound(&self, &target));
        if let Some(bound) = &bound {
            bound.validate()?;
        }
        let inner = Inner {
            tx,
            shown: target.to_string(),
            servers: target.server_urls(),
            capabilities: self.capabilities()?,
            bound,
            backend,
            held_too_long: self.held_too_long,
            tickets: AtomicU64::new(1),
        };
        Ok(Client { inner: Arc::new(inner) })
    }
}

struct Inner {
    tx: mpsc::UnboundedSender<Msg>,
    /// The URL with its password redacted.
    shown: String,
    /// The server, seed node or masters, as redacted URLs.
    servers: Vec<String>,
    capabilities: Capabilities,
    /// The deployment's lease bound (a Redlock's settings: `max_lease` bounds every lease, and
    /// defaults one not given), from its spec.
    bound: Option<Box<dyn LeaseBound>>,
    /// Which backend the URL named (its lock options' rules differ: no `entry_ttl` on ZooKeeper).
    backend: Backend,
    /// The `held_too_long` telemetry threshold it connected with.
    held_too_long: Option<Duration>,
    tickets: AtomicU64,
}

/// A client of one lock service, shared by every lock made from it. Cheap to clone.
///
/// One type for every backend: `Client::connect("redis://...")`, `"redis+cluster://..."` or
/// `"redlock://host1:port,host2:port,host3:port"`. Must be created and used inside a tokio
/// runtime. Dropping the last handle (client, locks and leases) releases every lease it still
/// holds.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects to `url` with the default options: `redis://[user:password@]host[:port][/db]`
    /// or `rediss://...` (TLS, verified against the system roots; see
    /// [`ClientOptions::tls_ca_pem`]), `redis+cluster://` / `rediss+cluster://` (a Redis Cluster
    /// seed node), `redlock://[user:password@]host1[:port],host2[:port],...[/db]` /
    /// `rediss+redlock://...` (a Redlock over independent masters),
    /// `zookeeper://[user:password@]host1[:port],host2[:port],...[/chroot]` (a ZooKeeper ensemble,
    /// one session per client). See [`crate::connect::Target`].
    pub async fn connect(url: &str) -> Result<Client> {
        ClientOptions::new(url).connect().await
    }

    /// What this client's backend can do; handles needing anything else are `UNSUPPORTED`.
    pub fn capabilities(&self) -> Capabilities {
        self.inner.capabilities
    }

    /// The URL with the password redacted.
    pub fn url(&self) -> String {
        self.inner.shown.clone()
    }

    /// Each server's URL (the one server, the cluster's seed node, or every Redlock master)
    /// with passwords redacted.
    pub fn server_urls(&self) -> Vec<String> {
        self.inner.servers.clone()
    }

    /// The deployment's lease bound (a Redlock's settings; `None` for other backends).
    pub fn lease_bound(&self) -> Option<&dyn LeaseBound> {
        self.inner.bound.as_deref()
    }

    /// A lock's options from the values a caller gave (`None`: not given), with this client's
    /// defaults and rules, the same in every binding (see [`ClientOptions::lock_options`]): on
    /// a Redlock a lease not given is 30 s or `max_lease` if shorter, and one that does not fit
    /// `max_lease` is refused; on ZooKeeper an `entry_ttl` is refused (a waiter lives as long as
    /// its session).
    pub fn lock_options(
        &self,
        lease: Option<Duration>,
        auto_renew: Option<bool>,
        wait_timeout: Option<Duration>,
        entry_ttl: Option<Duration>,
        spelling: &Spelling,
    ) -> Result<LockOptions> {
        let (backend, bound) = (self.inner.backend, self.inner.bound.as_deref());
        connect::lock_options_for_backend(backend, bound, lease, auto_renew, wait_timeout, entry_ttl, spelling)
    }

    /// `lock` with a shortest and longest hold (`None`: not given), by this client's backend's
    /// rules (see [`ClientOptions::lock_holds`]): `min_hold` is `UNSUPPORTED` where the backend
    /// cannot keep an entry after its process exits (ZooKeeper, etcd).
    pub fn lock_holds(&self, lock: LockOptions, min_hold: Option<Duration>, max_hold: Option<Duration>, spelling: &Spelling) -> Result<LockOptions> {
        let caps = self.capabilities();
        connect::options::holds_for(&caps, self.inner.bound.as_deref(), lock, min_hold, max_hold, spelling)
    }

    /// Reads lock `name` as a `kind` (mutex, read-write lock, semaphore, election): its holders
    /// (label, fencing token, how long held, remaining lease, this client's reentrant holds)
    /// and its waiters in queue order. An unknown name is an empty snapshot; the name is
    /// validated as for [`lock`](Self::lock). Racy by nature: for humans and dashboards; to
    /// decide whether to write, use the fencing token.
    pub async fn inspect(&self, name: &str, kind: Kind) -> Result<Snapshot> {
        self.inspect_as(name, kind.primitive()).await
    }

    /// Breaks lock `name` read as a `kind`: removes its current holder's entry — only the one
    /// whose fencing token is `fencing_token` when given, so a stale break cannot hit the next
    /// holder — and wakes the next waiter as a release would. Returns what it removed (label,
    /// fencing token), or `None` when nothing was. The broken holder learns of its loss at its
    /// next renewal and its release returns false; the next grant's fencing token is larger.
    /// For a holder known to be dead: safe only with fencing (PROTOCOL.md §15). A token on a
    /// backend without fencing tokens (Redlock, memcached) is `UNSUPPORTED`.
    pub async fn break_lock(&self, name: &str, kind: Kind, fencing_token: Option<u64>) -> Result<Option<crate::break_lock::Broken>> {
        let (reply, result) = oneshot::channel();
        self.send(Msg::Break { name: name.to_string(), kind, fencing_token, reply })?;
        result.await.map_err(|_| closed())?
    }

    /// Adopts the lease `identity` names ([`Lease::identity`](super::Lease::identity) of
    /// another client of the same deployment): one owner-only extend to `options.lease`
    /// confirms it is still current, and the returned lease renews (with `options.auto_renew`),
    /// extends and releases the same hold, with the same fencing token, and reports its loss —
    /// without a second grant (PROTOCOL.md §17). `NOT_HELD` if it is no longer current
    /// (released, expired, broken); `INVALID_ARGUMENT` for a malformed identity, nothing sent;
    /// `UNSUPPORTED` on ZooKeeper and etcd. Both clients then share the hold: the first release
    /// frees it and the other learns of it at its next renewal.
    pub async fn adopt(&self, identity: &str, options: LockOptions) -> Result<super::Lease> {
        self.capabilities().require(crate::capabilities::Capability::Adopt)?;
        let name = crate::adopt::Identity::parse(identity)?.name;
        if let Some(bound) = self.lease_bound() {
            bound.check_lease(options.lease)?;
        }
        let (reply, result) = oneshot::channel();
        self.send(Msg::Adopt { identity: identity.to_string(), options, reply })?;
        let acquired = result.await.map_err(|_| closed())??.ok_or_else(|| Error::protocol("adopt ended without a lease"))?;
        Ok(super::Lease::new(self.clone(), name.into(), acquired, None))
    }

    /// [`inspect`](Self::inspect) through a handle of `primitive` (see
    /// `LockEngine::inspect_as`).
    pub(crate) async fn inspect_as(&self, name: &str, primitive: Primitive) -> Result<Snapshot> {
        let (reply, result) = oneshot::channel();
        self.send(Msg::Inspect { name: name.to_string(), primitive, reply })?;
        result.await.map_err(|_| closed())?
    }

    /// One page of the locks whose names start with `prefix` (every lock if empty): at most
    /// `limit` entries (default 100, capped to 1,000), each a lock someone holds or waits on
    /// with its kind, holder and waiter counts and first holder's label, and the cursor of the
    /// next page (`None`: the last). Pass `cursor` back to continue; a page may be short, even
    /// empty, before the last. Never blocks the server (PROTOCOL.md §16); racy, like inspect.
    /// `UNSUPPORTED` where the backend cannot enumerate its locks.
    pub async fn list(&self, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<Page> {
        let (reply, result) = oneshot::channel();
        self.send(Msg::List { prefix: prefix.to_string(), limit, cursor: cursor.map(String::from), reply })?;
        result.await.map_err(|_| closed())?
    }

    /// Releases every lease and cancels every wait of this client, then stops its driver.
    /// Further calls on any handle fail with `CLOSED`.
    pub async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.inner.tx.send(Msg::Shutdown { reply }).is_ok() {
            let _ = done.await;
        }
    }

    /// Whether telemetry (logs, spans and metric attributes) carries each lock's name. Off by
    /// default: a metric series per lock name is unbounded cardinality for most metrics
    /// backends. Applies to the acquires started from now on.
    pub fn telemetry_lock_names(&self, on: bool) -> Result<()> {
        self.send(Msg::Telemetry(telemetry_config(self.inner.backend, on, self.inner.held_too_long)))
    }

    /// Hands every telemetry event of this client (acquires started and ended, leases released,
    /// lost, at risk, ...) to `listener` too, on the client's driver task, as it is raised:
    /// before the call it ends is answered, so a caller that drains what its listener queued
    /// as its call returns finds the call's events (Python's bridge to `logging`). It must
    /// return quickly (queue, not format) and never wait for this client.
    pub fn on_telemetry(&self, listener: super::telemetry::Listener) -> Result<()> {
        self.send(Msg::Listen { listener, when_idle: false })
    }

    /// Like [`Client::on_telemetry`], but `listener` is called once the driver has nothing else
    /// ready, after the calls an input answered went on, as `tracing` and the metrics are: for
    /// a listener that costs more than a queue push (a crossing into another runtime, a
    /// formatter), which then delays no caller. Events keep their order.
    pub fn on_telemetry_when_idle(&self, listener: super::telemetry::Listener) -> Result<()> {
        self.send(Msg::Listen { listener, when_idle: true })
    }

    pub(crate) fn send(&self, msg: Msg) -> Result<()> {
        self.inner.tx.send(msg).map_err(|_| closed())
    }

    pub(crate) fn ticket(&self) -> u64 {
        self.inner.tickets.fetch_add(1, Ordering::Relaxed)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("url", &self.inner.shown).finish()
    }
}

/// The error of every call on a closed client.
pub(crate) fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the client is closed")
}

/// Telemetry for `backend`: events carry its plain URL scheme as its name (`redis`,
/// `redis+cluster`, `zookeeper`, `postgres`, ...), never the URL itself.
fn telemetry_config(backend: Backend, lock_names: bool, held_too_long: Option<Duration>) -> crate::engine::TelemetryConfig {
    crate::engine::TelemetryConfig { backend: backend.scheme(false), lock_names, held_too_long }
}
