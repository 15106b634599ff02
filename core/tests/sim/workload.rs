//! A randomized contention workload: every client loops acquire → hold → release on a few
//! lock names with random options, waits, cancels, extends and (optionally) crashes.

use lockgate_core::time::{Duration, Instant};
use lockgate_core::engine::Done as Outcome;
use lockgate_core::{ErrorKind, Event, LeaseId, LockOptions, OpId, Primitive, Wait};

use super::harness::{ClientId, Sim};
use super::model::{Model, SimOutcome};
use super::net::Rng;

#[derive(Clone, Debug)]
pub struct Workload {
    pub names: Vec<&'static str>,
    pub clients: usize,
    /// How long clients keep starting new acquires.
    pub duration: Duration,
    /// Lease range in ms.
    pub lease_ms: (u64, u64),
    pub entry_ttl_ms: (u64, u64),
    pub p_auto_renew: f64,
    pub p_try: f64,
    pub p_forever: f64,
    /// Wait timeout range in ms for bounded waits.
    pub wait_ms: (u64, u64),
    /// Hold time as a multiple of the lease, in percent.
    pub hold_pct: (u64, u64),
    pub p_cancel: f64,
    pub p_extend: f64,
    /// Probability that a client crashes instead of releasing (or while waiting).
    pub p_crash: f64,
    /// What clients acquire, picked per attempt (a leader's value becomes `client-<i>`).
    pub primitives: Vec<Primitive>,
    /// Probability that a holder re-enters its lease (one to three more holds) and gives every
    /// hold back before the real release.
    pub p_reenter: f64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            names: vec!["alpha", "beta"],
            clients: 4,
            duration: Duration::from_secs(2),
            lease_ms: (20, 200),
            entry_ttl_ms: (100, 400),
            p_auto_renew: 0.5,
            p_try: 0.2,
            p_forever: 0.4,
            wait_ms: (5, 400),
            hold_pct: (0, 250),
            p_cancel: 0.1,
            p_extend: 0.2,
            p_crash: 0.0,
            primitives: vec![Primitive::Mutex],
            p_reenter: 0.0,
        }
    }
}

#[derive(Clone, Debug)]
enum State {
    Idle {
        next: Instant,
    },
    Acquiring {
        op: OpId,
        cancel_at: Option<Instant>,
        crash_at: Option<Instant>,
    },
    Holding {
        lease: LeaseId,
        release_at: Instant,
        extend_at: Option<Instant>,
        crash: bool,
        /// Extra reentrant holds to take (at `reenter_at`) and then to give back.
        reenter: u32,
        reenter_at: Option<Instant>,
        extra: u32,
    },
    Releasing {
        op: OpId,
        lease: LeaseId,
    },
    Done,
    Dead,
}

/// What happened, for tests that want the workload to have exercised something.
#[derive(Debug, Default)]
pub struct Stats {
    pub acquired: usize,
    pub not_acquired: usize,
    pub timeouts: usize,
    pub cancelled: usize,
    pub lost: usize,
    pub crashes: usize,
    pub reentered: usize,
    /// Releases of a reentered lease that gave back a hold while others remained.
    pub inner_releases: usize,
    pub other_failures: Vec<String>,
}

pub struct Runner {
    cfg: Workload,
    rng: Rng,
    clients: Vec<ClientId>,
    states: Vec<State>,
    pub stats: Stats,
}

impl Runner {
    pub fn new<M: Model>(sim: &mut Sim<M>, cfg: Workload, seed: u64) -> Runner {
        let clients = sim.add_clients(cfg.clients);
        let mut rng = Rng::new(seed ^ 0xA5A5);
        let states = clients
            .iter()
            .map(|_| {
                let next = sim.now + Duration::from_micros(rng.between(0, 20_000));
                sim.wake_at(next);
                State::Idle { next }
            })
            .collect();
        Runner {
            cfg,
            rng,
            clients,
            states,
            stats: Stats::default(),
        }
    }

    /// Runs the workload, then winds down: cancels waits, releases leases, lets engines settle.
    pub fn run<M: Model>(&mut self, sim: &mut Sim<M>) {
        self.run_with(sim, |_| {});
    }

    /// Like [`run`](Self::run), calling `hook` at every instant of the active phase (tests use
    /// it to inject faults at chosen times, after `sim.wake_at`).
    pub fn run_with<M: Model>(&mut self, sim: &mut Sim<M>, mut hook: impl FnMut(&mut Sim<M>)) {
        let end = sim.now + self.cfg.duration;
        while sim.now < end {
            hook(sim);
            self.react(sim, false);
            sim.step(end);
        }
        let limit = sim.now + Duration::from_secs(60);
        loop {
            self.react(sim, true);
            if self
                .states
                .iter()
                .all(|s| matches!(s, State::Done | State::Dead))
                && sim.quiescent()
            {
                break;
            }
            assert!(
                sim.now < limit,
                "the workload did not wind down: {:?}",
                self.states
            );
            sim.step(limit);
        }
        assert!(
            self.stats.other_failures.is_empty(),
            "unexpected failures: {:?}",
            self.stats.other_failures
        );
    }

