//! What a backend tells the registry about itself: one [`Spec`] value per backend folder
//! (`backend/<name>/spec.rs`), listed once in `backend/mod.rs`. The registry
//! (`connect::registry`) reads nothing else: the schemes, names and capabilities of the kinds of
//! service the folder serves, how it parses its URL's address, the client settings it accepts
//! and refuses, and how a client of it starts (the native driver's transport, or the data
//! engine the Node binding drives).

use super::backend::{Backend, Kind};
use super::options::{ClientOptions, LeaseBound};
use super::spelling::Spelling;
use crate::capabilities::Capabilities;
use crate::data::Connected;
use crate::error::Result;
use crate::random::RandomSource;
use super::target::{Address, Target};
use crate::time::Duration;

/// How a native client of a backend starts: connects its transport and its driver, and hands
/// back the driver's inbox.
#[cfg(feature = "tokio")]
pub(crate) type ConnectNative = for<'a> fn(
    &'a ClientOptions,
    &'a Target,
) -> futures_util::future::BoxFuture<'a, Result<tokio::sync::mpsc::UnboundedSender<crate::native::message::Msg>>>;

/// Parses the address of a URL of `kind` ([`Spec::parse`]).
pub type ParseAddress = fn(kind: &Kind, scheme: &'static str, tls: bool, url: &str, rest: &str) -> Result<Box<dyn Address>>;

/// A deployment's bound on every lease ([`Spec::lease_bound`]).
pub type BoundLeases = fn(options: &ClientOptions, target: &Target) -> Box<dyn LeaseBound>;

/// The data engine and transport plan of a client ([`Spec::connect_data`]).
pub type ConnectData = fn(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Connected>;

/// One backend as the registry knows it.
pub struct Spec {
    /// The kinds of service it serves, with their schemes.
    pub kinds: &'static [Kind],
    /// Parses the address of a URL of `kind` (`rest`: what follows `scheme://`; `url`: all of it;
    /// `scheme`: the lower-case scheme; `tls`: whether it means TLS).
    pub parse: ParseAddress,
    /// What a client of `kind` can do (`backend` and `scheme` are filled in by the registry);
    /// `replica_acks`: whether the client waits for replica acknowledgements.
    pub capabilities: fn(kind: &Kind, replica_acks: bool) -> Capabilities,
    /// Whether keys carry the client's `key_prefix` (the Redis family); the others name locks by
    /// path, key prefix or table and refuse the option, so clients do not show it.
    pub key_prefix: bool,
    /// The backend the `cluster` switch turns a URL of this spec into (`None`: the switch is
    /// refused).
    pub clustered: Option<Backend>,
    /// A deployment that bounds every lease (Redlock's `max_lease` and drift allowance): its
    /// settings from the client options, defaults where none was given and the masters counted
    /// from the URL; not validated (the client's validation does that).
    pub lease_bound: Option<BoundLeases>,
    /// The range of the session timeout, for a backend whose client has a session (`None`: the
    /// setting is refused).
    pub session_timeout: Option<(Duration, Duration)>,
    /// The backend's rules over the client settings, after the ones every backend shares: its
    /// own settings checked, the others' refused, in `spelling`'s words.
    pub validate: fn(options: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()>,
    /// Why a lock of this backend takes no waiter-entry lease (`entry_ttl`), if it takes none.
    pub no_entry_ttl: Option<fn(spelling: &Spelling) -> String>,
    /// The data engine and transport plan of a client (`None`: bindings drive this backend's
    /// typed engine instead).
    pub connect_data: Option<ConnectData>,
    /// The native client's start.
    #[cfg(feature = "tokio")]
    pub(crate) connect_native: ConnectNative,
}
