//! Reading INSPECT's and SHARED_INSPECT's replies (PROTOCOL.md §14) into a [`Snapshot`].
//! Anything unexpected is a `PROTOCOL` error naming the script (a transient server error a
//! retryable `CONNECTION` one), never a panic.

use super::reply::{self, Reply};
use crate::error::Result;
use crate::inspect::{Holder, Kind, Mode, Snapshot, Waiter};
use crate::time::Duration;

/// The mutex: `{now_us, holder_token, pttl_ms, fence, queue, waiters}`.
pub fn parse_mutex(r: &Reply) -> Result<Snapshot> {
    let bad = || reply::unexpected("inspect", r);
    let [now, holder, pttl, fence, queue, waiters] = items(r).ok_or_else(bad)?;
    let now_us = number(now).ok_or_else(bad)?;
    let waiters = pairs(waiters).ok_or_else(bad)?;
    let label = |token: &str| waiters.iter().find(|(f, _)| f.strip_prefix("l:") == Some(token)).map(|(_, v)| v.clone());
    let mut snapshot = Snapshot::empty(Kind::Mutex);
    let holder = text(holder).ok_or_else(bad)?;
    if !holder.is_empty() {
        let fence = number(fence).ok_or_else(bad)?;
        let mut h = Holder::new(Some(holder.clone()), label(&holder), Some(fence).filter(|f| *f > 0), Mode::Exclusive);
        h.held_for = since(now_us, fence);
        h.remaining = match pttl {
            Reply::Int(p) if *p >= 0 => Some(Duration::from_millis(*p as u64)),
            // No expiry: a key set by hand; the lease is unbounded.
            Reply::Int(-1) => None,
            _ => return Err(bad()),
        };
        snapshot.holders.push(h);
    }
    for (token, score) in pairs(queue).ok_or_else(bad)? {
        let entry = waiters.iter().find(|(f, _)| *f == token).map(|(_, v)| v.as_str());
        // Only a live entry waits: a dead one is skipped by the next promote.
        if live(entry, now_us, 3).ok_or_else(bad)? {
            snapshot.waiters.push(Waiter { label: label(&token), waiting_for: since_score(now_us, &score), mode: Mode::Exclusive });
        }
    }
    Ok(snapshot)
}

/// A semaphore, read-write lock or election: `{now_us, holders, queue, waiters, info}`.
pub fn parse_shared(kind: Kind, r: &Reply) -> Result<Snapshot> {
    let bad = || reply::unexpected("shared_inspect", r);
    let [now, holders, queue, waiters, info] = items(r).ok_or_else(bad)?;
    let now_us = number(now).ok_or_else(bad)?;
    let now_ms = now_us / 1000;
    let waiters = pairs(waiters).ok_or_else(bad)?;
    let info = pairs(info).ok_or_else(bad)?;
    let field = |prefix: &str, token: &str| {
        info.iter().find(|(f, _)| f.strip_prefix(prefix) == Some(token)).map(|(_, v)| v.clone())
    };
    let holder_mode = match info.iter().find(|(f, _)| f == "mode").map(|(_, v)| v.as_str()) {
        Some("r") => Mode::Shared,
        _ => Mode::Exclusive,
    };
    let mut snapshot = Snapshot::empty(kind);
    for (token, score) in pairs(holders).ok_or_else(bad)? {
        let end_ms: u64 = score.parse().map_err(|_| bad())?;
        // A holder whose lease ran out is gone for every script (purged before it reads).
        if end_ms < now_ms {
            continue;
        }
        let fence = match field("f:", &token) {
            Some(f) => Some(f.parse::<u64>().map_err(|_| bad())?),
            None => None,
        };
        let mut h = Holder::new(Some(token.clone()), field("l:", &token), fence, holder_mode);
        h.held_for = fence.and_then(|f| since(now_us, f));
        h.remaining = Some(Duration::from_millis(end_ms - now_ms));
        if kind == Kind::Election {
            h.value = field("v:", &token);
        }
        snapshot.holders.push(h);
    }
    // Oldest grant first (the sorted set orders by lease end).
    snapshot.holders.sort_by_key(|h| h.fencing_token);
    for (token, score) in pairs(queue).ok_or_else(bad)? {
        let entry = waiters.iter().find(|(f, _)| *f == token).map(|(_, v)| v.as_str());
        if !live(entry, now_us, 5).ok_or_else(bad)? {
            continue;
        }
        let mode = match entry.and_then(|e| e.split('|').nth(2)) {
            Some("r") => Mode::Shared,
            _ => Mode::Exclusive,
        };
        snapshot.waiters.push(Waiter { label: field("l:", &token), waiting_for: since_score(now_us, &score), mode });
    }
    // Recorded while the semaphore is in use (PROTOCOL.md §7).
    if kind == Kind::Semaphore {
        if let Some(p) = field("s:", "permits") {
            snapshot.permits = Some(p.parse().map_err(|_| bad())?);
        }
    }
    Ok(snapshot)
}

