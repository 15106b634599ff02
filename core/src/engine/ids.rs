//! The identifiers that cross the engine boundary: of a request the engine emitted, an operation
//! the caller started and a held lease. Plain numbers, so every other engine module (its events,
//! its telemetry) can name them without depending on each other.

/// Identifies one request the engine emitted; the driver hands the reply back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Identifies one operation the caller started (acquire, release, extend).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// Identifies one held lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub u64);
