//! The one error taxonomy every binding mirrors: a stable code and a retryable flag.

use std::fmt;

/// What went wrong, as a stable category. Bindings map each kind to one
/// exception class / `code` string; the strings from [`ErrorKind::code`] never change.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An argument was rejected before any network call (empty name, zero lease, bad URL...).
    InvalidArgument,
    /// The wait for a lock ran out.
    Timeout,
    /// The caller does not (or no longer) hold the lease: expired, stolen, deleted or released.
    NotHeld,
    /// The backend could not be reached or the connection broke.
    Connection,
    /// The server rejected the credentials (never retried: a silent fallback would be worse).
    Authentication,
    /// The server replied with something the protocol does not allow.
    Protocol,
    /// The operation was cancelled by the caller (task cancelled, AbortSignal, interrupt).
    Cancelled,
    /// The client was closed; no further operation is possible on it.
    Closed,
    /// This handle already holds the lock and is not reentrant: acquiring again through it
    /// would wait for itself forever (python-redis-lock's `AlreadyAcquired`).
    AlreadyHeld,
    /// The backend cannot do what was asked: a semaphore on a Redlock, replica acknowledgements
    /// on a Redis Cluster, ... (see [`Capabilities`](crate::capabilities::Capabilities)). Not
    /// retryable: the same call on the same client fails the same way.
    Unsupported,
}

impl ErrorKind {
    /// Every kind, in a stable order (bindings iterate this to build their class tables).
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidArgument,
        ErrorKind::Timeout,
        ErrorKind::NotHeld,
        ErrorKind::Connection,
        ErrorKind::Authentication,
        ErrorKind::Protocol,
        ErrorKind::Cancelled,
        ErrorKind::Closed,
        ErrorKind::AlreadyHeld,
        ErrorKind::Unsupported,
    ];

    /// The stable, language-neutral code (documented in PROTOCOL.md).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::NotHeld => "NOT_HELD",
            ErrorKind::Connection => "CONNECTION",
            ErrorKind::Authentication => "AUTHENTICATION",
            ErrorKind::Protocol => "PROTOCOL",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::Closed => "CLOSED",
            ErrorKind::AlreadyHeld => "ALREADY_HELD",
            ErrorKind::Unsupported => "UNSUPPORTED",
        }
    }

    /// Whether trying the same call again later can succeed without changing anything.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorKind::Timeout | ErrorKind::Connection)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An error from lockgate: a kind plus a human-readable message that never contains credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// Builds an error of `kind`; `message` must already be free of secrets.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Shorthand for [`ErrorKind::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unsupported, message)
    }

    /// Shorthand for [`ErrorKind::Protocol`].
    pub fn protocol(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Protocol, message)
    }

    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The stable code of the category (`"TIMEOUT"`, ...).
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// Whether the same call may succeed if tried again.
    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    /// The message, without the code.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout lockgate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_stable() {
        let codes: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        assert_eq!(ErrorKind::Timeout.code(), "TIMEOUT");
        assert!(ErrorKind::Timeout.retryable());
        assert!(!ErrorKind::InvalidArgument.retryable());
        assert_eq!(ErrorKind::Unsupported.code(), "UNSUPPORTED");
        assert!(!Error::unsupported("x").retryable());
        assert_eq!(Error::invalid("x").to_string(), "INVALID_ARGUMENT: x");
    }
}