/// Whether a waiter's entry (`deadline_ms|...`, `fields` parts) is live at `now_us`; `None` for
/// an entry that cannot be read. A queue member without an entry is dead (the scripts drop it).
fn live(entry: Option<&str>, now_us: u64, fields: usize) -> Option<bool> {
    let Some(entry) = entry else { return Some(false) };
    // The channel is last and may itself hold '|'.
    let mut parts = entry.splitn(fields, '|');
    let deadline: u64 = parts.next()?.parse().ok()?;
    (parts.count() == fields - 1).then_some(deadline >= now_us / 1000)
}

/// How long ago server time `at_us` was, seen at `now_us` (zero if later: a fence raised past
/// the clock by grants in the same microsecond).
fn since(now_us: u64, at_us: u64) -> Option<Duration> {
    Some(Duration::from_micros(now_us.saturating_sub(at_us)))
}

/// A queue score (arrival sequence: server time in µs, PROTOCOL.md §1) as a wait so far.
fn since_score(now_us: u64, score: &str) -> Option<Duration> {
    // Scores come back as decimal text, possibly in exponent form for large doubles.
    let at = score.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    since(now_us, at as u64)
}

fn items<const N: usize>(r: &Reply) -> Option<&[Reply; N]> {
    match r {
        Reply::Array(a) => a.as_slice().try_into().ok(),
        _ => None,
    }
}

fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Data(d) => String::from_utf8(d.clone()).ok(),
        Reply::Status(s) => Some(s.clone()),
        _ => None,
    }
}

fn number(r: &Reply) -> Option<u64> {
    match r {
        Reply::Int(i) if *i >= 0 => Some(*i as u64),
        _ => text(r)?.parse().ok(),
    }
}

/// A flat `[k1, v1, k2, v2, ...]` array (HGETALL, ZRANGE WITHSCORES) as pairs of text.
fn pairs(r: &Reply) -> Option<Vec<(String, String)>> {
    let Reply::Array(a) = r else { return None };
    if a.len() % 2 != 0 {
        return None;
    }
    a.chunks(2).map(|kv| Some((text(&kv[0])?, text(&kv[1])?))).collect()
}

