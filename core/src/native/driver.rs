//! The Redis driver: the task that owns one [`Engine`] and one connection (a server or a
//! Redis Cluster), and performs the engine's requests.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::convert;
use super::cluster_link::ClusterLink;
use super::link::Link;
use super::lease_state::LeaseState;
use super::message::{Acquired, Msg};
use crate::engine::{Event, LeaderInfo, LeaseId, OpId, Outcome, RequestId};
use crate::redis::{Engine, Request, RequestKind};
use crate::error::{Error, Result};
use crate::redis::reply::Reply;
use crate::time::Instant;

/// The connection the driver performs requests on: one server (replaced when it breaks or goes
/// silent, see [`Link`]), or a Redis Cluster (which routes each script by its first key; all
/// keys of one lock share a slot; replaced when a node goes silent, see [`ClusterLink`]).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(Link),
    Cluster(ClusterLink),
}

enum Pending {
    Acquire {
        ticket: u64,
        reply: oneshot::Sender<Result<Option<Acquired>>>,
    },
    Release {
        lease: LeaseId,
        reply: Option<oneshot::Sender<Result<bool>>>,
    },
    Extend {
        lease: LeaseId,
        reply: oneshot::Sender<Result<()>>,
    },
    Observe {
        reply: oneshot::Sender<Result<Option<LeaderInfo>>>,
    },
}

type ReplyFuture = Pin<Box<dyn Future<Output = (RequestId, Result<Vec<Reply>>)> + Send>>;

/// Longest time a shutdown waits for releases to reach the server.
pub(crate) const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

pub(crate) struct Driver {
    engine: Engine,
    conn: Conn,
    origin: tokio::time::Instant,
    pending: HashMap<OpId, Pending>,
    tickets: HashMap<u64, OpId>,
    leases: HashMap<LeaseId, watch::Sender<LeaseState>>,
    in_flight: FuturesUnordered<ReplyFuture>,
}

impl Driver {
    pub(crate) fn new(engine: Engine, conn: Conn) -> Self {
        Driver {
            engine,
            conn,
            origin: tokio::time::Instant::now(),
            pending: HashMap::new(),
            tickets: HashMap::new(),
            leases: HashMap::new(),
            in_flight: FuturesUnordered::new(),
        }
    }

    fn now(&self) -> Instant {
        Instant::from_origin(self.origin.elapsed())
    }

    fn to_tokio(&self, i: Instant) -> tokio::time::Instant {
        self.origin + i.since_origin()
    }