    fn react<M: Model>(&mut self, sim: &mut Sim<M>, stopping: bool) {
        for (c, ev) in sim.take_events() {
            let Some(i) = self.clients.iter().position(|&x| x == c) else {
                continue;
            };
            self.on_event(sim, i, ev);
        }
        for i in 0..self.states.len() {
            self.on_time(sim, i, stopping);
        }
    }

    fn on_event<M: Model>(&mut self, sim: &mut Sim<M>, i: usize, ev: Event<M::Outcome>) {
        let now = sim.now;
        let pause = Duration::from_micros(self.rng.between(0, 10_000));
        match (self.states[i].clone(), ev) {
            (State::Acquiring { op, .. }, Event::Completed { op: o, outcome }) if o == op => {
                self.states[i] = match outcome.done() {
                    Outcome::Acquired {
                        lease, valid_until, ..
                    } => {
                        self.stats.acquired += 1;
                        let held = valid_until.saturating_duration_since(now);
                        let hold = held
                            * self.rng.between(self.cfg.hold_pct.0, self.cfg.hold_pct.1) as u32
                            / 100;
                        let release_at = now + hold;
                        let extend_at = self.rng.chance(self.cfg.p_extend).then(|| now + hold / 2);
                        extend_at
                            .into_iter()
                            .chain([release_at])
                            .for_each(|t| sim.wake_at(t));
                        let crash = self.rng.chance(self.cfg.p_crash);
                        let (reenter, reenter_at) = if self.rng.chance(self.cfg.p_reenter) {
                            let at = now + hold / 3;
                            sim.wake_at(at);
                            (self.rng.between(1, 3) as u32, Some(at))
                        } else {
                            (0, None)
                        };
                        State::Holding {
                            lease,
                            release_at,
                            extend_at,
                            crash,
                            reenter,
                            reenter_at,
                            extra: 0,
                        }
                    }
                    other => {
                        match other {
                            Outcome::NotAcquired => self.stats.not_acquired += 1,
                            Outcome::Failed(e) if e.kind() == ErrorKind::Timeout => {
                                self.stats.timeouts += 1
                            }
                            Outcome::Failed(e) if e.kind() == ErrorKind::Cancelled => {
                                self.stats.cancelled += 1
                            }
                            Outcome::Failed(e) if e.kind() == ErrorKind::Connection => {}
                            o => self.stats.other_failures.push(format!("acquire: {o:?}")),
                        }
                        sim.wake_at(now + pause);
                        State::Idle { next: now + pause }
                    }
                };
            }
            (State::Holding { lease, .. }, Event::Lost { lease: l, .. }) if l == lease => {
                self.stats.lost += 1;
                sim.wake_at(now + pause);
                self.states[i] = State::Idle { next: now + pause };
            }
            (State::Releasing { op, lease }, Event::Completed { op: o, outcome }) if o == op => {
                match outcome.done() {
                    Outcome::Failed(e) if e.kind() == ErrorKind::Connection => {
                        // Transport failure: the engine still holds the lease; try again.
                        let op = sim.release(self.clients[i], lease);
                        self.states[i] = State::Releasing { op, lease };
                    }
                    Outcome::Released { .. } => {
                        sim.wake_at(now + pause);
                        self.states[i] = State::Idle { next: now + pause };
                    }
                    o => self.stats.other_failures.push(format!("release: {o:?}")),
                }
            }
            _ => {}
        }
    }