/// Why a reply was refused, for tests.
#[cfg(test)]
fn refused(r: Result<Snapshot>) -> crate::error::Error {
    r.unwrap_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Reply {
        Reply::Data(s.as_bytes().to_vec())
    }

    fn arr(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| d(s)).collect())
    }

    const NOW: &str = "1700000010000000";

    #[test]
    fn a_mutex_with_a_holder_and_waiters_in_queue_order() {
        let r = Reply::Array(vec![
            d(NOW),
            d("aaa"),
            Reply::Int(2500),
            d("1700000004000000"),
            arr(&["bbb", "1700000008000000", "ccc", "1.700000009e15", "dead", "1700000009500000"]),
            arr(&[
                "bbb", "1700000011000|500|chan", "ccc", "1700000011000|500|chan", "dead", "1|500|chan",
                "l:aaa", "holder-host:1", "l:ccc", "worker 3",
            ]),
        ]);
        let s = parse_mutex(&r).unwrap();
        assert_eq!(s.holders.len(), 1);
        let h = &s.holders[0];
        assert_eq!((h.label.as_deref(), h.fencing_token, h.mode), (Some("holder-host:1"), Some(1700000004000000), Mode::Exclusive));
        assert_eq!((h.held_for, h.remaining), (Some(Duration::from_secs(6)), Some(Duration::from_millis(2500))));
        assert_eq!(h.token.as_deref(), Some("aaa"));
        let w: Vec<_> = s.waiters.iter().map(|w| (w.label.clone(), w.waiting_for)).collect();
        assert_eq!(w, vec![(None, Some(Duration::from_secs(2))), (Some("worker 3".into()), Some(Duration::from_secs(1)))]);
    }

    #[test]
    fn an_unknown_mutex_is_empty() {
        let r = Reply::Array(vec![d(NOW), d(""), Reply::Int(-2), d("0"), arr(&[]), arr(&[])]);
        assert_eq!(parse_mutex(&r).unwrap(), Snapshot::empty(Kind::Mutex));
    }

    #[test]
    fn a_semaphore_counts_live_holders_and_its_permits() {
        let r = Reply::Array(vec![
            d(NOW),
            arr(&["gone", "1699999999000", "t2", "1700000012000", "t1", "1700000020000"]),
            arr(&["w1", "1700000009000000"]),
            arr(&["w1", "1700000011000|500|r|2|chan"]),
            arr(&["mode", "r", "f:t1", "1700000001000000", "f:t2", "1700000002000000", "l:t2", "two", "s:permits", "2", "l:w1", "waiting"]),
        ]);
        let s = parse_shared(Kind::Semaphore, &r).unwrap();
        assert_eq!(s.permits, Some(2));
        let h: Vec<_> = s.holders.iter().map(|h| (h.token.clone().unwrap(), h.label.clone(), h.remaining, h.mode)).collect();
        assert_eq!(
            h,
            vec![
                ("t1".into(), None, Some(Duration::from_secs(10)), Mode::Shared),
                ("t2".into(), Some("two".into()), Some(Duration::from_secs(2)), Mode::Shared)
            ]
        );
        assert_eq!(s.waiters, vec![Waiter { label: Some("waiting".into()), waiting_for: Some(Duration::from_secs(1)), mode: Mode::Shared }]);
    }

    #[test]
    fn an_election_leader_shows_its_value() {
        let r = Reply::Array(vec![
            d(NOW),
            arr(&["t1", "1700000020000"]),
            arr(&[]),
            arr(&[]),
            arr(&["mode", "w", "f:t1", "1700000001000000", "v:t1", "10.0.0.1:80"]),
        ]);
        let s = parse_shared(Kind::Election, &r).unwrap();
        assert_eq!(s.writer().unwrap().value.as_deref(), Some("10.0.0.1:80"));
        assert_eq!(s.permits, None);
    }

    #[test]
    fn bad_replies_are_protocol_errors_never_panics() {
        let bad = [
            Reply::Nil,
            Reply::Int(1),
            Reply::Array(vec![]),
            Reply::Array(vec![d("x"), d(""), Reply::Int(-2), d("0"), arr(&[]), arr(&[])]),
            Reply::Array(vec![d(NOW), d("aaa"), d("soon"), d("1"), arr(&[]), arr(&[])]),
            Reply::Array(vec![d(NOW), d("aaa"), Reply::Int(5), d("x"), arr(&[]), arr(&[])]),
            Reply::Array(vec![d(NOW), d(""), Reply::Int(-2), d("0"), arr(&["odd"]), arr(&[])]),
            Reply::Array(vec![d(NOW), d(""), Reply::Int(-2), d("0"), arr(&["w", "1"]), arr(&["w", "x|y|z"])]),
            Reply::Array(vec![d(NOW), Reply::Data(vec![0xff]), Reply::Int(5), d("1"), arr(&[]), arr(&[])]),
        ];
        for r in bad {
            assert_eq!(refused(parse_mutex(&r)).code(), "PROTOCOL", "{r:?}");
        }
        let shared_bad = [
            Reply::Array(vec![d(NOW), arr(&["t", "soon"]), arr(&[]), arr(&[]), arr(&[])]),
            Reply::Array(vec![d(NOW), arr(&["t", "1700000020000"]), arr(&[]), arr(&[]), arr(&["f:t", "-"])]),
            Reply::Array(vec![d(NOW), arr(&["t", "1700000020000"]), arr(&[]), arr(&[]), arr(&["s:permits", "many"])]),
            Reply::Array(vec![d(NOW), arr(&[]), arr(&[]), arr(&[])]),
        ];
        for r in shared_bad {
            assert_eq!(refused(parse_shared(Kind::Semaphore, &r)).code(), "PROTOCOL", "{r:?}");
        }
        let busy = Reply::Error("BUSY running a script".into());
        assert_eq!(refused(parse_mutex(&busy)).code(), "CONNECTION");
    }
}