    /// Runs until every handle is gone (or shutdown was asked) and the engine is idle.
    pub(crate) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
    ) {
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
                Some((id, result)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    let now = self.now();
                    self.engine.handle_reply(now, id, result);
                }
                Some(push) = pushes.recv() => self.on_push(push),
                msg = rx.recv(), if closing.is_none() => match msg {
                    Some(Msg::Shutdown { reply }) => {
                        let now = self.now();
                        self.engine.shutdown(now);
                        closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, Some(reply)));
                    }
                    Some(msg) => self.on_msg(msg),
                    None => {
                        let now = self.now();
                        self.engine.shutdown(now);
                        closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, None));
                    }
                },
                _ = sleep_until(timer) => {
                    let now = self.now();
                    self.engine.handle_timeout(now);
                }
                _ = sleep_until(close_at) => {}
            }
        }
        // The driver stops: no lease of this client is held any more (shutdown released them,
        // or they expire on the server). Say so, rather than leave handles showing `Held`.
        for (_, tx) in self.leases.drain() {
            tx.send_replace(LeaseState::Released);
        }
        if let Some((_, Some(reply))) = closing {
            let _ = reply.send(());
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        let now = self.now();
        match msg {
            Msg::Acquire {
                ticket,
                name,
                primitive,
                options,
                wait,
                reply,
            } => match self.engine.acquire_primitive(now, &name, &primitive, &options, wait) {
                Ok(op) => {
                    self.tickets.insert(ticket, op);
                    self.pending.insert(op, Pending::Acquire { ticket, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Reacquire { lease, reply } => {
                let op = self.engine.reacquire(now, lease);
                self.pending.insert(op, Pending::Acquire { ticket: 0, reply });
            }
            Msg::Observe { name, reply } => match self.engine.observe_leader(now, &name) {
                Ok(op) => {
                    self.pending.insert(op, Pending::Observe { reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Cancel { ticket } => {
                if let Some(op) = self.tickets.remove(&ticket) {
                    self.pending.remove(&op);
                    self.engine.cancel(now, op);
                }
            }
            Msg::Release { lease, reply } => {
                let op = self.engine.release(now, lease);
                self.pending.insert(op, Pending::Release { lease, reply });
            }
            Msg::Extend {
                lease,
                duration,
                reply,
            } => match self.engine.extend(now, lease, duration) {
                Ok(op) => {
                    self.pending.insert(op, Pending::Extend { lease, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Shutdown { .. } => unreachable!("handled by run"),
        }
    }

    fn on_push(&mut self, push: redis::PushInfo) {
        let now = self.now();
        match push.kind {
            redis::PushKind::Message => {
                if let [redis::Value::BulkString(ch), redis::Value::BulkString(payload)] =
                    push.data.as_slice()
                {
                    self.engine.handle_notification(now, ch, payload);
                }
            }
            redis::PushKind::Disconnection => self.engine.handle_disconnect(now),
            _ => {}
        }
    }

    /// Performs every queued request and delivers every queued event.
    fn drain(&mut self) {
        while let Some(req) = self.engine.poll_request() {
            self.perform(req);
        }
        while let Some(ev) = self.engine.poll_event() {
            self.deliver(ev);
        }
        // Delivering can emit new requests (a release for an acquisition nobody awaits).
        while let Some(req) = self.engine.poll_request() {
            self.perform(req);
        }
    }

    fn perform(&mut self, req: Request) {
        let mut conn = self.conn.clone();
        let Request { id, kind } = req;
        let fut: ReplyFuture = match kind {
            RequestKind::Pipeline(commands) => {
                let mut pipe = redis::pipe();
                for c in &commands {
                    let mut cmd = redis::Cmd::new();
                    for a in &c.0 {
                        cmd.arg(a.as_slice());
                    }
                    pipe.add_command(cmd);
                }
                let n = commands.len();
                Box::pin(async move {
                    let r = match &mut conn {
                        Conn::Single(link) => link.pipeline(&pipe, n).await,
                        Conn::Cluster(link) => link.pipeline(&pipe).await,
                    };
                    (id, r.map(|vals| vals.into_iter().map(convert::reply).collect()))
                })
            }
            RequestKind::Subscribe(channel) => Box::pin(async move {
                let r = match &mut conn {
                    Conn::Single(link) => link.subscribe(channel.as_bytes()).await,
                    Conn::Cluster(link) => link.subscribe(channel.as_bytes()).await,
                };
                (id, r.map(|()| Vec::new()))
            }),
        };
        self.in_flight.push(fut);
    }

    fn deliver(&mut self, ev: Event) {
        match ev {
            Event::Completed { op, outcome } => self.complete(op, outcome),
            Event::Renewed { lease, valid_until } => {
                let at = self.to_tokio(valid_until);
                if let Some(tx) = self.leases.get(&lease) {
                    tx.send_replace(LeaseState::Held(at));
                }
            }
            Event::Lost { lease, error } => {
                if let Some(tx) = self.leases.remove(&lease) {
                    tx.send_replace(LeaseState::Lost(error));
                }
            }
        }
    }

    fn complete(&mut self, op: OpId, outcome: Outcome) {
        let now = self.now();
        let Some(pending) = self.pending.remove(&op) else {
            // Nobody waits for this op (a cancelled acquire that was granted anyway): undo it.
            if let Outcome::Acquired { lease, .. } = outcome {
                let _ = self.engine.release(now, lease);
            }
            return;
        };
        match pending {
            Pending::Acquire { ticket, reply } => {
                self.tickets.remove(&ticket);
                let result = match outcome {
                    Outcome::Acquired {
                        lease,
                        fencing_token,
                        valid_until,
                    } => {
                        let fencing_token = Some(fencing_token);
                        let held = LeaseState::Held(self.to_tokio(valid_until));
                        // A reentered lease shares the state its first hold already watches.
                        let rx = match self.leases.get(&lease) {
                            Some(tx) => tx.subscribe(),
                            None => {
                                let (tx, rx) = watch::channel(held);
                                self.leases.insert(lease, tx);
                                rx
                            }
                        };
                        Ok(Some(Acquired {
                            lease,
                            fencing_token,
                            state: rx,
                        }))
                    }
                    Outcome::NotAcquired => Ok(None),
                    Outcome::Failed(e) => Err(e),
                    other => Err(Error::protocol(format!(
                        "unexpected outcome for acquire: {other:?}"
                    ))),
                };
                if let Err(Ok(Some(acquired))) = reply.send(result) {
                    let _ = self.engine.release(now, acquired.lease);
                    if self.engine.lease_valid_until(acquired.lease).is_none() {
                        self.leases.remove(&acquired.lease);
                    }
                }
            }
            Pending::Release { lease, reply } => {
                let result = match outcome {
                    Outcome::Released { was_held } => Ok(was_held),
                    Outcome::Failed(e) => Err(e),
                    other => Err(Error::protocol(format!(
                        "unexpected outcome for release: {other:?}"
                    ))),
                };
                if self.engine.lease_valid_until(lease).is_none() {
                    if let Some(tx) = self.leases.remove(&lease) {
                        tx.send_replace(LeaseState::Released);
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Pending::Observe { reply } => {
                let result = match outcome {
                    Outcome::Observed(leader) => Ok(leader),
                    Outcome::Failed(e) => Err(e),
                    other => Err(Error::protocol(format!(
                        "unexpected outcome for observe: {other:?}"
                    ))),
                };
                let _ = reply.send(result);
            }
            Pending::Extend { lease, reply } => {
                let result = match outcome {
                    Outcome::Extended { valid_until } => {
                        if let Some(tx) = self.leases.get(&lease) {
                            tx.send_replace(LeaseState::Held(
                                self.origin + valid_until.since_origin(),
                            ));
                        }
                        Ok(())
                    }
                    Outcome::Failed(e) => Err(e),
                    other => Err(Error::protocol(format!(
                        "unexpected outcome for extend: {other:?}"
                    ))),
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// Sleeps until `at`, or forever without one (a `select!` arm that never fires).
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
