//! The memcached backend's wire: four text-protocol commands, each for one server, and what
//! they answer. Every transport (the native one, the Node binding's) performs exactly these.

use crate::engine::RequestId;
use crate::error::Result;

/// One command for one server.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McRequest {
    /// Pass back with the reply.
    pub id: RequestId,
    /// Which server (0-based, in the URL's order).
    pub server: usize,
    /// What to send it.
    pub command: McCommand,
}

/// A text-protocol command (flags are always 0; values are owner tokens, ASCII).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McCommand {
    /// `add <key> 0 <exptime> <len>` + value: store only if absent.
    Add {
        /// The item's key.
        key: String,
        /// The owner token.
        value: String,
        /// Seconds from now (positive, at most 30 days).
        exptime: i64,
    },
    /// `gets <key>`: the value and its cas unique.
    Gets {
        /// The item's key.
        key: String,
    },
    /// `cas <key> 0 <exptime> <len> <cas>` + value: store only if unchanged since the `gets`
    /// that read `cas`; a negative `exptime` stores it already expired (a conditional delete).
    Cas {
        /// The item's key.
        key: String,
        /// The owner token.
        value: String,
        /// Seconds from now, or -1.
        exptime: i64,
        /// The cas unique the `gets` read.
        cas: u64,
    },
    /// `stats`: only its `uptime` is used (after a grant: was the server restarted less than
    /// `max_lease` ago?).
    Stats,
}

/// What a command answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McAnswer {
    /// `STORED`.
    Stored,
    /// `NOT_STORED` (an `add` of a key that exists).
    NotStored,
    /// `EXISTS` (a `cas` of an item changed since its `gets`).
    Exists,
    /// `NOT_FOUND` (a `cas` of an item that is gone).
    NotFound,
    /// `gets` found the item.
    Value {
        /// Its value.
        value: Vec<u8>,
        /// Its cas unique.
        cas: u64,
    },
    /// `gets` found nothing (`END` alone).
    Miss,
    /// `stats`' `uptime`: whole seconds as the server counts them (a fresh memcached 1.6
    /// already says 2).
    Uptime(u64),
}

/// A command's answer, or the transport's failure (`CONNECTION`, `TIMEOUT`, `PROTOCOL`).
pub type McReply = Result<McAnswer>;
