//! One actor process: JSON lines in on stdin, JSON lines out on stdout.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// A reply with the time it took from sending the operation.
pub struct Timed {
    pub value: Value,
    pub elapsed: Duration,
}

pub struct Actor {
    pub binding: String,
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::UnboundedReceiver<(Instant, Value)>,
    early: HashMap<u64, (Instant, Value)>,
    sent_at: HashMap<u64, Instant>,
    next_id: u64,
}

impl Actor {
    /// Starts `command` (argv, relative to the repository root) for `binding`.
    pub fn spawn(binding: &str, command: &[String], root: &std::path::Path) -> Result<Actor, String> {
        let (program, args) = command.split_first().ok_or("empty actor command")?;
        let mut child = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the {binding} actor ({program}): {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, replies) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // Stamp each reply on arrival, so waiting on another one does not inflate it.
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send((Instant::now(), v));
                }
            }
        });
        Ok(Actor { binding: binding.into(), child, stdin, replies, early: HashMap::new(), sent_at: HashMap::new(), next_id: 1 })
    }

    /// Sends an operation; returns its id for [`Actor::wait`].
    pub async fn send(&mut self, mut op: Value) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        op["id"] = Value::from(id);
        let mut line = op.to_string();
        line.push('\n');
        self.sent_at.insert(id, Instant::now());
        self.stdin.write_all(line.as_bytes()).await.map_err(|e| format!("{} actor is gone: {e}", self.binding))?;
        self.stdin.flush().await.map_err(|e| e.to_string())?;
        Ok(id)
    }

    /// Waits up to `limit` for the reply to operation `id`.
    pub async fn wait(&mut self, id: u64, limit: Duration) -> Result<Timed, String> {
        let deadline = tokio::time::Instant::now() + limit;
        let (arrived, value) = loop {
            if let Some(r) = self.early.remove(&id) {
                break r;
            }
            let (at, v) = tokio::time::timeout_at(deadline, self.replies.recv())
                .await
                .map_err(|_| format!("no reply from the {} actor within {limit:?}", self.binding))?
                .ok_or_else(|| format!("the {} actor exited", self.binding))?;
            let rid = v.get("id").and_then(Value::as_u64).unwrap_or(0);
            if rid == id {
                break (at, v);
            }
            self.early.insert(rid, (at, v));
        };
        let sent = self.sent_at.remove(&id).unwrap_or(arrived);
        Ok(Timed { value, elapsed: arrived.saturating_duration_since(sent) })
    }

    /// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the process: a holder that stops running while
    /// its leases and sessions run out on the server.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        let pid = self.child.id().ok_or_else(|| format!("the {} actor exited", self.binding))?;
        lockgate_conformance::process::send(pid, signal)
    }

    /// Kills the process without letting it release anything.
    pub async fn crash(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Makes the actor as a fresh one for the next scenario run: it closes every client (its
    /// leases released as at exit) and forgets them. Fails if the process is gone or does not
    /// answer within `limit` (an operation of the last run still blocking it).
    pub async fn reset(&mut self, limit: Duration) -> Result<(), String> {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return Err(format!("the {} actor exited", self.binding));
        }
        let id = self.send(serde_json::json!({"op": "reset"})).await?;
        let reply = self.wait(id, limit).await?;
        if reply.value["ok"] != true {
            return Err(format!("the {} actor could not reset: {}", self.binding, reply.value));
        }
        // Replies of the last run that nobody waited for are not the next run's.
        self.early.clear();
        self.sent_at.clear();
        Ok(())
    }

    /// Asks the actor to exit and waits for it.
    pub async fn finish(mut self) {
        let _ = self.stdin.write_all(b"{\"op\":\"exit\"}\n").await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

/// How long a reused actor may take to close the last run's clients.
const RESET_LIMIT: Duration = Duration::from_secs(15);

/// Idle actors of each binding kept at most (more are asked to exit).
const IDLE_PER_BINDING: usize = 8;

/// Actors kept between scenario runs: starting a process per run (a JVM takes 1–2 s) was most
/// of the conformance suite's time. A run takes idle actors of its bindings or starts new ones,
/// and gives back those that finished the run cleanly once each has reset (closed its
/// clients); a crashed, frozen or failed run's actors exit instead, so nothing a run did can
/// leak into the next beyond what a fresh client of the same process would see.
#[derive(Default)]
pub struct Pool {
    idle: std::sync::Mutex<HashMap<String, Vec<Actor>>>,
}

impl Pool {
    /// An idle actor of `binding`, or a new one running `command`.
    pub fn take(&self, binding: &str, command: &[String], root: &std::path::Path) -> Result<Actor, String> {
        let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_mut(binding).and_then(Vec::pop);
        match idle {
            Some(a) => Ok(a),
            None => Actor::spawn(binding, command, root),
        }
    }

    /// Takes `a` back after a clean run if it resets; otherwise it exits.
    pub async fn give_back(&self, mut a: Actor) {
        if a.reset(RESET_LIMIT).await.is_err() {
            return a.finish().await;
        }
        let extra = {
            let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let list = idle.entry(a.binding.clone()).or_default();
            if list.len() < IDLE_PER_BINDING {
                list.push(a);
                None
            } else {
                Some(a)
            }
        };
        if let Some(a) = extra {
            a.finish().await;
        }
    }

    /// Asks every idle actor to exit.
    pub async fn drain(&self) {
        let all: Vec<Actor> = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain().flat_map(|(_, v)| v).collect();
        for a in all {
            a.finish().await;
        }
    }
}
