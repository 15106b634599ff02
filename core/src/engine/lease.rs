//! Held leases: validity counted from the send time of what the server last confirmed, the
//! renewal schedule, expiry changes still on the wire, and reentrant holds.

use std::sync::Arc;

use crate::time::{Duration, Instant};

/// One held lease. `T` is the backend's target.
pub(crate) struct Lease<T> {
    pub target: Arc<T>,
    /// The lock's name and primitive (what the lease's identity names, see `crate::adopt`).
    pub held: Arc<crate::adopt::Held>,
    pub token: Arc<str>,
    pub lease: Duration,
    pub auto_renew: bool,
    /// Local instant before which the lease is certainly valid.
    pub valid_until: Instant,
    pub next_renew: Option<Instant>,
    pub renewing: bool,
    pub releasing: bool,
    /// Renewals and extends sent but not answered: (tag, duration, the validity they would
    /// leave if they ran at once: send time + duration − drift).
    pub renewals: Vec<(u64, Duration, Instant)>,
    pub next_tag: u64,
    /// The fencing token of the grant (handed out again on reentry).
    pub fence: Option<u64>,
    /// Reentrant acquisitions not yet released; the lease is released when the last one is.
    pub holds: u32,
    /// Where a confirmation is worth less than the lease ([`Backend::confirmation_span`]), the
    /// instant a fixed (not renewed) lease ends: it is confirmed until then, never beyond.
    ///
    /// [`Backend::confirmation_span`]: super::Backend::confirmation_span
    pub end: Option<Instant>,
    /// The `CONNECTION` error of the last renewal if it could not reach the server (cleared by
    /// a confirmed one): a lease that runs out meanwhile names the unreachable server.
    pub unreachable: Option<String>,
}

impl<T> Lease<T> {
    /// Notes an expiry change to `d` sent at `now` (certain until `bound` = `now + d − drift`)
    /// and returns its tag. Until it is answered the lease is certain only until `bound`, since
    /// it may shorten the lease when it runs.
    pub fn send_renewal(&mut self, d: Duration, bound: Instant) -> u64 {
        self.next_tag += 1;
        self.valid_until = self.valid_until.min(bound);
        self.renewals.push((self.next_tag, d, bound));
        self.next_tag
    }

    /// Settles expiry change `tag` and returns its duration. If it succeeded in a request sent
    /// at `sent`, the lease is certain until `confirmed(sent, d)` (the server expiry is at least
    /// `sent + d − drift(d)`, or what the backend's confirmation span allows); a change still
    /// unanswered may run after it and set its own, so the lease is certain until the smaller
    /// of those.
    pub fn settle_renewal(&mut self, tag: u64, succeeded: Option<Instant>, confirmed: impl Fn(Instant, Duration) -> Instant) -> Option<Duration> {
        let i = self.renewals.iter().position(|p| p.0 == tag)?;
        let (_, d, _) = self.renewals.remove(i);
        if let Some(sent) = succeeded {
            let bound = confirmed(sent, d);
            self.valid_until = self.renewals.iter().map(|p| p.2).fold(bound, Instant::min);
        }
        Some(d)
    }

    /// How long what is left of this lease on the server may live: its lease, or a longer
    /// expiry still on the wire.
    pub fn span(&self) -> Duration {
        self.renewals.iter().map(|p| p.1).fold(self.lease, Duration::max)
    }
}
