//! Inspecting a Redlock (PROTOCOL.md §14): REDLOCK_INSPECT on every master, one round; the
//! holder is the owner value a majority of masters hold (what a grant needs), its label the one
//! those masters keep beside it, its remaining lease the time a majority still holds it (the
//! quorum-th longest PTTL among them). No fencing token (§8), no queue (waiters retry), no
//! grant time.

use crate::error::{Error, ErrorKind, Result};
use crate::inspect::{Holder, Kind, Mode, Snapshot};
use crate::backend::redis::reply::Reply;
use crate::time::Duration;

/// One master's `{owner value, pttl_ms, label}`.
fn parse(r: &Reply) -> Result<(String, i64, String)> {
    let bad = || Error::protocol("redlock_inspect returned an unexpected reply");
    let Reply::Array(items) = r else { return Err(bad()) };
    let text = |r: &Reply| match r {
        Reply::Data(d) => String::from_utf8(d.clone()).map_err(|_| bad()),
        _ => Err(bad()),
    };
    match items.as_slice() {
        [value, Reply::Int(pttl), label] => Ok((text(value)?, *pttl, text(label)?)),
        _ => Err(bad()),
    }
}

/// The snapshot from the masters' replies (`None`: no answer), with `quorum` masters needed.
pub(super) fn snapshot(reads: &[Option<Reply>], quorum: usize) -> Result<Snapshot> {
    let answered: Vec<(String, i64, String)> = reads.iter().flatten().map(parse).collect::<Result<_>>()?;
    if answered.len() < quorum {
        return Err(Error::new(
            ErrorKind::Connection,
            format!("{} of {} masters answered the inspect, {quorum} are needed", answered.len(), reads.len()),
        ));
    }
    let mut s = Snapshot::empty(Kind::Mutex);
    let mut seen: Vec<&str> = Vec::new();
    for (value, ..) in &answered {
        if value.is_empty() || seen.contains(&value.as_str()) {
            continue;
        }
        seen.push(value);
        let holding: Vec<&(String, i64, String)> = answered.iter().filter(|(v, ..)| v == value).collect();
        if holding.len() < quorum {
            continue;
        }
        // The owner value (`<token>:<masters>`, §8) is the engine's owner token.
        let token = Some(value.clone());
        let label = holding.iter().map(|(.., l)| l).find(|l| !l.is_empty()).cloned();
        let mut pttls: Vec<i64> = holding.iter().map(|(_, p, _)| *p).collect();
        pttls.sort_unstable_by(|a, b| b.cmp(a));
        let mut h = Holder::new(token, label, None, Mode::Exclusive);
        h.remaining = u64::try_from(pttls[quorum - 1]).ok().map(Duration::from_millis);
        s.holders.push(h);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: &str, pttl: i64, label: &str) -> Option<Reply> {
        Some(Reply::Array(vec![Reply::Data(value.into()), Reply::Int(pttl), Reply::Data(label.into())]))
    }

    #[test]
    fn the_holder_is_the_value_a_majority_holds() {
        let reads = [read("abc:3", 900, "w1"), read("abc:3", 700, "w1"), read("", -2, "")];
        let s = snapshot(&reads, 2).unwrap();
        let h = &s.holders[0];
        assert_eq!((h.token.as_deref(), h.label.as_deref(), h.remaining, h.fencing_token), (Some("abc:3"), Some("w1"), Some(Duration::from_millis(700)), None));
        // A minority's key holds nothing; an empty lock is empty.
        let s = snapshot(&[read("abc:3", 900, ""), read("", -2, ""), None], 2).unwrap();
        assert!(!s.is_locked());
        assert!(snapshot(&[read("", -2, ""), read("", -2, ""), read("", -2, "")], 2).unwrap().holders.is_empty());
    }

    #[test]
    fn too_few_answers_or_bad_ones_are_errors_never_panics() {
        assert_eq!(snapshot(&[read("", -2, ""), None, None], 2).unwrap_err().code(), "CONNECTION");
        for bad in [Reply::Nil, Reply::Int(1), Reply::Array(vec![Reply::Data(vec![0xff]), Reply::Int(1), Reply::Data(vec![])])] {
            assert_eq!(snapshot(&[Some(bad.clone()), read("", -2, ""), read("", -2, "")], 2).unwrap_err().code(), "PROTOCOL");
        }
    }
}
