//! The watchdog: a small process of `lockgate` itself (the hidden `watchdog` subcommand),
//! started before the command, that ends the command's whole process group if `lockgate` dies
//! without finishing (SIGKILL, OOM killer). `PR_SET_PDEATHSIG` (child.rs) only reaches the
//! command's own process; what it started (the grandchildren behind `sh -c`) would otherwise
//! run on after the lease without anyone to stop them.
//!
//! `lockgate` tells it, one line each on its stdin: `group PGID` once the command runs,
//! `until NS GRACE_NS MARGIN_NS` whenever the lease's local validity moves (an instant on
//! `CLOCK_MONOTONIC`, which both processes share, with the grace and margin that validity
//! gives: run.rs `timing`), and `done` when it has dealt with the group itself. When its stdin ends without `done`, the watchdog sends SIGTERM to the group and
//! SIGKILL at `min(now + grace, until - margin)`, as `lockgate` would have.

use std::io::{self, BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// `lockgate`'s end of a watchdog.
pub struct Watchdog {
    process: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts the watchdog (in a process group of its own, so a Ctrl-C on the terminal does
    /// not reach it).
    pub fn start() -> io::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe()?;
        let mut process = Command::new(exe)
            .arg("watchdog")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        let stdin = process.stdin.take();
        Ok(Watchdog { process, stdin })
    }

    fn say(&mut self, line: &str) {
        // A watchdog that is gone cannot be told; lockgate itself still does its job.
        if let Some(stdin) = &mut self.stdin {
            if writeln!(stdin, "{line}").is_err() {
                self.stdin = None;
            }
        }
    }

    /// The command runs in process group `pgid`.
    pub fn watch(&mut self, pgid: i32) {
        self.say(&format!("group {pgid}"));
    }

    /// The lease is valid for `remaining` from now; end the group with this grace and margin.
    pub fn valid_for(&mut self, remaining: Duration, grace: Duration, margin: Duration) {
        let until = monotonic_ns().saturating_add(remaining.as_nanos() as u64);
        self.say(&format!("until {until} {} {}", grace.as_nanos(), margin.as_nanos()));
    }

    /// `lockgate` has dealt with the group: the watchdog leaves it alone and exits.
    pub fn done(mut self) {
        self.say("done");
        self.stdin = None;
        let _ = self.process.wait();
    }
}

/// Now on `CLOCK_MONOTONIC`, in nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The watchdog process's main (`lockgate watchdog`); its exit code.
pub fn serve() -> i32 {
    let (mut group, mut grace, mut margin, mut until) = (None, 0u64, 0u64, u64::MAX);
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["done"] => return 0,
            ["group", pgid] => group = pgid.parse::<i32>().ok().filter(|p| *p > 1),
            ["until", ns, g, m] => {
                until = ns.parse().unwrap_or(until);
                grace = g.parse().unwrap_or(0);
                margin = m.parse().unwrap_or(0);
            }
            _ => {}
        }
    }
    // lockgate is gone without saying `done`.
    let Some(pgid) = group else { return 0 };
    let now = monotonic_ns();
    let kill_at = now.saturating_add(grace).min(until.saturating_sub(margin));
    eprintln!("lockgate watchdog: lockgate died; ending its command's process group {pgid}");
    // SAFETY: kill(2) on the group lockgate started; ESRCH if it is gone already.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let wait = kill_at.saturating_sub(now);
    let step = Duration::from_millis(10);
    let end = std::time::Instant::now() + Duration::from_nanos(wait);
    // SAFETY: signal 0 only checks that the group exists.
    while unsafe { libc::kill(-pgid, 0) } == 0 && std::time::Instant::now() < end {
        std::thread::sleep(step.min(end.saturating_duration_since(std::time::Instant::now())));
    }
    // SAFETY: as above.
    unsafe {
        if libc::kill(-pgid, 0) == 0 {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    0
}
