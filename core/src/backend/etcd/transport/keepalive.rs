//! One `LeaseKeepAlive` stream per client, shared by every lease of it (etcd answers a stream's
//! keepalives one by one, in order). Each [`EtcdOp::LeaseKeepAlive`] sends one keepalive on it
//! and is answered by the server's answer to that keepalive (its TTL, or `LeaseNotFound` for
//! TTL 0: an expired or revoked lease); the transport sends none of its own.
//!
//! The stream is opened by the first keepalive that finds none. The crate's opening call sends
//! that keepalive and swallows the server's answer (failing on TTL 0), so on success the same
//! keepalive is sent once more and its answer is the reply: both left after the backend's send
//! time, from which it counts the lease's validity. A stream that breaks, or that leaves a
//! keepalive unanswered for the response timeout, fails every keepalive waiting on it with
//! `ConnectionLost` and is dropped (the next keepalive opens another; an unanswered one also
//! has the client replaced, see [`super::replace_client`]).
//!
//! [`EtcdOp::LeaseKeepAlive`]: crate::backend::etcd::EtcdOp::LeaseKeepAlive

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use etcd_client as ec;
use tokio::sync::{mpsc, oneshot};

use super::{failure, replace_client, Shared};
use crate::backend::etcd::{EtcdAddress, EtcdFailure, EtcdReply, EtcdResult, LeaseId};

/// The client's keepalive stream, if one is open.
#[derive(Default)]
pub(super) struct KeepAlives {
    current: Mutex<Option<Arc<Stream>>>,
    /// One opening at a time, so concurrent keepalives share the stream one of them opens.
    opening: tokio::sync::Mutex<()>,
}

/// One open stream: where keepalives go, and who waits for an answer, per lease in order.
struct Stream {
    /// The generation of the client it runs on.
    generation: u64,
    /// The crate's handle of the stream; its `sender` takes keepalives of any lease.
    keeper: ec::LeaseKeeper,
    waiting: Arc<Mutex<Waiting>>,
    reader: tokio::task::AbortHandle,
}

#[derive(Default)]
struct Waiting {
    by_lease: HashMap<LeaseId, VecDeque<oneshot::Sender<EtcdResult>>>,
    /// Set once the stream is done: why.
    closed: Option<String>,
}

