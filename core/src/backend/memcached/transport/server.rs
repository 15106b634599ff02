//! One memcached server's connection, owned by a task of its own: requests are written in the
//! order they come and their answers read back in that order (pipelined). A connection that
//! breaks, sends what is no answer, or leaves a request unanswered for `response_timeout` (a
//! frozen server, a half-open socket) fails every request on it with the retryable
//! `CONNECTION` error and is dropped; the next request connects again (within
//! `connect_timeout`). A silence also makes every other server's idle connection of the client
//! be replaced before its next request ([`Silences`]): it is most often the network's or a
//! proxy's, not one server's, and an idle connection cannot show it is silent until a request
//! waits a whole response timeout on it. Leases stay safe meanwhile: their validity is local
//! time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::text::{encode, parse, Expect};
use crate::backend::memcached::request::{McCommand, McReply};
use crate::error::{Error, ErrorKind, Result};

/// A request for the server's task: its bytes, the answer it expects, who waits for it.
type Job = (Vec<u8>, Expect, oneshot::Sender<McReply>);

/// How many silent connections the servers of one client have found: each server's task
/// replaces an idle connection opened before the latest.
pub(crate) type Silences = Arc<AtomicU64>;

/// A handle on one server's task (the task ends when every handle is gone).
#[derive(Clone)]
pub(crate) struct Server {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Server {
    /// Starts the task of server `host:port` (it connects at the first request).
    pub(crate) fn spawn(host: String, port: u16, connect_timeout: Duration, response_timeout: Duration, silences: Silences) -> Server {
        let (jobs, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(Endpoint { host, port, connect_timeout, response_timeout, silences }, rx));
        Server { jobs }
    }

    /// Queues `command` now (so commands go out in the order of these calls) and returns its
    /// answer's future.
    pub(crate) fn call(&self, command: &McCommand) -> impl std::future::Future<Output = McReply> + Send + 'static {
        let mut bytes = Vec::new();
        let expect = encode(command, &mut bytes);
        self.send(bytes, expect)
    }

    /// Asks the server's version: `Ok` if a memcached answered (the connect's check).
    pub(crate) async fn hello(&self) -> Result<()> {
        self.send(b"version\r\n".to_vec(), Expect::Version).await.map(|_| ())
    }

    fn send(&self, bytes: Vec<u8>, expect: Expect) -> impl std::future::Future<Output = McReply> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let queued = self.jobs.send((bytes, expect, tx)).is_ok();
        async move {
            if !queued {
                return Err(Error::new(ErrorKind::Closed, "the memcached connection task ended"));
            }
            rx.await.unwrap_or_else(|_| Err(Error::new(ErrorKind::Connection, "the memcached connection task ended")))
        }
    }
}

struct Endpoint {
    host: String,
    port: u16,
    connect_timeout: Duration,
    response_timeout: Duration,
    silences: Silences,
}

impl Endpoint {
    fn name(&self) -> String {
        crate::address::host_port(&self.host, self.port)
    }

    async fn connect(&self) -> Result<TcpStream> {
        let connect = TcpStream::connect((self.host.as_str(), self.port));
        let stream = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(io)) => return Err(Error::new(ErrorKind::Connection, format!("memcached at {}: {io}", self.name()))),
            Err(_) => {
                let why = format!("memcached at {}: no connection within {:?}", self.name(), self.connect_timeout);
                return Err(Error::new(ErrorKind::Connection, why));
            }
        };
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

/// Reads more of the answer stream (never completes without a connection).
async fn read_some(reader: Option<&mut OwnedReadHalf>, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    match reader {
        Some(r) => r.read_buf(buf).await,
        None => std::future::pending().await,
    }
}

/// The server's task: see the module documentation.
async fn run(at: Endpoint, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut reader: Option<OwnedReadHalf> = None;
    let mut writer: Option<OwnedWriteHalf> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut pending: VecDeque<(Expect, oneshot::Sender<McReply>, Instant)> = VecDeque::new();
    // The client's silence count when the connection was opened.
    let mut opened_at = 0;
    // Drops the connection, failing every request on it.
    let drop_all = |pending: &mut VecDeque<(Expect, oneshot::Sender<McReply>, Instant)>, e: &Error| {
        for (_, tx, _) in pending.drain(..) {
            let _ = tx.send(Err(e.clone()));
        }
    };
    loop {
        let deadline = pending.front().map(|p| p.2);
        tokio::select! {
            job = jobs.recv() => {
                let Some((bytes, expect, tx)) = job else { break };
                if writer.is_some() && pending.is_empty() && at.silences.load(Ordering::SeqCst) != opened_at {
                    // Another server's connection went silent since this one opened.
                    (reader, writer) = (None, None);
                }
                if writer.is_none() {
                    opened_at = at.silences.load(Ordering::SeqCst);
                    match at.connect().await {
                        Ok(stream) => {
                            let (r, w) = stream.into_split();
                            reader = Some(r);
                            writer = Some(w);
                            buf.clear();
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            continue;
                        }
                    }
                }
                let w = writer.as_mut().expect("connected above");
                if let Err(io) = w.write_all(&bytes).await {
                    let e = Error::new(ErrorKind::Connection, format!("memcached at {}: {io}", at.name()));
                    let _ = tx.send(Err(e.clone()));
                    drop_all(&mut pending, &e);
                    (reader, writer) = (None, None);
                    continue;
                }
                pending.push_back((expect, tx, Instant::now() + at.response_timeout));
            }
            read = read_some(reader.as_mut(), &mut buf), if !pending.is_empty() => {
                let broken = match read {
                    Ok(0) => Some(Error::new(ErrorKind::Connection, format!("memcached at {} closed the connection", at.name()))),
                    Err(io) => Some(Error::new(ErrorKind::Connection, format!("memcached at {}: {io}", at.name()))),
                    Ok(_) => loop {
                        let Some((expect, _, _)) = pending.front() else { break None };
                        match parse(&buf, *expect) {
                            Ok(Some((answer, used))) => {
                                buf.drain(..used);
                                let (_, tx, _) = pending.pop_front().expect("front exists");
                                let _ = tx.send(answer);
                            }
                            Ok(None) => break None,
                            Err(e) => break Some(Error::new(ErrorKind::Protocol, format!("memcached at {}: {}", at.name(), e.message()))),
                        }
                    },
                };
                if let Some(e) = broken {
                    drop_all(&mut pending, &e);
                    (reader, writer) = (None, None);
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                let why = format!("memcached at {} did not answer within {:?}; the connection is replaced", at.name(), at.response_timeout);
                drop_all(&mut pending, &Error::new(ErrorKind::Connection, why));
                (reader, writer) = (None, None);
                at.silences.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
