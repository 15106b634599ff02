//! What one Redis lock is on the wire: its keys and the scripts that drive them.

use super::keys::{MutexKeys, SharedKeys};
use super::{holders, mutex, Script};
use crate::primitive::Primitive;

/// One lock as the Redis backend addresses it: the keys of its primitive and the scripts that
/// drive them (resolved once per acquire, shared by its lease and cleanups).
#[derive(Debug)]
pub struct Target {
    /// The shared-holder family (semaphore, read-write, election) rather than the mutex.
    pub(crate) shared: bool,
    /// The keys, in the scripts' order.
    pub(crate) keys: Vec<String>,
    /// ARGV the shared ACQUIRE takes after the six it has in common with the mutex's: kind,
    /// limit, barge, value, and the setting every participant must agree on with its value
    /// (PROTOCOL.md §7; empty for none).
    pub(crate) acquire_extra: [String; 6],
    /// The primitive, as error messages name it.
    pub(crate) what: &'static str,
}

impl Target {
    /// The target of `primitive` named `name` (both validated).
    pub(crate) fn new(prefix: &str, name: &str, primitive: &Primitive) -> Target {
        let shared_target = |what: &'static str, kind: &str, mode: &str, limit: u32, barge: bool, value: &str, setting: (&str, String)| Target {
            shared: true,
            keys: SharedKeys::new(prefix, kind, name).all().map(String::from).to_vec(),
            acquire_extra: [
                mode.into(),
                limit.to_string(),
                if barge { "1" } else { "0" }.into(),
                value.into(),
                setting.0.into(),
                setting.1,
            ],
            what,
        };
        let none = || ("", String::new());
        match primitive {
            Primitive::Mutex => Target {
                shared: false,
                keys: MutexKeys::new(prefix, name).all().map(String::from).to_vec(),
                acquire_extra: Default::default(),
                what: "mutex",
            },
            Primitive::Semaphore { permits } => {
                shared_target("semaphore", "sem", "r", *permits, false, "", ("permits", permits.to_string()))
            }
            Primitive::Read { writers_first } => shared_target(
                "read-write lock",
                "rw",
                "r",
                0,
                !writers_first,
                "",
                ("writers_first", writers_first.to_string()),
            ),
            // A writer behaves the same under either policy (it never passes anyone), so the
            // write half neither records nor checks writers_first.
            Primitive::Write => shared_target("read-write lock", "rw", "w", 0, false, "", none()),
            Primitive::Leader { value } => shared_target("election", "elect", "w", 0, false, value, none()),
        }
    }

    pub(crate) fn acquire_script(&self) -> &'static Script {
        if self.shared { &holders::ACQUIRE } else { &mutex::ACQUIRE }
    }

    pub(crate) fn release_script(&self) -> &'static Script {
        if self.shared { &holders::RELEASE } else { &mutex::RELEASE }
    }

    /// EXTEND and how many keys it takes (all of them: the mutex's keeps the holder's label in
    /// the waiters hash alive too).
    pub(crate) fn extend_script(&self) -> (&'static Script, usize) {
        if self.shared { (&holders::EXTEND, 5) } else { (&mutex::EXTEND, 4) }
    }
}