impl Waiting {
    /// Marks the stream done and fails every keepalive waiting on it.
    fn close(&mut self, why: &str) {
        if self.closed.is_none() {
            self.closed = Some(why.to_string());
        }
        for (_, queue) in self.by_lease.drain() {
            for tx in queue {
                let _ = tx.send(Err(EtcdFailure::ConnectionLost(why.to_string())));
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Stream {
    /// Starts reading the answers of a stream the crate opened.
    fn start(generation: u64, keeper: ec::LeaseKeeper, answers: ec::LeaseKeepAliveStream, address: EtcdAddress) -> Arc<Stream> {
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let reader = tokio::spawn(read(answers, waiting.clone(), address)).abort_handle();
        Arc::new(Stream { generation, keeper, waiting, reader })
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_closed(&self) -> bool {
        self.waiting().closed.is_some()
    }

    fn close(&self, why: &str) {
        self.waiting().close(why);
    }

    /// Sends one keepalive of `lease` and waits for the server's answer to it.
    async fn send(&self, lease: LeaseId) -> EtcdResult {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting();
            if let Some(why) = &waiting.closed {
                return Err(EtcdFailure::ConnectionLost(why.clone()));
            }
            // Registered before sending, so the answer cannot come first.
            waiting.by_lease.entry(lease).or_default().push_back(tx);
        }
        let mut request = request_like(&self.keeper.sender);
        request.id = lease;
        if self.keeper.sender.send(request).await.is_err() {
            self.close("the keepalive stream closed");
        }
        rx.await.unwrap_or_else(|_| Err(EtcdFailure::ConnectionLost("the keepalive stream ended".into())))
    }
}

/// An empty request of the kind `sender` takes. The crate names its keepalive request type
/// only with its `build-server` feature (server stubs the client does not need), so the type
/// is taken from the stream's sender.
fn request_like<T: Default>(_sender: &mpsc::Sender<T>) -> T {
    T::default()
}

/// Hands each answer to the keepalive of its lease sent first; when the stream ends, fails the
/// ones still waiting.
async fn read(mut answers: ec::LeaseKeepAliveStream, waiting: Arc<Mutex<Waiting>>, address: EtcdAddress) {
    let why = loop {
        match answers.message().await {
            Ok(Some(answer)) => {
                let lease = answer.id();
                let tx = {
                    let mut w = waiting.lock().unwrap_or_else(|p| p.into_inner());
                    let queue = w.by_lease.get_mut(&lease);
                    let tx = queue.and_then(VecDeque::pop_front);
                    if w.by_lease.get(&lease).is_some_and(VecDeque::is_empty) {
                        w.by_lease.remove(&lease);
                    }
                    tx
                };
                let reply = match answer.ttl() {
                    ttl if ttl > 0 => Ok(EtcdReply::KeptAlive { lease, ttl_secs: ttl }),
                    _ => Err(EtcdFailure::LeaseNotFound),
                };
                if let Some(tx) = tx {
                    let _ = tx.send(reply);
                }
            }
            Ok(None) => break "the server ended the keepalive stream".to_string(),
            Err(e) => break failure(e, "the keepalive stream", &address).to_string(),
        }
    };
    waiting.lock().unwrap_or_else(|p| p.into_inner()).close(&why);
}

impl KeepAlives {
    /// The open stream on the client of `generation`, if there is one (an older client's is
    /// closed and dropped here).
    fn live(&self, generation: u64) -> Option<Arc<Stream>> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        match current.as_ref() {
            Some(s) if s.generation == generation && !s.is_closed() => Some(s.clone()),
            Some(s) => {
                s.close("the keepalive stream was replaced");
                *current = None;
                None
            }
            None => None,
        }
    }

    /// The open stream, or a new one opened with a keepalive of `lease`. `Err` is the reply to
    /// that keepalive when the opening failed (`LeaseNotFound` for a lease that is gone).
    async fn current_or_open(&self, shared: &Shared, lease: LeaseId) -> Result<Arc<Stream>, EtcdResult> {
        if let Some(s) = self.live(shared.conn().generation) {
            return Ok(s);
        }
        let _one = self.opening.lock().await;
        let conn = shared.conn();
        if let Some(s) = self.live(conn.generation) {
            return Ok(s);
        }
        let what = format!("opening the keepalive stream with lease {lease:x}");
        match conn.client.lease_client().keep_alive(lease).await {
            Ok((keeper, answers)) => {
                let stream = Stream::start(conn.generation, keeper, answers, shared.address().clone());
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(stream.clone());
                Ok(stream)
            }
            Err(e) => Err(Err(failure(e, &what, shared.address()))),
        }
    }

    /// Closes `stream` (failing its waiting keepalives) and forgets it if it is the current one.
    fn drop_stream(&self, stream: &Arc<Stream>, why: &str) {
        stream.close(why);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|s| Arc::ptr_eq(s, stream)) {
            *current = None;
        }
    }

    /// Closes and forgets a stream of a client older than `generation` (it was replaced).
    pub(super) fn close_older(&self, generation: u64, why: &str) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|s| s.generation < generation) {
            if let Some(s) = current.take() {
                s.close(why);
            }
        }
    }
}

/// Performs one keepalive of `lease`, bounded by the response timeout.
pub(super) async fn keep_alive(shared: Arc<Shared>, lease: LeaseId) -> EtcdResult {
    let limit = shared.response_timeout();
    let generation = shared.conn().generation;
    let mut used: Option<Arc<Stream>> = None;
    let answer = tokio::time::timeout(limit, async {
        let stream = match shared.keepalive.current_or_open(&shared, lease).await {
            Ok(s) => s,
            Err(reply) => return reply,
        };
        used = Some(stream.clone());
        stream.send(lease).await
    })
    .await;
    match answer {
        Ok(reply) => reply,
        Err(_) => {
            let why = format!("no answer to a keepalive of lease {lease:x} within the response timeout ({limit:?})");
            match used {
                Some(stream) => {
                    shared.keepalive.drop_stream(&stream, &why);
                    replace_client(&shared, stream.generation);
                }
                None => replace_client(&shared, generation),
            }
            Err(EtcdFailure::ConnectionLost(why))
        }
    }
}
