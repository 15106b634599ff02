//! The driver: the task that owns one client's engine and its backend's [`Transport`], and runs
//! the engine's driving contract for every backend: feed one input (a handle's message, a
//! reply, a push, a due timer), drain requests and events until none is left, sleep until the
//! next timer. What handles see (lease watches, loss, cancel-on-drop, grants nobody waits for,
//! shutdown) is written here once.

use std::collections::HashMap;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::lease_state::LeaseState;
use super::message::{Acquired, Msg};
use super::telemetry::Sink;
use super::transport::{ReplyFuture, Transport};
use crate::driving::{Awaiting, Claim, CLOSE_GRACE};
use crate::engine::{Done, Event, LeaderInfo, LeaseId, LockEngine, OpId};
use crate::error::{Error, Result};
use crate::time::Instant;

/// Longest time a shutdown waits for releases to reach the servers.
const SHUTDOWN_GRACE: std::time::Duration = CLOSE_GRACE;

/// Who waits for an operation's outcome.
enum Pending {
    Acquire { ticket: u64, reply: oneshot::Sender<Result<Option<Acquired>>> },
    Release { lease: LeaseId, reply: Option<oneshot::Sender<Result<bool>>> },
    Extend { lease: LeaseId, reply: oneshot::Sender<Result<()>> },
    Observe { reply: oneshot::Sender<Result<Option<LeaderInfo>>> },
    Inspect { reply: oneshot::Sender<Result<crate::inspect::Snapshot>> },
    Break { reply: oneshot::Sender<Result<Option<crate::break_lock::Broken>>> },
    List { reply: oneshot::Sender<Result<crate::listing::Page>> },
}

/// Starts the driver task of `engine` over `transport` (whose servers' pushes arrive on
/// `pushes`, if it has any) and returns the channel its handles send to.
pub(crate) fn spawn<T: Transport>(
    engine: LockEngine<T::Backend>,
    transport: T,
    pushes: Option<mpsc::UnboundedReceiver<T::Push>>,
) -> mpsc::UnboundedSender<Msg> {
    let (tx, rx) = mpsc::unbounded_channel();
    let driver = Driver {
        engine,
        transport,
        origin: tokio::time::Instant::now(),
        pending: Awaiting::default(),
        tickets: HashMap::new(),
        leases: HashMap::new(),
        in_flight: FuturesUnordered::new(),
        telemetry: Sink::new(),
    };
    tokio::spawn(driver.run(rx, pushes));
    tx
}

struct Driver<T: Transport> {
    engine: LockEngine<T::Backend>,
    transport: T,
    origin: tokio::time::Instant,
    pending: Awaiting<Pending>,
    /// The acquire each handle's ticket started (to cancel it when its future is dropped).
    tickets: HashMap<u64, OpId>,
    /// What every handle of a held lease watches.
    leases: HashMap<LeaseId, watch::Sender<LeaseState>>,
    in_flight: FuturesUnordered<ReplyFuture<T::Backend>>,
    /// Where the engine's telemetry events go (`tracing`, `metrics`).
    telemetry: Sink,
}

impl<T: Transport> Driver<T> {
    fn now(&self) -> Instant {
        Instant::from_origin(self.origin.elapsed())
    }

    fn to_tokio(&self, i: Instant) -> tokio::time::Instant {
        self.origin + i.since_origin()
    }

