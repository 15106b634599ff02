//! What a failed ZooKeeper request means to the engine: one error for each [`ZkFailure`], and
//! from it an attempt's, a renewal's or a release's verdict. In one place so the three kinds of
//! call agree on which failures are worth retrying.

use super::request::ZkFailure;
use crate::engine::{Attempt, Renewal, Release};
use crate::error::{Error, ErrorKind};

/// The error a failed request stands for.
pub(super) fn failure_error(f: ZkFailure) -> Error {
    match f {
        ZkFailure::ConnectionLoss(why) => connection_lost(&why),
        ZkFailure::SessionExpired => Error::new(ErrorKind::Connection, "the ZooKeeper session expired"),
        ZkFailure::Other(e) => e,
        other => Error::protocol(format!("unexpected ZooKeeper failure: {other}")),
    }
}

fn connection_lost(why: &str) -> Error {
    Error::new(ErrorKind::Connection, format!("ZooKeeper connection lost: {why}"))
}

/// A retryable attempt failure: the node it may have created is kept (found again by its
/// prefix), not undone.
pub(super) fn attempt_transient(error: Error) -> Attempt {
    let why = Some(error.message().to_string());
    Attempt::Transient { error, why, undo: false }
}

/// An attempt that failed with `f`: tried again if the failure may pass, else given up (and
/// what it created undone).
pub(super) fn attempt_failure(f: ZkFailure) -> Attempt {
    let error = failure_error(f);
    if error.retryable() {
        attempt_transient(error)
    } else {
        Attempt::Failed { error, undo: true }
    }
}

/// A renewal or extend whose check failed with `f`: it may pass (the lease is not lost yet),
/// or it will not.
pub(super) fn renewal_failure(f: ZkFailure) -> Renewal {
    let error = failure_error(f);
    if error.retryable() {
        Renewal::Transient(error)
    } else {
        Renewal::Failed(error)
    }
}

/// A release whose step failed with `f`: whether its nodes went is unknown, and a retry may
/// tell if the failure may pass.
pub(super) fn release_failure(f: ZkFailure) -> Release {
    let error = failure_error(f);
    let retry = error.retryable();
    Release::Unconfirmed { error, retry }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_the_engines_verdicts() {
        let loss = attempt_failure(ZkFailure::ConnectionLoss("reset".into()));
        assert!(matches!(&loss, Attempt::Transient { error, undo: false, .. } if error.kind() == ErrorKind::Connection && error.retryable()), "{loss:?}");
        let expired = attempt_failure(ZkFailure::SessionExpired);
        assert!(matches!(&expired, Attempt::Transient { undo: false, .. }), "{expired:?}");
        let auth = attempt_failure(ZkFailure::Other(Error::new(ErrorKind::Authentication, "no auth")));
        assert!(matches!(&auth, Attempt::Failed { error, undo: true } if error.kind() == ErrorKind::Authentication), "{auth:?}");
        assert_eq!(failure_error(ZkFailure::NotEmpty).kind(), ErrorKind::Protocol);
        // Renewals and releases draw the same line between failures that may pass and not.
        let loss = renewal_failure(ZkFailure::ConnectionLoss("reset".into()));
        assert!(matches!(&loss, Renewal::Transient(e) if e.message() == "ZooKeeper connection lost: reset"), "{loss:?}");
        let auth = renewal_failure(ZkFailure::Other(Error::new(ErrorKind::Authentication, "no auth")));
        assert!(matches!(&auth, Renewal::Failed(e) if e.kind() == ErrorKind::Authentication), "{auth:?}");
        let loss = release_failure(ZkFailure::ConnectionLoss("reset".into()));
        assert!(matches!(&loss, Release::Unconfirmed { error, retry: true } if error.kind() == ErrorKind::Connection), "{loss:?}");
        let auth = release_failure(ZkFailure::Other(Error::new(ErrorKind::Authentication, "no auth")));
        assert!(matches!(&auth, Release::Unconfirmed { retry: false, .. }), "{auth:?}");
    }
}
