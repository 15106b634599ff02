//! What a process does with its open clients when it ends without closing them: every binding
//! closes them (held leases released, queued waits withdrawn) and waits at most [`EXIT_GRACE`]
//! for the servers' answers before letting the process end. One value, so a Python, Node or
//! JVM service leaves the same state behind when it is stopped.

use crate::time::Duration;

/// How long a process's exit waits for its clients' releases and withdrawals to be answered.
/// Long enough for a round trip to a server across a region; short enough that a supervisor's
/// stop timeout (systemd's 90 s, Kubernetes' 30 s) is never the one that ends the process. What
/// is not answered by then expires with its lease.
pub const EXIT_GRACE: Duration = Duration::from_millis(1500);
