//! What a failed etcd request means to the engine: one error for each [`EtcdFailure`], and from
//! it an attempt's, a renewal's or a release's verdict, in one place so the three kinds of call
//! agree on which failures are worth retrying.

use super::request::EtcdFailure;
use crate::engine::{Attempt, Renewal, Release};
use crate::error::{Error, ErrorKind};

/// The error a failed request stands for.
pub(super) fn failure_error(f: EtcdFailure) -> Error {
    match f {
        EtcdFailure::ConnectionLost(why) => Error::new(ErrorKind::Connection, format!("etcd connection lost: {why}")),
        EtcdFailure::Unavailable(why) => Error::new(ErrorKind::Connection, format!("etcd unavailable: {why}")),
        EtcdFailure::LeaseNotFound => Error::new(ErrorKind::Connection, "the etcd session lease expired"),
        EtcdFailure::Compacted { compact_revision } => {
            Error::new(ErrorKind::Connection, format!("etcd compacted the revision watched (oldest kept: {compact_revision})"))
        }
        EtcdFailure::Other(e) => e,
    }
}

/// A retryable attempt failure: the key it may have created is kept (its name is known: the
/// retry's transaction finds it), not undone.
pub(super) fn attempt_transient(error: Error) -> Attempt {
    let why = Some(error.message().to_string());
    Attempt::Transient { error, why, undo: false }
}

/// An attempt that failed with `f`: tried again if the failure may pass, else given up (and
/// what it created undone).
pub(super) fn attempt_failure(f: EtcdFailure) -> Attempt {
    let error = failure_error(f);
    if error.retryable() {
        attempt_transient(error)
    } else {
        Attempt::Failed { error, undo: true }
    }
}

/// A renewal or extend that failed with `f`: it may pass (the lease is not lost yet), or not.
pub(super) fn renewal_failure(f: EtcdFailure) -> Renewal {
    let error = failure_error(f);
    if error.retryable() {
        Renewal::Transient(error)
    } else {
        Renewal::Failed(error)
    }
}

/// A release whose step failed with `f`: whether its key went is unknown, and a retry may tell
/// if the failure may pass.
pub(super) fn release_failure(f: EtcdFailure) -> Release {
    let error = failure_error(f);
    let retry = error.retryable();
    Release::Unconfirmed { error, retry }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_the_engines_verdicts() {
        let loss = attempt_failure(EtcdFailure::ConnectionLost("reset".into()));
        assert!(matches!(&loss, Attempt::Transient { error, undo: false, .. } if error.retryable()), "{loss:?}");
        let busy = attempt_failure(EtcdFailure::Unavailable("no leader".into()));
        assert!(matches!(&busy, Attempt::Transient { .. }), "{busy:?}");
        let auth = attempt_failure(EtcdFailure::Other(Error::new(ErrorKind::Authentication, "bad password")));
        assert!(matches!(&auth, Attempt::Failed { error, undo: true } if error.kind() == ErrorKind::Authentication), "{auth:?}");
        assert!(matches!(renewal_failure(EtcdFailure::ConnectionLost("x".into())), Renewal::Transient(_)));
        let auth = renewal_failure(EtcdFailure::Other(Error::new(ErrorKind::Authentication, "no")));
        assert!(matches!(auth, Renewal::Failed(e) if e.kind() == ErrorKind::Authentication));
        assert!(matches!(release_failure(EtcdFailure::ConnectionLost("x".into())), Release::Unconfirmed { retry: true, .. }));
        assert!(matches!(release_failure(EtcdFailure::Other(Error::protocol("x"))), Release::Unconfirmed { retry: false, .. }));
    }
}
