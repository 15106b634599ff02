//! The Redlock driver: the task that owns one [`RedlockEngine`] and one connection per master,
//! and performs the engine's requests. It takes the same messages as the Redis driver, so a
//! Redlock client's handles are the same [`Lock`](super::Lock) and [`Lease`](super::Lease).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::convert;
use super::driver::{sleep_until, SHUTDOWN_GRACE};
use super::lease_state::LeaseState;
use super::link::Link;
use super::message::{Acquired, Msg};
use crate::connect::RedisUrl;
use crate::engine::{Event, LeaseId, OpId, Primitive, RequestId};
use crate::error::{Error, ErrorKind, Result};
use crate::random::OsRandom;
use crate::redis::reply::Reply;
use crate::redlock::{NodeRequest, RedlockConfig, RedlockEngine, RedlockOutcome};
use crate::time::{Duration, Instant};

/// Connects to every master it can reach and starts the driver; masters that are down are
/// retried in the background (they count as failed votes meanwhile). Fails if none is
/// reachable or a master refuses the credentials.
pub(crate) async fn connect(
    urls: Vec<RedisUrl>,
    config: RedlockConfig,
    tls_ca_pem: Option<&[u8]>,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<mpsc::UnboundedSender<Msg>> {
    let links: Vec<Link> = urls
        .iter()
        .map(|u| Link::new(u, tls_ca_pem, connect_timeout, response_timeout, None))
        .collect::<Result<_>>()?;
    let results = futures_util::future::join_all(links.iter().map(Link::first_connect)).await;
    if let Some(Err(e)) = results.iter().find(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Authentication)) {
        return Err(e.clone());
    }
    if results.iter().all(Result::is_err) {
        let first = results.into_iter().find_map(Result::err).expect("all failed");
        return Err(Error::new(ErrorKind::Connection, format!("no master is reachable: {}", first.message())));
    }
    let engine = RedlockEngine::new(config, Box::new(OsRandom))?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(RedlockDriver::new(engine, links, urls).run(rx));
    Ok(tx)
}

/// What a Redlock cannot do, as the error its driver answers (the handles refuse it first).
fn unsupported(what: &str) -> Error {
    Error::unsupported(format!("{what} supported by a Redlock client (redlock://)"))
}

enum Pending {
    Acquire { ticket: u64, reply: oneshot::Sender<Result<Option<Acquired>>> },
    Release { reply: Option<oneshot::Sender<Result<bool>>> },
    Extend { lease: LeaseId, reply: oneshot::Sender<Result<()>> },
}

type ReplyFuture = Pin<Box<dyn Future<Output = (RequestId, Result<Reply>)> + Send>>;

struct RedlockDriver {
    engine: RedlockEngine,
    /// One self-replacing connection per master (see [`Link`]).
    conns: Vec<Link>,
    urls: Vec<RedisUrl>,
    origin: tokio::time::Instant,
    pending: HashMap<OpId, Pending>,
    tickets: HashMap<u64, OpId>,
    leases: HashMap<LeaseId, watch::Sender<LeaseState>>,
    in_flight: FuturesUnordered<ReplyFuture>,
}

