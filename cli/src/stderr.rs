//! `lockgate run`'s and `lockgate elect`'s own lines to stderr (a loss, `--verbose`'s events
//! and actions, the waiting status line), written in order by a thread of their own. The command is supervised and the
//! lease renewed on one thread (a current-thread runtime, `main.rs`), which only queues them: a
//! stderr that takes nothing for a while (a paused pager, a full pipe, a stopped terminal) then
//! delays the lines, never the renewals nor the signals that end the command on a loss. At most
//! [`AT_MOST`] lines wait; past that they are counted, and the count is written once stderr
//! takes lines again. The core's events are formatted there too, not on the driver.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::engine::Telemetry;
use lockgate_core::native::telemetry::Listener;

/// Lines waiting to be written, past which new ones are counted and dropped.
const AT_MOST: usize = 4096;

/// How long [`flush`] waits for the lines queued before it (the process exits after it).
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// One line to write.
pub enum Line {
    /// lockgate's own words (`lockgate: ` goes before them).
    Text(String),
    /// One of the core's events (`--verbose`), formatted by the writer (after `lockgate: `).
    Event(Telemetry),
    /// The waiting status line (`status.rs`, on a terminal), drawn in place; `None` erases it.
    Status(Option<String>),
}

impl Line {
    /// What is written for it, after a status line drawn before it (`drawn`) was erased if it
    /// is a line of its own; sets `drawn` to whether a status line stands there after it.
    fn text(self, drawn: &mut bool) -> String {
        let erase = if std::mem::take(drawn) { "\r\x1b[K" } else { "" };
        match self {
            Line::Text(text) => format!("{erase}lockgate: {text}\n"),
            Line::Event(t) => format!("{erase}lockgate: {}\n", crate::verbose::line(&t)),
            Line::Status(Some(status)) => {
                *drawn = true;
                format!("\r\x1b[Klockgate: {status}")
            }
            Line::Status(None) => erase.to_string(),
        }
    }
}

struct State {
    lines: VecDeque<Line>,
    dropped: u64,
    writing: bool,
}

/// The queue and its writer.
struct Printer {
    state: Mutex<State>,
    more: Condvar,
    written: Condvar,
}

