//! Inspecting a lock (PROTOCOL.md §14): after a sync, list its children (a semaphore: its
//! leases, then its internal mutex's nodes, the waiters), order them as Curator's recipe does,
//! decide who holds by the recipe's own predicate, then read each node's data (its label, or
//! an election candidate's published value) and `czxid` (a holder's fencing token), one at a
//! time. Nothing is created or watched. A node gone between the listing and its read is left
//! out. ZooKeeper keeps no lease per node and records no time a client reads back here: a holder
//! holds until it deletes its node or its session ends, so `remaining`, `held_for` and
//! `waiting_for` are unknown.

use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::failure::failure_error;
use super::layout::{self, NodeKind};
use super::recipe::{place, Place};
use super::request::{ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Entry, Job, Step};
use super::target::{Recipe, ZkTarget};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Purpose, Verdict};
use crate::error::Error;
use crate::inspect::{Holder, Kind, Mode, Snapshot, Waiter};

/// The entries of a directory's `children` for `recipe`, in queue order, holders by the
/// recipe's predicate. A semaphore's leases all hold; its internal mutex's nodes all wait.
pub(crate) fn entries(recipe: &Recipe, dir: &str, mut children: Vec<String>, waiters_only: bool) -> Vec<Entry> {
    let (kind, mode) = match recipe {
        Recipe::Mutex => (NodeKind::Lock, Mode::Exclusive),
        Recipe::Read | Recipe::Write => (NodeKind::Write, Mode::Exclusive),
        Recipe::Semaphore { .. } if waiters_only => (NodeKind::Lock, Mode::Shared),
        Recipe::Semaphore { .. } => (NodeKind::Lease, Mode::Shared),
        Recipe::Leader { .. } => (NodeKind::Latch, Mode::Exclusive),
    };
    layout::sort_children(&mut children, layout::sort_names(kind));
    children
        .iter()
        .map(|name| {
            let (holds, mode) = match recipe {
                Recipe::Read | Recipe::Write => {
                    let reader = layout::parse_child(name).kind == Some(NodeKind::Read);
                    let kind = if reader { NodeKind::Read } else { NodeKind::Write };
                    (place(kind, children.clone(), name) == Place::Holds, if reader { Mode::Shared } else { Mode::Exclusive })
                }
                Recipe::Semaphore { .. } => (!waiters_only, mode),
                _ => (place(kind, children.clone(), name) == Place::Holds, mode),
            };
            Entry { path: layout::child_path(dir, name), holds, mode }
        })
        .collect()
}