impl RedlockDriver {
    fn new(engine: RedlockEngine, conns: Vec<Link>, urls: Vec<RedisUrl>) -> Self {
        RedlockDriver {
            engine,
            conns,
            urls,
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

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let mut closing: Option<(tokio::time::Instant, Option<oneshot::Sender<()>>)> = None;
        loop {
            self.drain();
            if let Some((deadline, _)) = &closing {
                if self.engine.is_idle() || tokio::time::Instant::now() >= *deadline {
                    break;
                }
            }
            let timer = self.engine.poll_timeout().map(|t| self.origin + t.since_origin());
            let close_at = closing.as_ref().map(|(d, _)| *d);
            tokio::select! {
                biased;
                Some((id, result)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    let now = self.now();
                    self.engine.handle_reply(now, id, result);
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
            }
        }
        for (_, tx) in self.leases.drain() {
            tx.send_replace(LeaseState::Released);
        }
        if let Some((_, Some(reply))) = closing {
            let _ = reply.send(());
        }
    }

    fn on_msg(&mut self, now: Instant, msg: Msg) {
        match msg {
            Msg::Acquire { primitive, reply, .. } if primitive != Primitive::Mutex => {
                let _ = reply.send(Err(unsupported("only mutexes are")));
            }
            Msg::Reacquire { reply, .. } => {
                let _ = reply.send(Err(unsupported("reentrant locks are not")));
            }
            Msg::Observe { reply, .. } => {
                let _ = reply.send(Err(unsupported("observing a leader is not")));
            }
            Msg::Acquire { ticket, name, options, wait, reply, .. } => match self.engine.acquire(now, &name, &options, wait) {
                Ok(op) => {
                    self.tickets.insert(ticket, op);
                    self.pending.insert(op, Pending::Acquire { ticket, reply });
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
                if let Some(tx) = self.leases.remove(&lease) {
                    tx.send_replace(LeaseState::Released);
                }
                let op = self.engine.release(now, lease);
                self.pending.insert(op, Pending::Release { reply });
            }
            Msg::Extend { lease, duration, reply } => match self.engine.extend(now, lease, duration) {
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

    fn drain(&mut self) {
        loop {
            while let Some(req) = self.engine.poll_request() {
                self.perform(req);
            }
            let Some(ev) = self.engine.poll_event() else { break };
            self.deliver(ev);
        }
    }

    fn perform(&mut self, req: NodeRequest) {
        let NodeRequest { id, master, command } = req;
        let link = self.conns[master].clone();
        if !link.is_connected() {
            // Down (since connect, or being replaced): a vote cannot wait for a connection, so
            // answer at once and let the link connect in the background.
            link.kick();
            let e = Error::new(ErrorKind::Connection, format!("master {} is not connected", self.urls[master]));
            self.in_flight.push(Box::pin(async move { (id, Err(e)) }));
            return;
        }
        let mut pipe = redis::pipe();
        let mut cmd = redis::Cmd::new();
        for a in &command.0 {
            cmd.arg(a.as_slice());
        }
        pipe.add_command(cmd);
        self.in_flight.push(Box::pin(async move {
            let r = link
                .pipeline(&pipe, 1)
                .await
                .and_then(|mut v| v.pop().map(convert::reply).ok_or_else(|| Error::protocol("no reply")));
            (id, r)
        }));
    }

    fn deliver(&mut self, ev: Event<RedlockOutcome>) {
        match ev {
            Event::Completed { op, outcome } => self.complete(op, outcome),
            Event::Renewed { lease, valid_until } => {
                if let Some(tx) = self.leases.get(&lease) {
                    tx.send_replace(LeaseState::Held(self.origin + valid_until.since_origin()));
                }
            }
            Event::Lost { lease, error } => {
                if let Some(tx) = self.leases.remove(&lease) {
                    tx.send_replace(LeaseState::Lost(error));
                }
            }
        }
    }

    fn complete(&mut self, op: OpId, outcome: RedlockOutcome) {
        let now = self.now();
        let Some(pending) = self.pending.remove(&op) else {
            if let RedlockOutcome::Acquired { lease, .. } = outcome {
                let _ = self.engine.release(now, lease);
            }
            return;
        };
        let unexpected = |what: &str, o: RedlockOutcome| Error::protocol(format!("unexpected outcome for {what}: {o:?}"));
        match pending {
            Pending::Acquire { ticket, reply } => {
                self.tickets.remove(&ticket);
                let result = match outcome {
                    RedlockOutcome::Acquired { lease, valid_until } => {
                        let (tx, rx) = watch::channel(LeaseState::Held(self.origin + valid_until.since_origin()));
                        self.leases.insert(lease, tx);
                        Ok(Some(Acquired { lease, fencing_token: None, state: rx }))
                    }
                    RedlockOutcome::NotAcquired => Ok(None),
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("acquire", o)),
                };
                if let Err(Ok(Some(a))) = reply.send(result) {
                    self.leases.remove(&a.lease);
                    let _ = self.engine.release(now, a.lease);
                }
            }
            Pending::Release { reply } => {
                let result = match outcome {
                    RedlockOutcome::Released { was_held } => Ok(was_held),
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("release", o)),
                };
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Pending::Extend { lease, reply } => {
                let result = match outcome {
                    RedlockOutcome::Extended { valid_until } => {
                        if let Some(tx) = self.leases.get(&lease) {
                            tx.send_replace(LeaseState::Held(self.origin + valid_until.since_origin()));
                        }
                        Ok(())
                    }
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("extend", o)),
                };
                let _ = reply.send(result);
            }
        }
    }
}