impl Printer {
    fn new() -> Printer {
        Printer { state: Mutex::new(State { lines: VecDeque::new(), dropped: 0, writing: false }), more: Condvar::new(), written: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self, line: Line) {
        let mut state = self.lock();
        if state.lines.len() >= AT_MOST {
            state.dropped += 1;
            return;
        }
        state.lines.push_back(line);
        self.more.notify_one();
    }

    /// Writes every line queued, in order, for good (the writer thread).
    fn run(&self, out: &mut dyn Write) {
        let mut drawn = false;
        let mut state = self.lock();
        loop {
            while state.lines.is_empty() {
                if state.dropped > 0 {
                    let dropped = std::mem::take(&mut state.dropped);
                    state.lines.push_back(Line::Text(format!("{dropped} lines were not written: stderr took none for a while")));
                    continue;
                }
                self.written.notify_all();
                state = self.more.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            let Some(line) = state.lines.pop_front() else { continue };
            state.writing = true;
            drop(state);
            // Nobody to tell if stderr is closed: the exit code still says what happened.
            let _ = out.write_all(line.text(&mut drawn).as_bytes());
            let _ = out.flush();
            state = self.lock();
            state.writing = false;
        }
    }

    /// Returns once every line queued before it is written, or after `within`.
    fn flush(&self, within: Duration) {
        let end = Instant::now() + within;
        let mut state = self.lock();
        while !state.lines.is_empty() || state.writing {
            let now = Instant::now();
            if now >= end {
                return;
            }
            state = self.written.wait_timeout(state, end - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

static PRINTER: OnceLock<Option<&'static Printer>> = OnceLock::new();

/// The process's writer, its thread started with the first line; `None` if no thread could be
/// started (lines are then written at once).
fn printer() -> Option<&'static Printer> {
    *PRINTER.get_or_init(|| {
        // Leaked on purpose: it lives as long as the process.
        let printer: &'static Printer = Box::leak(Box::new(Printer::new()));
        let spawned = std::thread::Builder::new().name("lockgate-stderr".into()).spawn(move || printer.run(&mut std::io::stderr()));
        spawned.ok().map(|_| printer)
    })
}

/// Queues `line` for stderr.
pub fn say(line: Line) {
    match printer() {
        Some(p) => p.queue(line),
        None => {
            // No thread: no status line is drawn either (`status.rs` needs a terminal, and the
            // thread starts with the first line).
            let mut err = std::io::stderr();
            let _ = err.write_all(line.text(&mut false).as_bytes());
            let _ = err.flush();
        }
    }
}

/// The listener that prints every event of the client (`--verbose`): queued as it is raised,
/// formatted (`verbose.rs`) and written by stderr's thread, in order with lockgate's own lines.
pub fn events() -> Listener {
    Arc::new(|t: &Telemetry| say(Line::Event(t.clone())))
}

/// Waits ([`FLUSH_WAIT`] at most) until what was queued is written: before the process exits,
/// and before a line written directly (an error) so that it comes after them.
pub fn flush() {
    if let Some(Some(p)) = PRINTER.get() {
        p.flush(FLUSH_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A stderr that takes nothing until told to, then keeps what it takes.
    struct Gated {
        open: mpsc::Receiver<()>,
        opened: bool,
        taken: std::sync::Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if !self.opened {
                let _ = self.open.recv();
                self.opened = true;
            }
            self.taken.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_of_its_own_erases_the_status_line_drawn_before_it() {
        let mut drawn = false;
        assert_eq!(Line::Text("x".into()).text(&mut drawn), "lockgate: x\n");
        assert_eq!(Line::Status(None).text(&mut drawn), "", "nothing drawn, nothing to erase");
        assert_eq!(Line::Status(Some("waiting (1s)".into())).text(&mut drawn), "\r\x1b[Klockgate: waiting (1s)");
        assert!(drawn);
        assert_eq!(Line::Text("x".into()).text(&mut drawn), "\r\x1b[Klockgate: x\n");
        assert!(!drawn);
        Line::Status(Some("waiting (2s)".into())).text(&mut drawn);
        assert_eq!(Line::Status(None).text(&mut drawn), "\r\x1b[K");
        assert!(!drawn);
    }

    #[test]
    fn a_stderr_that_takes_nothing_never_holds_the_caller_up_and_loses_no_count() {
        let printer: &'static Printer = Box::leak(Box::new(Printer::new()));
        let (open, gate) = mpsc::channel();
        let taken = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut out = Gated { open: gate, opened: false, taken: taken.clone() };
        std::thread::spawn(move || printer.run(&mut out));
        let started = Instant::now();
        printer.queue(Line::Text("line 0".into()));
        while !printer.lock().writing {
            std::thread::yield_now();
        }
        for i in 1..AT_MOST + 10 {
            printer.queue(Line::Text(format!("line {i}")));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "queueing waited for stderr");
        printer.flush(Duration::from_millis(50));
        assert!(taken.lock().unwrap().is_empty(), "nothing is written while stderr takes nothing");
        open.send(()).unwrap();
        printer.flush(Duration::from_secs(10));
        let text = String::from_utf8(taken.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"lockgate: line 0"));
        // The first line was being written when the queue filled behind it: AT_MOST more fit.
        assert_eq!(lines.len(), AT_MOST + 2, "{:?}", &lines[lines.len() - 3..]);
        assert_eq!(lines[AT_MOST], format!("lockgate: line {AT_MOST}"));
        assert_eq!(lines[AT_MOST + 1], "lockgate: 9 lines were not written: stderr took none for a while");
    }
}
