//! The status line shown while waiting for a lock on a terminal (refreshed every second, on
//! stderr, erased once the wait ends): how long we waited, who holds the lock and for how long,
//! and how many wait ahead of us (from the core's inspect, read every other second); nothing
//! at all when stderr is not a terminal, so cron mail and CI logs stay clean.

use std::time::Duration;

use lockgate_core::inspect::{Kind, Snapshot};
use lockgate_core::native::Client;
use tokio::time::{Instant, Interval};

use crate::stderr::{self, Line};

/// How long one read of who holds the lock may take before the line goes on without it.
const READ_LIMIT: Duration = Duration::from_millis(500);

/// The waiting line of one lock.
pub struct Status {
    name: String,
    kind: Kind,
    /// This process's label: its own queue entry is not "ahead" of it.
    label: String,
    since: Instant,
    /// `None` when stderr is not a terminal.
    tick: Option<Interval>,
    shown: bool,
    /// What the last read of the lock said, shown until the next one.
    seen: String,
    ticks: u64,
}

impl Status {
    /// A status line for the wait on `name` of `kind` by the process labelled `label` (quiet
    /// unless stderr is a terminal).
    pub fn new(name: &str, kind: Kind, label: &str) -> Status {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let tick = tty.then(|| {
            let start = Instant::now() + Duration::from_secs(1);
            tokio::time::interval_at(start, Duration::from_secs(1))
        });
        let (name, label) = (name.to_string(), label.to_string());
        Status { name, kind, label, since: Instant::now(), tick, shown: false, seen: String::new(), ticks: 0 }
    }

    /// Waits for the next refresh and shows the line (pending forever when quiet), reading who
    /// holds the lock through `client` every other refresh.
    pub async fn tick(&mut self, client: &Client) {
        match &mut self.tick {
            Some(t) => {
                t.tick().await;
                self.ticks += 1;
                if self.ticks % 2 == 1 {
                    if let Ok(Ok(snapshot)) = tokio::time::timeout(READ_LIMIT, client.inspect(&self.name, self.kind)).await {
                        self.seen = describe(&snapshot, &self.label);
                    }
                }
                let waited = self.since.elapsed().as_secs();
                // Through stderr's own thread, as every line of `run`: a terminal that takes
                // nothing (Ctrl-S) must not stop the waiter's heartbeats on this thread.
                stderr::say(Line::Status(Some(format!("waiting for {:?} ({waited}s){}", self.name, self.seen))));
                self.shown = true;
            }
            None => std::future::pending().await,
        }
    }

    /// Erases the line if it was shown.
    pub fn clear(&mut self) {
        if self.shown {
            stderr::say(Line::Status(None));
            self.shown = false;
        }
    }
}

/// What a read of the lock says for the line: `; held by host-a:4312 for 42s; 2 ahead`.
fn describe(snapshot: &Snapshot, own: &str) -> String {
    let holders: Vec<_> = snapshot.holders.iter().map(|h| (h.label.as_deref(), h.held_for)).collect();
    let waiters: Vec<_> = snapshot.waiters.iter().map(|w| w.label.as_deref()).collect();
    line(&holders, &waiters, own)
}

/// The line's part from the holders (label, how long held) and the waiters' labels in queue
/// order, for the process labelled `own`.
fn line(holders: &[(Option<&str>, Option<Duration>)], waiters: &[Option<&str>], own: &str) -> String {
    let mut out = String::new();
    let holders: Vec<String> = holders
        .iter()
        .map(|(label, held)| {
            let who = label.unwrap_or("an unlabelled holder");
            match held {
                Some(d) => format!("{who} for {}s", d.as_secs()),
                None => who.to_string(),
            }
        })
        .collect();
    match holders.len() {
        0 => {}
        1..=2 => out.push_str(&format!("; held by {}", holders.join(", "))),
        n => out.push_str(&format!("; held by {} and {} more", holders[..2].join(", "), n - 2)),
    }
    // The queue is in order: ours is the first entry with this process's label (an entry of
    // ours not there yet means every listed waiter is ahead).
    let ahead = waiters.iter().take_while(|w| **w != Some(own)).count();
    if ahead > 0 {
        out.push_str(&format!("; {ahead} ahead"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_holder_and_counts_who_is_ahead() {
        assert_eq!(line(&[], &[], "me:1"), "");
        let held = [(Some("host-a:4312"), Some(Duration::from_secs(42)))];
        let queue = [Some("b:2"), Some("c:3"), Some("me:1"), Some("d:4")];
        assert_eq!(line(&held, &queue, "me:1"), "; held by host-a:4312 for 42s; 2 ahead");
        assert_eq!(line(&held, &queue[..2], "me:1"), "; held by host-a:4312 for 42s; 2 ahead");
        assert_eq!(line(&held, &[], "me:1"), "; held by host-a:4312 for 42s");
        let readers = [(Some("r:1"), None), (None, None), (Some("r:3"), None)];
        assert_eq!(line(&readers, &[Some("me:1")], "me:1"), "; held by r:1, an unlabelled holder and 1 more");
    }
}