impl ZooKeeperBackend {
    /// Starts an inspect of `target`: sync, then list.
    pub(super) fn inspect_start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, purpose: Purpose, target: &Arc<ZkTarget>, kind: Kind) {
        let job = Job::read(purpose, target, self.epoch, Step::InspectList { waiters: false, read: Vec::new(), snapshot: Box::new(Snapshot::empty(kind)) }, ctx.now);
        let dir = target.leases_dir().unwrap_or_else(|| target.path.clone());
        let list = ZkOp::Children { path: dir.clone(), watch: false };
        let step = job.step.clone();
        self.send_synced(ctx, job, &target.path, step, list);
    }

    /// Handles the reply to one step of an inspect.
    pub(super) fn inspect_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        match (job.step.clone(), reply) {
            (Step::Sync { next, op }, Ok(ZkReply::Checked) | Err(ZkFailure::NoNode | ZkFailure::BadVersion)) => {
                self.send(ctx, job, *next, op);
            }
            (Step::InspectList { waiters, mut read, snapshot }, listed @ (Ok(ZkReply::Children(_)) | Err(ZkFailure::NoNode))) => {
                let kids = match listed {
                    Ok(ZkReply::Children(kids)) => kids,
                    _ => Vec::new(),
                };
                let semaphore = matches!(job.target.recipe, Recipe::Semaphore { .. });
                let dir = if semaphore && waiters {
                    job.target.queue_dir()
                } else {
                    job.target.leases_dir().unwrap_or_else(|| job.target.path.clone())
                };
                read.extend(entries(&job.target.recipe, &dir, kids, waiters));
                if semaphore && !waiters {
                    let path = job.target.queue_dir();
                    return self.send(ctx, job, Step::InspectList { waiters: true, read, snapshot }, ZkOp::Children { path, watch: false });
                }
                self.inspect_next(ctx, job, read, snapshot, answers);
            }
            (Step::InspectData { entry, rest, mut snapshot }, Ok(ZkReply::Data(data, stat))) => {
                let text = (!data.is_empty()).then(|| String::from_utf8_lossy(&data).into_owned());
                let election = snapshot.kind == Kind::Election;
                let (label, value) = if election { (None, text) } else { (text, None) };
                if entry.holds {
                    let owner = layout::parse_child(layout::node_name(&entry.path)).owner;
                    let mut h = Holder::new(owner, label, u64::try_from(stat.czxid).ok(), entry.mode);
                    h.value = value;
                    h.entry = Some(entry.path.clone());
                    snapshot.holders.push(h);
                } else {
                    snapshot.waiters.push(Waiter { label, waiting_for: None, mode: entry.mode });
                }
                self.inspect_next(ctx, job, rest, snapshot, answers);
            }
            // Gone since the listing: it no longer holds or waits.
            (Step::InspectData { rest, snapshot, .. }, Err(ZkFailure::NoNode)) => self.inspect_next(ctx, job, rest, snapshot, answers),
            (step, reply) => {
                let e = match reply {
                    Err(f) => failure_error(f),
                    Ok(other) => Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}")),
                };
                self.settle(ctx, job, None, Verdict::Inspected(Err(e)), answers);
            }
        }
    }

    /// Reads the next listed node, or settles with the snapshot once none is left.
    fn inspect_next(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, mut read: Vec<Entry>, snapshot: Box<Snapshot>, answers: &mut Vec<Answer>) {
        if read.is_empty() {
            return self.settle(ctx, job, None, Verdict::Inspected(Ok(*snapshot)), answers);
        }
        let entry = read.remove(0);
        let path = entry.path.clone();
        self.send(ctx, job, Step::InspectData { entry, rest: read, snapshot }, ZkOp::GetData { path, watch: false });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn holders_and_waiters_follow_curators_order_and_predicates() {
        let e = entries(&Recipe::Mutex, "/m", names(&["_c_b-lock-0000000003", "_c_a-lock-0000000001"]), false);
        let got: Vec<_> = e.iter().map(|e| (e.path.as_str(), e.holds)).collect();
        assert_eq!(got, vec![("/m/_c_a-lock-0000000001", true), ("/m/_c_b-lock-0000000003", false)]);
        let rw = names(&["_c_w-__WRIT__0000000002", "_c_r1-__READ__0000000001", "_c_r2-__READ__0000000003", "_c_r0-__READ__0000000000"]);
        let e = entries(&Recipe::Write, "/rw", rw, false);
        let got: Vec<_> = e.iter().map(|e| (e.holds, e.mode)).collect();
        assert_eq!(got, vec![(true, Mode::Shared), (true, Mode::Shared), (false, Mode::Exclusive), (false, Mode::Shared)]);
        let e = entries(&Recipe::Semaphore { permits: 1 }, "/s/leases", names(&["_c_a-lease-0000000001"]), false);
        assert!(e[0].holds && e[0].mode == Mode::Shared);
        let e = entries(&Recipe::Semaphore { permits: 1 }, "/s/locks", names(&["_c_b-lock-0000000004"]), true);
        assert!(!e[0].holds);
        // A foreign name (kazoo's) still sorts by its sequence and is read.
        let e = entries(&Recipe::Mutex, "/k", names(&["x__lock__0000000009", "_c_a-lock-0000000001"]), false);
        assert_eq!(e.len(), 2);
        assert!(e[0].holds);
    }
}
