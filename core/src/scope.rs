//! Leaving a scope that held a lease (Python's `with`, Java's try-with-resources, Node's
//! `lock.using(fn)`): the lease is released, and if it had been lost before the scope ended the
//! scope's work may have overlapped another holder's, which must not pass silently. One rule,
//! so every binding says it the same way.

use crate::error::{Error, ErrorKind, Result};

/// What leaving a scope on `name`'s lease comes to, once its release answered `was_held`:
/// `NOT_HELD` if the lease had been lost (ended before the release: expired, taken over,
/// deleted), naming the fencing token and the loss's reason where known; `Ok` if it was held,
/// or if an exception is already leaving the scope (`exception_in_flight`: that one is the
/// caller's to see, not hidden behind the loss).
pub fn leave(name: &str, fencing_token: Option<u64>, was_held: bool, exception_in_flight: bool, lost: Option<&str>) -> Result<()> {
    if was_held || exception_in_flight {
        return Ok(());
    }
    let token = fencing_token.map(|t| format!(" (fencing token {t})")).unwrap_or_default();
    let why = lost.map(|reason| format!(": {reason}")).unwrap_or_default();
    Err(Error::new(
        ErrorKind::NotHeld,
        format!(
            "the lease on {name:?}{token} was lost before its scope ended, so the work done in it may have \
             overlapped another holder{why}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loss_without_an_exception_in_flight_is_not_held() {
        assert!(leave("n", Some(7), true, false, None).is_ok());
        assert!(leave("n", Some(7), false, true, Some("expired")).is_ok());
        let e = leave("n", Some(7), false, false, Some("the lease expired")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotHeld);
        assert!(e.message().starts_with("the lease on \"n\" (fencing token 7) was lost"), "{}", e.message());
        assert!(e.message().ends_with(": the lease expired"), "{}", e.message());
        let e = leave("n", None, false, false, None).unwrap_err();
        assert!(e.message().ends_with("overlapped another holder"), "{}", e.message());
    }
}
