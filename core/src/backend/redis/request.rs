//! What the Redis backends ask a driver to do: commands as bytes, sent as one pipeline, or a
//! subscription of the notification connection.

use crate::engine::RequestId;

/// One command: its arguments as bytes, starting with the command name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command(pub Vec<Vec<u8>>);

impl Command {
    /// The command name, for logs and tests.
    pub fn name(&self) -> &str {
        self.0
            .first()
            .and_then(|n| std::str::from_utf8(n).ok())
            .unwrap_or("")
    }
}

/// Something the driver must do on the Redis engine's behalf.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Pass back to [`Engine::handle_reply`](super::Engine::handle_reply).
    pub id: RequestId,
    /// What to do.
    pub kind: RequestKind,
}

/// The work a [`Request`] asks for.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// Send the commands as one pipeline on the command connection and reply with one
    /// [`Reply`](super::reply::Reply) per command, in order (server errors stay in place
    /// as `Reply::Error`).
    Pipeline(Vec<Command>),
    /// Subscribe the notification connection to `channel`; reply with an empty vector once the
    /// server confirmed it. Messages then go to [`Engine::handle_notification`](super::Engine::handle_notification).
    Subscribe(String),
    /// Only on a Cluster (a listing's first step, PROTOCOL.md §16): reply with one
    /// [`Reply::Data`](super::reply::Reply::Data) per master of the Cluster, its address
    /// `host:port` as the driver routes to it (any order), from the driver's own view of the
    /// Cluster's slots.
    Masters,
    /// Only on a Cluster: send the commands as one pipeline to the node at address `node` (one a
    /// [`Masters`](Self::Masters) reply named) and reply as for a pipeline; an address the driver
    /// has no connection to fails the request with a `CONNECTION` error.
    OnNode {
        /// The node's address, `host:port`.
        node: String,
        /// The commands, in order.
        commands: Vec<Command>,
    },
}
