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
    /// The shortest hold's end (`min_hold` after the grant's reply arrived, so after the grant
    /// on the server): a release before it sets the server expiry to what is left instead.
    pub hold_until: Option<Instant>,
    /// The longest hold's end (`max_hold` after the granting request was sent, so no later
    /// than that after the grant): never confirmed nor renewed past it.
    pub max_until: Option<Instant>,
    /// Whether the lease's end is now the longest hold's (renewals stopped or shortened by
    /// it): its end is then a loss with the reason `max_hold`.
    pub at_max: bool,
    /// The release in progress that keeps the lease on the server until the shortest hold
    /// ends (an expiry change, answered as an extend; see `LockEngine::release`).
    pub hold_release: Option<super::ids::OpId>,
}

/// What a lease starts from: its hold and how it was confirmed (the rest starts empty).
pub(crate) struct Granted<T> {
    pub target: Arc<T>,
    pub held: Arc<crate::adopt::Held>,
    pub token: Arc<str>,
    pub lease: Duration,
    pub auto_renew: bool,
    pub valid_until: Instant,
    pub next_renew: Option<Instant>,
    pub fence: Option<u64>,
    pub end: Option<Instant>,
    pub hold_until: Option<Instant>,
    pub max_until: Option<Instant>,
}

impl<T> Lease<T> {
    /// A lease just granted (or adopted): one hold, nothing in flight, no spell at risk.
    pub fn new(g: Granted<T>) -> Self {
        Lease {
            target: g.target,
            held: g.held,
            token: g.token,
            lease: g.lease,
            auto_renew: g.auto_renew,
            valid_until: g.valid_until,
            next_renew: g.next_renew,
            renewing: false,
            releasing: false,
            renewals: Vec::new(),
            next_tag: 0,
            fence: g.fence,
            holds: 1,
            end: g.end,
            unreachable: None,
            hold_until: g.hold_until,
            max_until: g.max_until,
            at_max: false,
            hold_release: None,
        }
    }

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
            self.limit_to_max_hold();
        }
        Some(d)
    }

    /// Keeps the validity and the next renewal within the longest hold: a validity that would
    /// reach it ends there, and no renewal is due at or after it.
    pub fn limit_to_max_hold(&mut self) {
        let Some(max) = self.max_until else { return };
        if self.valid_until >= max {
            self.valid_until = max;
            self.at_max = true;
        }
        if self.next_renew.is_some_and(|r| r >= max) {
            self.next_renew = None;
            self.at_max = true;
        }
    }

    /// A confirmation sent at `sent` that holds the lease for `span` (the backend's
    /// confirmation span taken into account) and reaches the longest hold is the last: another
    /// could only ask for less (without this a renewal would follow a third of the way into
    /// each shorter one).
    pub fn confirmed_for(&mut self, sent: Instant, span: Duration) {
        if self.max_until.is_some_and(|max| sent + span >= max) {
            self.next_renew = None;
            self.at_max = true;
        }
        self.limit_to_max_hold();
    }

    /// What a renewal due `now` asks for: the lease, or what is left of the longest hold if
    /// less (`None` when that is below the shortest lease: the lease then just ends).
    pub fn renewal_at(&mut self, now: Instant) -> Option<Duration> {
        let Some(max) = self.max_until else { return Some(self.lease) };
        let left = max.saturating_duration_since(now);
        if left < crate::options::MIN_LEASE {
            self.next_renew = None;
            self.at_max = true;
            return None;
        }
        Some(self.lease.min(left))
    }

    /// How long what is left of this lease on the server may live: its lease, or a longer
    /// expiry still on the wire.
    pub fn span(&self) -> Duration {
        self.renewals.iter().map(|p| p.1).fold(self.lease, Duration::max)
    }
}
