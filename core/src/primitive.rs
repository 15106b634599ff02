//! What a lock handle acquires: the primitive kinds every backend offers. Plain data, shared by
//! the option rules (`options`) and the engines, so neither depends on the other for it.

/// Which primitive an acquire takes. Each kind keeps its own keys, so a semaphore and a mutex
/// of the same name are unrelated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// The exclusive mutex (PROTOCOL.md §2).
    Mutex,
    /// One permit of a counting semaphore with `permits` permits. Every client of one name must
    /// use the same count: the server records it while the semaphore is in use and refuses
    /// another with `INVALID_ARGUMENT` (PROTOCOL.md §7); it can change only while idle.
    Semaphore {
        /// How many holders may hold a permit at once (1 to [`MAX_PERMITS`](crate::options::MAX_PERMITS)).
        permits: u32,
    },
    /// The shared half of a read-write lock.
    Read {
        /// Whether a queued writer blocks readers that arrive after it (no writer starvation;
        /// the default). `false` lets readers join current readers past queued writers. Every
        /// reader of one name must agree (checked by the server like a semaphore's count).
        writers_first: bool,
    },
    /// The exclusive half of a read-write lock; its grants carry fencing tokens.
    Write,
    /// Leadership of an election; `value` is published to observers while it is held.
    Leader {
        /// What observers see (e.g. the candidate's address), at most
        /// [`MAX_VALUE_BYTES`](crate::options::MAX_VALUE_BYTES).
        value: String,
    },
}