    fn on_time<M: Model>(&mut self, sim: &mut Sim<M>, i: usize, stopping: bool) {
        let now = sim.now;
        let c = self.clients[i];
        match self.states[i].clone() {
            State::Idle { .. } if stopping => self.states[i] = State::Done,
            State::Idle { next } if next <= now => self.start_acquire(sim, i),
            State::Acquiring {
                crash_at: Some(t), ..
            } if t <= now && !stopping => {
                sim.crash(c);
                self.stats.crashes += 1;
                self.states[i] = State::Dead;
            }
            State::Acquiring {
                op,
                cancel_at,
                crash_at,
            } if stopping || cancel_at.is_some_and(|t| t <= now) => {
                sim.cancel(c, op);
                self.states[i] = State::Acquiring {
                    op,
                    cancel_at: None,
                    crash_at,
                };
            }
            State::Holding {
                crash: true,
                release_at,
                ..
            } if release_at <= now || stopping => {
                sim.crash(c);
                self.stats.crashes += 1;
                self.states[i] = State::Dead;
            }
            State::Holding {
                lease,
                release_at,
                extra,
                ..
            } if release_at <= now || stopping => {
                for _ in 0..extra {
                    // Gives back one reentrant hold: completes at once and keeps the lease.
                    let op = sim.release(c, lease);
                    match sim.done(c, op) {
                        Some((_, Outcome::Released { .. })) => {}
                        o => self
                            .stats
                            .other_failures
                            .push(format!("inner release: {o:?}")),
                    }
                    if sim.clients[c].engine.lease_valid_until(lease).is_none() {
                        self.stats
                            .other_failures
                            .push("an inner release gave up the whole lease".into());
                    }
                    self.stats.inner_releases += 1;
                }
                let op = sim.release(c, lease);
                self.states[i] = State::Releasing { op, lease };
            }
            State::Holding {
                lease,
                reenter,
                reenter_at: Some(t),
                ..
            } if t <= now => {
                for _ in 0..reenter {
                    let op = sim.reacquire(c, lease);
                    let held_fence = sim
                        .beliefs
                        .iter()
                        .find(|b| b.client == c && b.lease == lease)
                        .map(|b| b.fence);
                    match sim.done(c, op) {
                        Some((
                            _,
                            Outcome::Acquired {
                                lease: l,
                                fencing_token,
                                ..
                            },
                        )) => {
                            if l != lease || Some(fencing_token) != held_fence {
                                self.stats.other_failures.push(format!(
                                    "reacquire gave {l:?}/{fencing_token:?}, held {lease:?}/{held_fence:?}"
                                ));
                            }
                            self.stats.reentered += 1;
                            if let State::Holding { extra, .. } = &mut self.states[i] {
                                *extra += 1;
                            }
                        }
                        // The lease ran out locally just now (a Lost event follows).
                        Some((_, Outcome::Failed(e))) if e.kind() == ErrorKind::NotHeld => {}
                        o => self.stats.other_failures.push(format!("reacquire: {o:?}")),
                    }
                }
                if let State::Holding { reenter_at, .. } = &mut self.states[i] {
                    *reenter_at = None;
                }
            }
            State::Holding {
                lease,
                release_at,
                extend_at: Some(t),
                crash,
                reenter,
                reenter_at,
                extra,
            } if t <= now => {
                let lo = self.cfg.lease_ms.0;
                let d = Duration::from_millis(self.rng.between(lo, self.cfg.lease_ms.1 * 2));
                sim.extend(c, lease, d);
                self.states[i] = State::Holding {
                    lease,
                    release_at,
                    extend_at: None,
                    crash,
                    reenter,
                    reenter_at,
                    extra,
                };
            }
            _ => {}
        }
    }

    fn start_acquire<M: Model>(&mut self, sim: &mut Sim<M>, i: usize) {
        let cfg = &self.cfg;
        let rng = &mut self.rng;
        let name = *rng.pick(&cfg.names);
        let lease = Duration::from_millis(rng.between(cfg.lease_ms.0, cfg.lease_ms.1));
        let entry_ttl = Duration::from_millis(rng.between(cfg.entry_ttl_ms.0, cfg.entry_ttl_ms.1));
        let opts = LockOptions {
            auto_renew: rng.chance(cfg.p_auto_renew),
            ..LockOptions::fixed_lease(lease)
        }
        .with_entry_ttl(entry_ttl);
        let wait = if rng.chance(cfg.p_try) {
            Wait::Try
        } else if rng.chance(cfg.p_forever) {
            Wait::Forever
        } else {
            Wait::For(Duration::from_millis(
                rng.between(cfg.wait_ms.0, cfg.wait_ms.1),
            ))
        };
        let cancel_at = rng
            .chance(cfg.p_cancel)
            .then(|| sim.now + Duration::from_micros(rng.between(0, 100_000)));
        let crash_at = rng
            .chance(cfg.p_crash / 2.0)
            .then(|| sim.now + Duration::from_micros(rng.between(0, 100_000)));
        cancel_at
            .into_iter()
            .chain(crash_at)
            .for_each(|t| sim.wake_at(t));
        let picked = match cfg.primitives.len() {
            1 => cfg.primitives[0].clone(),
            _ => rng.pick(&cfg.primitives).clone(),
        };
        let primitive = match picked {
            Primitive::Leader { .. } => Primitive::Leader {
                value: format!("client-{}", self.clients[i]),
            },
            p => p,
        };
        let op = sim.acquire_primitive(self.clients[i], name, &primitive, &opts, wait);
        self.states[i] = State::Acquiring {
            op,
            cancel_at,
            crash_at,
        };
    }
}
