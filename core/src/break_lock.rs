//! Breaking a lock (issue 25, PROTOCOL.md §15): an operator removes the current holder's entry
//! of a lock whose holder is known to be dead, and the next waiter is woken as a release would.
//!
//! A break is written once in the engine: it reads the lock as [`inspect`](crate::inspect)
//! does, picks the holder (the one with the fencing token given, else the longest holding),
//! and asks the backend to remove exactly that entry — by its owner token where lockgate wrote
//! it, by its own name where a peer did (a Curator node, an `etcdctl lock` key). The removal
//! is owner-only on every backend, so a break whose holder left meanwhile removes nothing, and
//! one with a stale fencing token never hits the next holder.
//!
//! Safe only with fencing: the broken holder learns of its loss at its next renewal (or watch
//! event) and may still write until then; fenced storage refuses those writes because the next
//! grant's token is larger. Redlock and memcached issue no tokens: breaking there can let two
//! holders work.

use crate::data::Data;
use crate::inspect::{Holder, Snapshot};

/// What a break removed: the broken holder's label and fencing token (either `None` where the
/// entry or the backend records none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// The label the broken holder's client stored, if any.
    pub label: Option<String>,
    /// The broken grant's fencing token, where the backend issues them.
    pub fencing_token: Option<u64>,
}

impl Broken {
    /// What was removed from `holder`.
    pub(crate) fn of(holder: &Holder) -> Broken {
        Broken { label: holder.label.clone(), fencing_token: holder.fencing_token }
    }

    /// As plain [`Data`] for a binding: a map with `label` and `fencing_token` (`fencingToken`
    /// when `camel`), `Null` where unknown.
    pub fn to_data(&self, camel: bool) -> Data {
        Data::map([
            ("label", self.label.clone().map_or(Data::Null, Data::Str)),
            (
                if camel { "fencingToken" } else { "fencing_token" },
                self.fencing_token.map_or(Data::Null, |t| Data::Int(i64::try_from(t).unwrap_or(i64::MAX))),
            ),
        ])
    }
}

/// The holder a break removes from `snapshot`: the one whose fencing token is `fencing_token`
/// when given (none matches: nothing is broken), else the first (the longest holding).
pub(crate) fn choose(snapshot: &Snapshot, fencing_token: Option<u64>) -> Option<&Holder> {
    match fencing_token {
        Some(t) => snapshot.holders.iter().find(|h| h.fencing_token == Some(t)),
        None => snapshot.holders.first(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{Kind, Mode};

    #[test]
    fn a_token_picks_only_its_holder_and_none_picks_the_first() {
        let mut s = Snapshot::empty(Kind::Semaphore);
        assert!(choose(&s, None).is_none());
        s.holders.push(Holder::new(Some("a".into()), Some("one".into()), Some(3), Mode::Shared));
        s.holders.push(Holder::new(Some("b".into()), None, Some(5), Mode::Shared));
        assert_eq!(choose(&s, None).and_then(|h| h.fencing_token), Some(3));
        assert_eq!(choose(&s, Some(5)).and_then(|h| h.token.clone()), Some("b".into()));
        assert!(choose(&s, Some(4)).is_none(), "a stale token breaks nothing");
        let d = Broken::of(&s.holders[0]).to_data(true);
        assert_eq!(d.get("label").and_then(Data::as_str), Some("one"));
        assert_eq!(d.get("fencingToken").and_then(Data::as_int), Some(3));
    }
}
