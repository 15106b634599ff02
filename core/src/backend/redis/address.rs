//! What a Redis-protocol URL names: its servers, each as a plain `redis://` / `rediss://` URL
//! (the one server, a Cluster's seed node, or every Redlock master), read back from a
//! [`Target`] by [`Target::servers`].

use super::url::RedisUrl;
use crate::connect::{Address, Target};

/// The servers of a Redis, Redis Cluster or Redlock URL, and the URL as shown.
pub struct Servers {
    /// Each server in the order given.
    pub servers: Vec<RedisUrl>,
    /// The URL as given, its password replaced by `***`.
    pub shown: String,
}

impl Address for Servers {
    fn shown(&self) -> String {
        self.shown.clone()
    }

    fn scrub(&self, message: &str) -> String {
        self.servers.iter().fold(message.to_string(), |m, s| s.scrub(&m))
    }

    fn server_urls(&self) -> Vec<String> {
        self.servers.iter().map(|u| u.to_string()).collect()
    }
}

impl Target {
    /// Every server as a `redis://` / `rediss://` URL: the one server, the cluster's seed node,
    /// or the Redlock masters in the order given; empty for other backends.
    pub fn servers(&self) -> &[RedisUrl] {
        self.address::<Servers>().map_or(&[], |a| a.servers.as_slice())
    }
}