    /// Runs until every handle is gone (or shutdown was asked) and the engine is idle, or the
    /// shutdown grace ran out.
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>, mut pushes: Option<mpsc::UnboundedReceiver<T::Push>>) {
        let mut closing: Option<(tokio::time::Instant, Option<oneshot::Sender<()>>)> = None;
        loop {
            self.drain();
            if let Some((deadline, _)) = &closing {
                if self.engine.is_idle() || tokio::time::Instant::now() >= *deadline {
                    break;
                }
            }
            let timer = self.engine.poll_timeout().map(|t| self.to_tokio(t));
            let close_at = closing.as_ref().map(|(d, _)| *d);
            tokio::select! {
                biased;
                Some((id, reply)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    let now = self.now();
                    self.engine.handle_reply(now, id, reply);
                }
                Some(push) = recv(&mut pushes) => {
                    let now = self.now();
                    T::push(&mut self.engine, now, push);
                }
                msg = rx.recv(), if closing.is_none() => {
                    let now = self.now();
                    match msg {
                        Some(Msg::Shutdown { reply }) => {
                            self.engine.shutdown(now);
                            closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, Some(reply)));
                        }
                        Some(msg) => self.on_msg(now, msg),
                        None => {
                            self.engine.shutdown(now);
                            closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, None));
                        }
                    }
                }
                _ = sleep_until(timer) => {
                    let now = self.now();
                    self.engine.handle_timeout(now);
                }
                _ = sleep_until(close_at) => {}
                // Last, and after a yield, so only when nothing above is ready and the tasks
                // this input woke (the callers it answered, on this thread too) have run: the
                // events are formatted while the requests are on the wire, not before a caller
                // learns its outcome.
                _ = tokio::task::yield_now(), if self.telemetry.has_deferred() => self.telemetry.flush(),
            }
        }
        self.telemetry.flush();
        // The driver stops: no lease of this client is held any more (shutdown released them,
        // or they expire on the servers). Say so, rather than leave handles showing `Held`.
        for (_, tx) in self.leases.drain() {
            tx.send_replace(LeaseState::Released);
        }
        if let Some((_, Some(reply))) = closing {
            let _ = reply.send(());
        }
    }

    fn on_msg(&mut self, now: Instant, msg: Msg) {
        match msg {
            Msg::Acquire { ticket, name, primitive, options, wait, span, reply } => {
                match self.engine.acquire_primitive(now, &name, &primitive, &options, wait) {
                    Ok(op) => {
                        self.telemetry.started_under(op, span);
                        self.tickets.insert(ticket, op);
                        self.pending.wait(op, Pending::Acquire { ticket, reply });
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Msg::Reacquire { lease, reply } => {
                let op = self.engine.reacquire(now, lease);
                self.pending.wait(op, Pending::Acquire { ticket: 0, reply });
            }
            Msg::Observe { name, reply } => match self.engine.observe_leader(now, &name) {
                Ok(op) => {
                    self.pending.wait(op, Pending::Observe { reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Break { name, kind, fencing_token, reply } => match self.engine.break_lock(now, &name, kind, fencing_token) {
                Ok(op) => {
                    self.pending.wait(op, Pending::Break { reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Inspect { name, primitive, reply } => match self.engine.inspect_as(now, &name, &primitive) {
                Ok(op) => {
                    self.pending.wait(op, Pending::Inspect { reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::List { prefix, limit, cursor, reply } => match self.engine.list(now, &prefix, limit, cursor.as_deref()) {
                Ok(op) => {
                    self.pending.wait(op, Pending::List { reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Adopt { identity, options, reply } => match self.engine.adopt(now, &identity, &options) {
                Ok(op) => {
                    self.pending.wait(op, Pending::Acquire { ticket: 0, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Export { lease, reply } => {
                let _ = reply.send(self.engine.export(now, lease));
            }
            Msg::Cancel { ticket } => {
                // The reply stays pending: an explicit cancel awaits the outcome (told once
                // what the wait left is removed); a dropped future's closed reply ignores it.
                if let Some(op) = self.tickets.remove(&ticket) {
                    self.engine.cancel(now, op);
                }
            }
            Msg::Release { lease, reply } => {
                let op = self.engine.release(now, lease);
                self.pending.wait(op, Pending::Release { lease, reply });
            }
            Msg::Extend { lease, duration, reply } => match self.engine.extend(now, lease, duration) {
                Ok(op) => {
                    self.pending.wait(op, Pending::Extend { lease, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Telemetry(config) => self.engine.enable_telemetry(config),
            Msg::Listen { listener, when_idle } => self.telemetry.listen(listener, when_idle),
            Msg::Shutdown { .. } => unreachable!("handled by run"),
        }
    }

    /// The driving contract's drain: performs every queued request and delivers every queued
    /// event until neither is left (delivering can emit requests: a grant nobody waits for is
    /// released).
    fn drain(&mut self) {
        loop {
            while let Some(request) = self.engine.poll_request() {
                self.in_flight.push(self.transport.perform(request));
            }
            let Some(event) = self.engine.poll_event() else { break };
            match event {
                Event::Completed { op, outcome } => self.complete(op, outcome.into()),
                Event::Renewed { lease, valid_until } => self.update(lease, valid_until, Some(false)),
                Event::AtRisk { lease, valid_until } => self.update(lease, valid_until, Some(true)),
                Event::Lost { lease, error } => {
                    if let Some(tx) = self.leases.remove(&lease) {
                        tx.send_replace(LeaseState::Lost(error));
                    }
                }
                Event::Telemetry(t) => self.telemetry.defer(t),
            }
        }
    }

    /// A held lease's new validity, and whether a spell at risk begins or ends (`None`: unchanged).
    fn update(&self, lease: LeaseId, valid_until: Instant, risk: Option<bool>) {
        let until = self.to_tokio(valid_until);
        if let Some(tx) = self.leases.get(&lease) {
            tx.send_modify(|s| s.update(until, risk));
        }
    }

    /// Releases a grant nobody will hold (its acquire was cancelled or its caller is gone); its
    /// watch says `Released` once the engine forgets it.
    fn give_back(&mut self, now: Instant, lease: LeaseId) {
        let op = self.engine.release(now, lease);
        self.pending.wait(op, Pending::Release { lease, reply: None });
    }

    fn complete(&mut self, op: OpId, done: Done) {
        let now = self.now();
        // Nobody waits for this op (a cancelled acquire that was granted anyway): the core
        // gives a grant back, and its release is tracked like any other.
        let pending = match self.pending.claim(&mut self.engine, now, op, &done) {
            Claim::Waiter(pending) => pending,
            Claim::GaveBack { lease, release } => return self.pending.wait(release, Pending::Release { lease, reply: None }),
            Claim::Nobody => return,
        };
        let unexpected = |what: &str, d: Done| Error::protocol(format!("unexpected outcome for {what}: {d:?}"));
        match pending {
            Pending::Acquire { ticket, reply } => {
                self.tickets.remove(&ticket);
                let result = match done {
                    Done::Acquired { lease, fencing_token, valid_until } => {
                        let held = LeaseState::held(self.to_tokio(valid_until));
                        // A reentered lease shares the state its first hold already watches.
                        let state = match self.leases.get(&lease) {
                            Some(tx) => tx.subscribe(),
                            None => {
                                let (tx, rx) = watch::channel(held);
                                self.leases.insert(lease, tx);
                                rx
                            }
                        };
                        Ok(Some(Acquired { lease, fencing_token, state }))
                    }
                    Done::NotAcquired => Ok(None),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("acquire", d)),
                };
                // The caller is gone (its future was dropped between the grant and now).
                if let Err(Ok(Some(a))) = reply.send(result) {
                    self.give_back(now, a.lease);
                }
            }
            Pending::Release { lease, reply } => {
                let result = match done {
                    Done::Released { was_held } => Ok(was_held),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("release", d)),
                };
                // A reentered lease stays held until its last hold is given back.
                if self.engine.lease_valid_until(lease).is_none() {
                    if let Some(tx) = self.leases.remove(&lease) {
                        tx.send_replace(LeaseState::Released);
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Pending::Extend { lease, reply } => {
                let result = match done {
                    Done::Extended { valid_until } => {
                        self.update(lease, valid_until, None);
                        Ok(())
                    }
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("extend", d)),
                };
                let _ = reply.send(result);
            }
            Pending::Observe { reply } => {
                let result = match done {
                    Done::Observed(leader) => Ok(leader),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("observe", d)),
                };
                let _ = reply.send(result);
            }
            Pending::Break { reply } => {
                let result = match done {
                    Done::Broken(broken) => Ok(broken),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("break", d)),
                };
                let _ = reply.send(result);
            }
            Pending::Inspect { reply } => {
                let result = match done {
                    Done::Inspected(snapshot) => Ok(snapshot),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("inspect", d)),
                };
                let _ = reply.send(result);
            }
            Pending::List { reply } => {
                let result = match done {
                    Done::Listed(page) => Ok(page),
                    Done::Failed(e) => Err(e),
                    d => Err(unexpected("list", d)),
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// The next push, or never for a transport without pushes.
async fn recv<P>(pushes: &mut Option<mpsc::UnboundedReceiver<P>>) -> Option<P> {
    match pushes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`, or forever without one (a `select!` arm that never fires).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
