//! The queue listing sent right behind an attempt's create, without waiting for the create's
//! reply: an uncontended acquire then costs one round trip instead of two (create, then list).
//!
//! Why it is sound: ZooKeeper answers one session's requests in the order they were sent, and
//! a read waits behind the session's own writes (even on a follower), so a listing sent after
//! a create sees the node it made. The create's reply still decides: the listing is used only
//! once the create is known to have made our node; otherwise its reply is dropped when it
//! comes. A listing that does not show our node (never with a real ensemble) is not taken as
//! the node gone: the attempt lists again, as it did before.
//!
//! Replies may come back in either order (the driver hands over whichever future is ready
//! first), so a listing answered before its create is kept until the create's reply comes.

use super::backend::ZooKeeperBackend;
use super::request::{ZkOp, ZkResult};
use super::step::{Ahead, Job, Step};
use crate::engine::job::JobRunner;
use crate::engine::{Ctx, RequestId};

impl ZooKeeperBackend {
    /// Sends `job`'s create `op` of its queue node, with the listing of `dir` right behind it.
    pub(super) fn create_and_list(&mut self, ctx: &mut Ctx<'_, super::request::ZkRequest>, job: Job, op: ZkOp, dir: String) {
        let listed = ctx.ids.request();
        let list = self.request_of(&job.token, listed, ZkOp::Children { path: dir, watch: false });
        self.send(ctx, job, Step::CreateNode { listed }, op);
        ctx.out.push_back(list);
        self.ahead.insert(listed, Ahead::Pending);
    }

    /// Takes the reply to request `id` if it is a listing sent behind a create (`None` then):
    /// kept until its create's reply decides, or dropped if that decided already.
    pub(super) fn listed_ahead(&mut self, id: RequestId, reply: ZkResult) -> Option<ZkResult> {
        match self.ahead.get_mut(&id) {
            None => Some(reply),
            Some(Ahead::Unwanted) => {
                self.ahead.remove(&id);
                None
            }
            Some(slot) => {
                *slot = Ahead::Answered(reply);
                None
            }
        }
    }

    /// The create that `listed` rode behind did not make a node in the job's session: its
    /// listing is of no use.
    pub(super) fn unwanted(&mut self, listed: RequestId) {
        if let Some(Ahead::Pending) = self.ahead.get(&listed) {
            self.ahead.insert(listed, Ahead::Unwanted);
        } else {
            self.ahead.remove(&listed);
        }
    }
}
