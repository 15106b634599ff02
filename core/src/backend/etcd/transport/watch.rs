//! One `Watch` stream per client, shared by every watch of it, run by one task that takes the
//! backend's creates and cancels in the order they were performed (queued when the request is
//! performed, so they reach the server in emission order) and pushes what the server sends.
//!
//! - A create is answered `Watching` once the server's `created` answer for it arrives (etcd
//!   answers a stream's creates in order); its events follow as [`EtcdNotice::Watch`]. The
//!   transport names each watch on the stream itself (etcd's client-chosen `watch_id`).
//! - A cancel is answered at once: the watch is forgotten here, so no notice of it follows,
//!   and the server is told (its confirmation is not waited for: etcd sends none for a watch
//!   it already ended).
//! - A watch the server ends (its start revision was compacted, a permission changed) is pushed
//!   as [`EtcdNotice::WatchEnded`]; a stream that breaks, or whose create goes unanswered for
//!   the response timeout, or whose client was replaced, ends every watch on it the same way
//!   and fails the creates still waiting with `ConnectionLost`. The next create opens a new
//!   stream; watches are never re-created here (the backend reads again and watches anew).

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Weak;

use etcd_client as ec;
use tokio::sync::{mpsc, oneshot};

use super::{failure, key_value, replace_client, Shared};
use crate::backend::etcd::{EtcdFailure, EtcdNotice, EtcdReply, EtcdResult, EventKind, WatchEvent, WatchId};
use crate::error::{Error, ErrorKind};

/// What the transport asks of the watch task.
enum Command {
    Watch { watch: WatchId, key: Vec<u8>, prefix: bool, start_revision: i64, reply: oneshot::Sender<EtcdResult> },
    Cancel { watch: WatchId, reply: oneshot::Sender<EtcdResult> },
    /// The client was replaced: a stream of an older generation ends.
    Replaced { generation: u64 },
}

/// The handle of the client's watch task (it stops once this is dropped).
pub(super) struct Watches {
    commands: mpsc::UnboundedSender<Command>,
}

impl Watches {
    /// Starts the task. It reaches the client through `shared` (weakly: the transport owns
    /// it) and pushes to `notices`.
    pub(super) fn start(shared: Weak<Shared>, notices: mpsc::UnboundedSender<EtcdNotice>) -> Watches {
        let (commands, rx) = mpsc::unbounded_channel();
        let task = Task { shared, notices, open: None, next_id: 1 };
        tokio::spawn(task.run(rx));
        Watches { commands }
    }

    /// Queues the create now; the future is its reply.
    pub(super) fn watch(
        &self,
        watch: WatchId,
        key: Vec<u8>,
        prefix: bool,
        start_revision: i64,
    ) -> impl Future<Output = EtcdResult> + Send + 'static {
        let (reply, rx) = oneshot::channel();
        self.queue(Command::Watch { watch, key, prefix, start_revision, reply }, rx)
    }

    /// Queues the cancel now; the future is its reply.
    pub(super) fn cancel(&self, watch: WatchId) -> impl Future<Output = EtcdResult> + Send + 'static {
        let (reply, rx) = oneshot::channel();
        self.queue(Command::Cancel { watch, reply }, rx)
    }

    /// Tells the task the client is now of `generation`.
    pub(super) fn replaced(&self, generation: u64) {
        let _ = self.commands.send(Command::Replaced { generation });
    }

    fn queue(&self, command: Command, rx: oneshot::Receiver<EtcdResult>) -> impl Future<Output = EtcdResult> + Send + 'static {
        let queued = self.commands.send(command).is_ok();
        async move {
            if !queued {
                return Err(EtcdFailure::ConnectionLost("the client is closed".into()));
            }
            rx.await.unwrap_or_else(|_| Err(EtcdFailure::ConnectionLost("the watch stream ended".into())))
        }
    }
}

/// A create sent, waiting for the server's `created`.
struct Creating {
    watch: WatchId,
    id: i64,
    reply: oneshot::Sender<EtcdResult>,
    deadline: tokio::time::Instant,
}

