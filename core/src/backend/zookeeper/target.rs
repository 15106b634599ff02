//! A lock as the ZooKeeper backend names it: which of Curator's recipes it follows and where
//! its nodes live. Built once per lock from the engine's name and primitive, so every step
//! after reads paths and kinds from here rather than from the primitive.

use super::layout::{self, NodeKind};
use crate::error::{Error, Result};
use crate::primitive::Primitive;

/// Which Curator recipe a lock uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// `InterProcessMutex`.
    Mutex,
    /// `InterProcessReadWriteLock`'s read lock.
    Read,
    /// `InterProcessReadWriteLock`'s write lock.
    Write,
    /// `InterProcessSemaphoreV2` with this many permits.
    Semaphore {
        /// The permits.
        permits: u32,
    },
    /// `LeaderLatch`, publishing `value` as the node's data.
    Leader {
        /// What observers read.
        value: String,
    },
}

/// A lock as the ZooKeeper backend names it: its base path and recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkTarget {
    /// The base path ([`layout::base_path`]).
    pub path: String,
    /// The recipe.
    pub recipe: Recipe,
}

impl ZkTarget {
    /// The target of lock `name` as `primitive`; refuses what Curator's recipes cannot do.
    pub fn new(name: &str, primitive: &Primitive) -> Result<ZkTarget> {
        let recipe = match primitive {
            Primitive::Mutex => Recipe::Mutex,
            Primitive::Read { writers_first: true } => Recipe::Read,
            Primitive::Read { writers_first: false } => {
                return Err(Error::unsupported(
                    "readers-first read-write locks are not supported by a ZooKeeper client: Curator's \
                     read-write lock queues every reader behind the writers before it (use writers_first)",
                ))
            }
            Primitive::Write => Recipe::Write,
            Primitive::Semaphore { permits } => Recipe::Semaphore { permits: *permits },
            Primitive::Leader { value } => Recipe::Leader { value: value.clone() },
        };
        Ok(ZkTarget { path: layout::base_path(name, primitive)?, recipe })
    }

    /// The kind of node the holder queues with (a semaphore queues on its internal mutex).
    pub fn kind(&self) -> NodeKind {
        match self.recipe {
            Recipe::Mutex | Recipe::Semaphore { .. } => NodeKind::Lock,
            Recipe::Read => NodeKind::Read,
            Recipe::Write => NodeKind::Write,
            Recipe::Leader { .. } => NodeKind::Latch,
        }
    }

    /// Where the queue nodes live: the base path, or a semaphore's `<path>/locks`.
    pub fn queue_dir(&self) -> String {
        match self.recipe {
            Recipe::Semaphore { .. } => layout::child_path(&self.path, layout::SEMAPHORE_LOCKS),
            _ => self.path.clone(),
        }
    }

    /// A semaphore's `<path>/leases`.
    pub fn leases_dir(&self) -> Option<String> {
        match self.recipe {
            Recipe::Semaphore { .. } => Some(layout::child_path(&self.path, layout::SEMAPHORE_LEASES)),
            _ => None,
        }
    }

    /// A semaphore's permits.
    pub(super) fn permits(&self) -> Option<u32> {
        match self.recipe {
            Recipe::Semaphore { permits } => Some(permits),
            _ => None,
        }
    }

    /// Whether the token holds through a lease node (a semaphore) rather than its queue node.
    pub(super) fn holds_by_lease(&self) -> bool {
        self.permits().is_some()
    }

    /// The data a queue or lease node is created with: a leader's published value, else the
    /// client's `label` (PROTOCOL.md §9: Curator keeps its holder's IP there; no recipe reads it).
    pub(super) fn data(&self, label: &str) -> Vec<u8> {
        match &self.recipe {
            Recipe::Leader { value } => value.as_bytes().to_vec(),
            _ => label.as_bytes().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn targets_follow_the_layout_and_refuse_what_curator_lacks() {
        let t = ZkTarget::new("pool", &Primitive::Semaphore { permits: 3 }).unwrap();
        assert_eq!((t.path.as_str(), t.queue_dir(), t.leases_dir()), ("/lockgate/semaphore/pool", "/lockgate/semaphore/pool/locks".to_string(), Some("/lockgate/semaphore/pool/leases".to_string())));
        assert_eq!(t.kind(), NodeKind::Lock);
        let l = ZkTarget::new("/svc/leader", &Primitive::Leader { value: "me".into() }).unwrap();
        assert_eq!((l.path.as_str(), l.kind(), l.data("host:1")), ("/svc/leader", NodeKind::Latch, b"me".to_vec()));
        assert_eq!(t.data("host:1"), b"host:1".to_vec());
        let e = ZkTarget::new("rw", &Primitive::Read { writers_first: false }).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(ZkTarget::new("a//b", &Primitive::Mutex).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
