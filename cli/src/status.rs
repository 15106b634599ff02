//! The status line shown while waiting for a lock on a terminal (refreshed every second, on
//! stderr, erased once the wait ends); nothing at all when stderr is not a terminal, so cron
//! mail and CI logs stay clean.

use std::io::Write;
use std::time::Duration;

use tokio::time::{Instant, Interval};

/// The waiting line of one lock.
pub struct Status {
    name: String,
    since: Instant,
    /// `None` when stderr is not a terminal.
    tick: Option<Interval>,
    shown: bool,
}

impl Status {
    /// A status line for the wait on `name` (quiet unless stderr is a terminal).
    pub fn new(name: &str) -> Status {
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(libc::STDERR_FILENO) } == 1;
        let tick = tty.then(|| {
            let start = Instant::now() + Duration::from_secs(1);
            tokio::time::interval_at(start, Duration::from_secs(1))
        });
        Status { name: name.to_string(), since: Instant::now(), tick, shown: false }
    }

    /// Waits for the next refresh and shows the line (pending forever when quiet).
    pub async fn tick(&mut self) {
        match &mut self.tick {
            Some(t) => {
                t.tick().await;
                let waited = self.since.elapsed().as_secs();
                let mut err = std::io::stderr();
                let _ = write!(err, "\r\x1b[Klockgate: waiting for {:?} ({waited}s)", self.name);
                let _ = err.flush();
                self.shown = true;
            }
            None => std::future::pending().await,
        }
    }

    /// Erases the line if it was shown.
    pub fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}
