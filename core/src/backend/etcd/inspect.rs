//! Inspecting a lock (PROTOCOL.md §14): one range read of every key under the lock's prefix in
//! create order (at most [`INSPECT_KEYS`]), each key holding or waiting by the recipes' rules
//! (`recipe.rs`): the first key holds a mutex, a write lock or an election; a reader holds
//! while no writer was created before it; a semaphore's first `permits` keys hold (etcd stores
//! no count: a handle's own, or 1 when inspected by name). A key's value is its label (a
//! candidate's, its published value) and its create revision a holder's fencing token. Keys
//! carry no time a client reads back and their leases' TTLs are other clients' (a request each,
//! and a permission on their leases): `remaining`, `held_for` and `waiting_for` are unknown.

use std::sync::Arc;

use super::backend::EtcdBackend;
use super::failure::failure_error;
use super::layout::{self, Family};
use super::request::{EtcdOp, EtcdReply, EtcdRequest, EtcdResult, KeyValue, Order, Range};
use super::step::{Job, Step};
use super::target::{EtcdTarget, Recipe};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Purpose, Verdict};
use crate::error::Error;
use crate::inspect::{Holder, Kind, Mode, Snapshot, Waiter};

/// The most keys one inspect reads: a snapshot for people, bounded so a runaway queue cannot
/// make it a large read.
pub const INSPECT_KEYS: i64 = 10_000;

impl EtcdBackend {
    /// Starts an inspect of `target`: one range read.
    pub(super) fn inspect_start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, purpose: Purpose, target: &Arc<EtcdTarget>) {
        let job = Job::read(purpose, target, self.epoch, Step::Inspect, ctx.now);
        let range = Range::prefix(target.queue_prefix(), Order::CreateAscending, INSPECT_KEYS);
        self.send(ctx, job, Step::Inspect, EtcdOp::Range(range));
    }

    /// Handles the reply to an inspect.
    pub(super) fn inspect_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        let inspected = match reply {
            Ok(EtcdReply::Range { kvs, .. }) => Ok(snapshot(&job.target, &kvs, |prefix, lease| {
                self.used.get(&(prefix.to_string(), lease)).map(|t| t.to_string())
            })),
            Ok(other) => Err(Error::protocol(format!("etcd answered an inspect's read with {other:?}"))),
            Err(f) => Err(failure_error(f)),
        };
        self.settle(ctx, job, None, Verdict::Inspected(inspected), answers);
    }
}

/// The snapshot of `target` from its keys in create order; `token_of(family prefix, lease)`
/// names this client's own keys' owner tokens.
pub(crate) fn snapshot(target: &EtcdTarget, kvs: &[KeyValue], token_of: impl Fn(&str, i64) -> Option<String>) -> Snapshot {
    let kind = match target.recipe {
        Recipe::Mutex => Kind::Mutex,
        Recipe::Read | Recipe::Write => Kind::ReadWrite,
        Recipe::Semaphore { .. } => Kind::Semaphore,
        Recipe::Leader { .. } => Kind::Election,
    };
    let mut s = Snapshot::empty(kind);
    let writers = layout::family_prefix(&target.base, Family::Write);
    let readers = layout::family_prefix(&target.base, Family::Read);
    let mut writer_seen = false;
    for (i, kv) in kvs.iter().enumerate() {
        let key = String::from_utf8_lossy(&kv.key);
        let reader = kind == Kind::ReadWrite && key.starts_with(&readers);
        let holds = match target.recipe {
            Recipe::Semaphore { permits } => i < permits as usize,
            Recipe::Read | Recipe::Write if reader => !writer_seen,
            _ => i == 0,
        };
        if kind == Kind::ReadWrite && !reader {
            writer_seen = true;
        }
        let mode = if reader || kind == Kind::Semaphore { Mode::Shared } else { Mode::Exclusive };
        let text = (!kv.value.is_empty()).then(|| String::from_utf8_lossy(&kv.value).into_owned());
        let (label, value) = if kind == Kind::Election { (None, text) } else { (text, None) };
        if holds {
            let prefix = if reader { readers.as_str() } else if key.starts_with(&writers) { writers.as_str() } else { "" };
            let prefix = if prefix.is_empty() { target.queue_prefix() } else { prefix.to_string() };
            let mut h = Holder::new(token_of(&prefix, kv.lease), label, u64::try_from(kv.create_revision).ok(), mode);
            h.value = value;
            h.entry = Some(key.clone().into_owned());
            s.holders.push(h);
        } else {
            s.waiters.push(Waiter { label, waiting_for: None, mode });
        }
    }
    if let Recipe::Semaphore { permits } = target.recipe {
        if !kvs.is_empty() {
            s.permits = Some(permits);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitive::Primitive;

    fn kv(key: &str, rev: i64, value: &str, lease: i64) -> KeyValue {
        KeyValue { key: key.into(), value: value.into(), create_revision: rev, mod_revision: rev, version: 1, lease }
    }

    #[test]
    fn keys_hold_or_wait_by_the_recipes() {
        let t = EtcdTarget::new("rw", &Primitive::Write).unwrap();
        let kvs = [
            kv("/lockgate/rw/rw/read/a", 5, "r1", 10),
            kv("/lockgate/rw/rw/write/b", 6, "w", 11),
            kv("/lockgate/rw/rw/read/c", 7, "", 12),
        ];
        let s = snapshot(&t, &kvs, |p, l| (p == "/lockgate/rw/rw/read/" && l == 10).then(|| "tok".to_string()));
        assert_eq!(s.holders.len(), 1);
        assert_eq!((s.holders[0].label.as_deref(), s.holders[0].fencing_token, s.holders[0].token.as_deref()), (Some("r1"), Some(5), Some("tok")));
        let w: Vec<_> = s.waiters.iter().map(|w| (w.label.clone(), w.mode)).collect();
        assert_eq!(w, vec![(Some("w".into()), Mode::Exclusive), (None, Mode::Shared)]);
        let m = EtcdTarget::new("m", &Primitive::Mutex).unwrap();
        assert_eq!(snapshot(&m, &[], |_, _| None), Snapshot::empty(Kind::Mutex));
        let sem = EtcdTarget::new("s", &Primitive::Semaphore { permits: 2 }).unwrap();
        let kvs = [kv("/lockgate/semaphore/s/a", 1, "x", 1), kv("/lockgate/semaphore/s/b", 2, "y", 2), kv("/lockgate/semaphore/s/c", 3, "z", 3)];
        let s = snapshot(&sem, &kvs, |_, _| None);
        assert_eq!((s.holders.len(), s.waiters.len(), s.permits), (2, 1, Some(2)));
        let e = EtcdTarget::new("e", &Primitive::Leader { value: String::new() }).unwrap();
        let s = snapshot(&e, &[kv("/lockgate/election/e/a", 9, "10.0.0.1", 1)], |_, _| None);
        assert_eq!((s.writer().unwrap().value.as_deref(), s.writer().unwrap().label.clone()), (Some("10.0.0.1"), None));
    }
}
