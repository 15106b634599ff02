//! [`OpenClients`]: the clients a process has not closed yet, for bindings that close them
//! when the process exits (the JVM's shutdown hook): the exit-cleanup policy of
//! [`crate::exit`] in one place, so no binding writes its own.

use std::sync::Mutex;

use super::client::Client;
use crate::exit::EXIT_GRACE;

/// The clients made and not closed yet, each under the key [`add`](Self::add) gave it.
#[derive(Default)]
pub struct OpenClients(Mutex<(u64, Vec<(u64, Client)>)>);

impl OpenClients {
    /// An empty set (usable as a `static`).
    pub const fn new() -> Self {
        OpenClients(Mutex::new((0, Vec::new())))
    }

    /// Keeps `client` to close at exit until [`remove`](Self::remove) is called with the key.
    pub fn add(&self, client: Client) -> u64 {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        open.0 += 1;
        let key = open.0;
        open.1.push((key, client));
        key
    }

    /// The client under `key` was closed by its owner: nothing is left to do at exit.
    pub fn remove(&self, key: u64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1.retain(|(k, _)| *k != key);
    }

    /// Closes every client still open, all at once (held leases released, queued waits
    /// withdrawn), and returns when they are closed or after [`EXIT_GRACE`], whichever is
    /// first: what is not answered by then expires with its lease. A close by a client's owner
    /// meanwhile is harmless (closing twice is closing once). Call it inside a tokio runtime.
    pub async fn close_all(&self) {
        let open = std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).1);
        let closing: Vec<_> = open.into_iter().map(|(_, c)| tokio::spawn(async move { c.close().await })).collect();
        let _ = tokio::time::timeout(EXIT_GRACE, async {
            for c in closing {
                let _ = c.await;
            }
        })
        .await;
    }
}
