//! The older Redlock API (`Redlock` → `RedlockLock` → `RedlockLease`), kept until bindings
//! move: each is a thin wrapper over the one family ([`Client`], [`Lock`], [`Lease`]) of a
//! Redlock client; new code connects with a `redlock://host1,host2,host3` URL instead. The lead
//! deletes this module once no binding uses it.

use std::fmt;
use std::future::Future;

use super::client::Client;
use super::lease::Lease;
use super::lock::Lock;
use super::redlock_driver;
use crate::connect::{Backend, RedisUrl, RedlockOptions};
use crate::error::Result;
use crate::options::LockOptions;
use crate::redlock::RedlockConfig;
use crate::time::Duration;

impl RedlockOptions {
    /// Connects to every master it can reach; masters that are down are retried in the
    /// background (they count as failed votes meanwhile). Fails if none is reachable or a
    /// master refuses the credentials. Kept until bindings move (use a `redlock://` URL).
    pub async fn connect(self) -> Result<Redlock> {
        self.validate()?;
        let urls: Vec<RedisUrl> = self.urls.iter().map(|u| RedisUrl::parse(u)).collect::<Result<_>>()?;
        let config = self.config();
        let tls = urls.first().is_some_and(RedisUrl::is_tls);
        let shown = format!(
            "{}://{}",
            Backend::Redlock.scheme(tls),
            urls.iter().map(|u| u.to_string().split_once("://").map(|(_, r)| r.to_string()).unwrap_or_default()).collect::<Vec<_>>().join(",")
        );
        let capabilities = Backend::Redlock.capabilities(tls, false);
        let tx =
            redlock_driver::connect(urls.clone(), config.clone(), self.tls_ca_pem.as_deref(), self.connect_timeout, self.response_timeout)
                .await?;
        Ok(Redlock { client: Client::new(tx, shown, urls, capabilities, Some(config)) })
    }
}

/// A Redlock deployment: N independent masters, a lock held when a majority grants it. Kept
/// until bindings move: a [`Client`] made from a `redlock://` URL is the same thing.
#[derive(Clone)]
pub struct Redlock {
    client: Client,
}

impl Redlock {
    /// Connects to the masters at `urls` with the default settings.
    pub async fn connect<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Result<Redlock> {
        RedlockOptions::new(urls).connect().await
    }

    /// The one-family client behind this wrapper.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A lock named `name`; `options.lease` must not exceed the deployment's `max_lease`.
    pub fn lock(&self, name: &str, options: LockOptions) -> Result<RedlockLock> {
        Ok(RedlockLock(self.client.lock(name, options)?))
    }

    /// `options` for a lock of this deployment by the rule of every binding
    /// ([`crate::connect::redlock_lock_options`]).
    pub fn lock_options(&self, options: LockOptions, lease_given: bool) -> Result<LockOptions> {
        crate::connect::redlock_lock_options(self.config(), options, lease_given)
    }

    fn config(&self) -> &RedlockConfig {
        self.client.redlock_config().expect("a Redlock client has Redlock settings")
    }

    /// The deployment's maximum lease (see [`RedlockConfig::max_lease`]).
    pub fn max_lease(&self) -> Duration {
        self.config().max_lease
    }

    /// How many masters, and how many must agree.
    pub fn masters(&self) -> (usize, usize) {
        let n = self.config().masters;
        (n, n / 2 + 1)
    }

    /// The masters' URLs with passwords redacted.
    pub fn urls(&self) -> Vec<String> {
        self.client.server_urls()
    }

    /// Releases every lease and cancels every wait, then stops the driver.
    pub async fn close(&self) {
        self.client.close().await
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock").field("masters", &self.urls()).finish()
    }
}

/// A handle on one named Redlock; kept until bindings move (it is a [`Lock`] of a Redlock
/// [`Client`]).
#[derive(Clone, Debug)]
pub struct RedlockLock(Lock);

impl RedlockLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The lock's options.
    pub fn options(&self) -> &LockOptions {
        self.0.options()
    }

    /// See [`Lock::acquire`].
    pub async fn acquire(&self, timeout: Duration) -> Result<RedlockLease> {
        self.0.acquire(timeout).await.map(RedlockLease)
    }

    /// See [`Lock::acquire_default`].
    pub async fn acquire_default(&self) -> Result<RedlockLease> {
        self.0.acquire_default().await.map(RedlockLease)
    }

    /// See [`Lock::try_acquire`].
    pub async fn try_acquire(&self) -> Result<Option<RedlockLease>> {
        Ok(self.0.try_acquire().await?.map(RedlockLease))
    }
}

/// Proof that a majority of masters holds the lock; kept until bindings move (it is a
/// [`Lease`] without a fencing token).
#[derive(Debug)]
pub struct RedlockLease(Lease);

impl RedlockLease {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// See [`Lease::is_held`].
    pub fn is_held(&self) -> bool {
        self.0.is_held()
    }

    /// See [`Lease::remaining`].
    pub fn remaining(&self) -> Option<Duration> {
        self.0.remaining()
    }

    /// See [`Lease::extend`].
    pub async fn extend(&self, duration: Duration) -> Result<()> {
        self.0.extend(duration).await
    }

    /// See [`Lease::release`].
    pub async fn release(&self) -> Result<bool> {
        self.0.release().await
    }

    /// See [`Lease::lost_reason`].
    pub fn lost_reason(&self) -> Option<crate::Error> {
        self.0.lost_reason()
    }

    /// See [`Lease::lost_signal`].
    pub fn lost_signal(&self) -> impl Future<Output = Option<crate::Error>> + Send + 'static {
        self.0.lost_signal()
    }

    /// See [`Lease::lost`].
    pub async fn lost(&self) -> crate::Error {
        self.0.lost().await
    }
}
