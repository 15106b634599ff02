//! A lock as the etcd backend names it: which recipe it follows and where its keys live. Built
//! once per lock from the engine's name and primitive, so every step after reads prefixes and
//! families from here rather than from the primitive.

use super::layout::{self, Family};
use super::request::LeaseId;
use crate::error::{Error, Result};
use crate::primitive::Primitive;

/// Which recipe a lock uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// `concurrency.Mutex`.
    Mutex,
    /// lockgate's read lock (`<base>/read/<lease>`, behind every earlier writer).
    Read,
    /// lockgate's write lock (`<base>/write/<lease>`, behind every earlier key).
    Write,
    /// lockgate's counting semaphore with this many permits.
    Semaphore {
        /// The permits.
        permits: u32,
    },
    /// `concurrency.Election`, publishing `value` as the key's value.
    Leader {
        /// What observers read.
        value: String,
    },
}

/// A lock as the etcd backend names it: its base and recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdTarget {
    /// The base ([`layout::base`]); every key of the lock is under `<base>/`.
    pub base: String,
    /// The recipe.
    pub recipe: Recipe,
}

impl EtcdTarget {
    /// The target of lock `name` as `primitive`; refuses what the recipes cannot do.
    pub fn new(name: &str, primitive: &Primitive) -> Result<EtcdTarget> {
        let recipe = match primitive {
            Primitive::Mutex => Recipe::Mutex,
            Primitive::Read { writers_first: true } => Recipe::Read,
            Primitive::Read { writers_first: false } => {
                return Err(Error::unsupported(
                    "readers-first read-write locks are not supported by an etcd client: its read-write lock \
                     queues every reader behind the writers before it (use writers_first)",
                ))
            }
            Primitive::Write => Recipe::Write,
            Primitive::Semaphore { permits } => Recipe::Semaphore { permits: *permits },
            Primitive::Leader { value } => Recipe::Leader { value: value.clone() },
        };
        Ok(EtcdTarget { base: layout::base(name, primitive)?, recipe })
    }

    /// The family the holder's key belongs to.
    pub fn family(&self) -> Family {
        match self.recipe {
            Recipe::Read => Family::Read,
            Recipe::Write => Family::Write,
            _ => Family::Plain,
        }
    }

    /// The prefix of the holder's key family (one key per lease under it).
    pub fn family_prefix(&self) -> String {
        layout::family_prefix(&self.base, self.family())
    }

    /// The holder's key for `lease`.
    pub fn key(&self, lease: LeaseId) -> String {
        layout::key(&self.family_prefix(), lease)
    }

    /// The prefix every key of the lock shares (`<base>/`): the queue.
    pub fn queue_prefix(&self) -> String {
        layout::family_prefix(&self.base, Family::Plain)
    }

    /// A semaphore's permits.
    pub fn permits(&self) -> Option<u32> {
        match self.recipe {
            Recipe::Semaphore { permits } => Some(permits),
            _ => None,
        }
    }

    /// The value the key is written with: a leader's published value, else the client's
    /// `label` (PROTOCOL.md §10: `concurrency.Mutex` and `etcdctl lock` never read it).
    pub fn value(&self, label: &str) -> Vec<u8> {
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
    fn targets_follow_the_layout_and_refuse_readers_first() {
        let t = EtcdTarget::new("rw", &Primitive::Read { writers_first: true }).unwrap();
        assert_eq!((t.key(0xab), t.queue_prefix()), ("/lockgate/rw/rw/read/ab".to_string(), "/lockgate/rw/rw/".to_string()));
        let l = EtcdTarget::new("/svc", &Primitive::Leader { value: "me".into() }).unwrap();
        assert_eq!((l.key(10), l.value("h:1")), ("/svc/a".to_string(), b"me".to_vec()));
        assert_eq!(t.value("h:1"), b"h:1".to_vec());
        assert_eq!(EtcdTarget::new("p", &Primitive::Semaphore { permits: 3 }).unwrap().permits(), Some(3));
        let e = EtcdTarget::new("rw", &Primitive::Read { writers_first: false }).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
    }
}