/// The open stream and the watches on it.
struct Open {
    generation: u64,
    sender: ec::WatchRequestSender,
    answers: ec::WatchResponseStream,
    creating: VecDeque<Creating>,
    /// The stream's watch ids of the live watches.
    live: HashMap<i64, WatchId>,
    /// Watches canceled before their `created` arrived: canceled on the server once it does.
    canceled_early: HashSet<WatchId>,
}

struct Task {
    shared: Weak<Shared>,
    notices: mpsc::UnboundedSender<EtcdNotice>,
    open: Option<Open>,
    /// The next watch id on a stream (etcd needs them non-zero and unique on the stream).
    next_id: i64,
}

impl Task {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            let deadline = self.open.as_ref().and_then(|o| o.creating.front()).map(|c| c.deadline);
            tokio::select! {
                command = commands.recv() => match command {
                    Some(c) => self.command(c).await,
                    // The transport is gone.
                    None => return,
                },
                answer = next(&mut self.open), if self.open.is_some() => self.answer(answer).await,
                _ = sleep_until(deadline), if deadline.is_some() => {
                    let generation = self.open.as_ref().map_or(0, |o| o.generation);
                    let limit = self.shared.upgrade().map(|s| s.response_timeout()).unwrap_or_default();
                    self.end(&format!("no answer to a watch create within the response timeout ({limit:?})"));
                    if let Some(shared) = self.shared.upgrade() {
                        replace_client(&shared, generation);
                    }
                }
            }
        }
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Watch { watch, key, prefix, start_revision, reply } => self.create(watch, key, prefix, start_revision, reply).await,
            Command::Cancel { watch, reply } => {
                if let Some(open) = &mut self.open {
                    if let Some(id) = open.live.iter().find(|(_, w)| **w == watch).map(|(id, _)| *id) {
                        open.live.remove(&id);
                        // Best effort: the watch is forgotten here whatever the server hears.
                        let _ = open.sender.cancel(id).await;
                    } else if open.creating.iter().any(|c| c.watch == watch) {
                        open.canceled_early.insert(watch);
                    }
                }
                let _ = reply.send(Ok(EtcdReply::WatchCanceled));
            }
            Command::Replaced { generation } => {
                if self.open.as_ref().is_some_and(|o| o.generation < generation) {
                    self.end("the connection went silent and was replaced");
                }
            }
        }
    }

    /// Sends a create on the open stream, or opens a stream with it.
    async fn create(&mut self, watch: WatchId, key: Vec<u8>, prefix: bool, start_revision: i64, reply: oneshot::Sender<EtcdResult>) {
        let Some(shared) = self.shared.upgrade() else {
            let _ = reply.send(Err(EtcdFailure::ConnectionLost("the client is closed".into())));
            return;
        };
        let conn = shared.conn();
        if self.open.as_ref().is_some_and(|o| o.generation != conn.generation) {
            self.end("the connection went silent and was replaced");
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut options = ec::WatchOptions::new().with_watch_id(id).with_start_revision(start_revision);
        if prefix {
            options = options.with_prefix();
        }
        let limit = shared.response_timeout();
        let deadline = tokio::time::Instant::now() + limit;
        match &mut self.open {
            Some(open) => {
                if open.sender.watch(key, Some(options)).await.is_err() {
                    self.end("the watch stream closed");
                    let _ = reply.send(Err(EtcdFailure::ConnectionLost("the watch stream closed".into())));
                    return;
                }
            }
            None => {
                let what = "opening the watch stream";
                match tokio::time::timeout(limit, conn.client.watch_client().watch(key, Some(options))).await {
                    Ok(Ok(stream)) => {
                        let (sender, answers) = stream.split();
                        self.open = Some(Open {
                            generation: conn.generation,
                            sender,
                            answers,
                            creating: VecDeque::new(),
                            live: HashMap::new(),
                            canceled_early: HashSet::new(),
                        });
                    }
                    Ok(Err(e)) => {
                        let _ = reply.send(Err(failure(e, what, shared.address())));
                        return;
                    }
                    Err(_) => {
                        replace_client(&shared, conn.generation);
                        let why = format!("{what}: no answer within the response timeout ({limit:?})");
                        let _ = reply.send(Err(EtcdFailure::ConnectionLost(why)));
                        return;
                    }
                }
            }
        }
        if let Some(open) = &mut self.open {
            open.creating.push_back(Creating { watch, id, reply, deadline });
        }
    }

    /// Acts on one thing the stream gave: an answer, an error, or its end.
    async fn answer(&mut self, answer: Result<Option<ec::WatchResponse>, ec::Error>) {
        let address = self.shared.upgrade().map(|s| s.address().clone());
        let answer = match answer {
            Ok(Some(a)) => a,
            Ok(None) => return self.end("the server ended the watch stream"),
            Err(e) => {
                let why = match &address {
                    Some(a) => failure(e, "the watch stream", a).to_string(),
                    None => format!("the watch stream: {e}"),
                };
                return self.end(&why);
            }
        };
        let Some(open) = &mut self.open else { return };
        if answer.created() {
            let Some(c) = open.creating.pop_front() else {
                return self.end("the server confirmed a watch nobody created");
            };
            let early = open.canceled_early.remove(&c.watch);
            if answer.canceled() {
                let reply = if answer.compact_revision() > 0 {
                    // Created and ended at once (its start revision is compacted): the backend
                    // hears of it as an ended watch, and reads again.
                    if !early {
                        let why = format!("the watch's start revision was compacted (oldest kept: {})", answer.compact_revision());
                        let _ = self.notices.send(EtcdNotice::WatchEnded { watch: c.watch, why });
                    }
                    Ok(EtcdReply::Watching)
                } else {
                    Err(refused(answer.cancel_reason()))
                };
                let _ = c.reply.send(reply);
                return;
            }
            if answer.watch_id() != c.id {
                let _ = c.reply.send(Err(EtcdFailure::ConnectionLost("the server confirmed another watch".into())));
                return self.end("the server confirmed watches out of order");
            }
            if early {
                // Canceled before it was created: cancel it on the server now (in order behind
                // the create), never push its events.
                let _ = open.sender.cancel(c.id).await;
            } else {
                open.live.insert(c.id, c.watch);
            }
            let _ = c.reply.send(Ok(EtcdReply::Watching));
            // A created answer may carry events too (a fragment); fall through for them.
        }
        let Some(watch) = open.live.get(&answer.watch_id()).copied() else { return };
        if answer.canceled() {
            open.live.remove(&answer.watch_id());
            let why = match answer.compact_revision() {
                r if r > 0 => format!("the watch's start revision was compacted (oldest kept: {r})"),
                _ if !answer.cancel_reason().is_empty() => format!("the server ended the watch: {}", answer.cancel_reason()),
                _ => "the server ended the watch".to_string(),
            };
            let _ = self.notices.send(EtcdNotice::WatchEnded { watch, why });
            return;
        }
        let events: Vec<WatchEvent> = answer
            .events()
            .iter()
            .filter_map(|e| {
                let kind = match e.event_type() {
                    ec::EventType::Put => EventKind::Put,
                    ec::EventType::Delete => EventKind::Delete,
                };
                Some(WatchEvent { kind, kv: key_value(e.kv()?) })
            })
            .collect();
        if !events.is_empty() {
            let _ = self.notices.send(EtcdNotice::Watch { watch, events });
        }
    }

    /// Drops the stream: every live watch on it is pushed as ended, every create waiting on
    /// it fails.
    fn end(&mut self, why: &str) {
        let Some(open) = self.open.take() else { return };
        for c in open.creating {
            let _ = c.reply.send(Err(EtcdFailure::ConnectionLost(why.to_string())));
        }
        let mut ended: Vec<WatchId> = open.live.into_values().collect();
        ended.sort();
        for watch in ended {
            let _ = self.notices.send(EtcdNotice::WatchEnded { watch, why: why.to_string() });
        }
    }
}

/// The next thing the open stream gives (never called without one).
async fn next(open: &mut Option<Open>) -> Result<Option<ec::WatchResponse>, ec::Error> {
    match open {
        Some(o) => o.answers.message().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A create the server refused (created and canceled at once, no compaction): what retrying
/// cannot fix.
fn refused(reason: &str) -> EtcdFailure {
    if reason.contains("permission denied") {
        EtcdFailure::Other(Error::new(ErrorKind::Authentication, format!("the cluster refused a watch: {reason}")))
    } else {
        EtcdFailure::Other(Error::protocol(format!("the cluster refused a watch: {reason}")))
    }
}
