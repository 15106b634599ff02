//! `lockgate run` and `lockgate elect`: wait for the lock in the same FIFO queue as library
//! users, run the command while it is held, and make sure the command is dead before the
//! lease's local validity ends if the lock is lost or can no longer be confirmed.
//!
//! The kill timing (docs/CLI.md "What is guaranteed"): the core counts a lease valid until a
//! local instant (from the send time of the request that confirmed it) and moves it on each
//! confirmed renewal. `lockgate` reads that instant and, if it comes within `grace + margin`
//! (renewals stopped landing) or the lease is lost, sends SIGTERM to the command's process
//! group, then SIGKILL at `min(SIGTERM + grace, valid-until - margin)`: the group is dead
//! before anyone else can be granted the lock, unless the kernel cannot run it (fencing covers
//! that).

use std::time::Duration;

use lockgate_core::connect::Spelling;
use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::Error;
use tokio::time::Instant;

use crate::child::{Job, JobEnv, Watchdog};
use crate::exit_code;
use crate::signals::{self, Signals};
use crate::status::Status;
use crate::stderr::{self, Line};

/// The default `--grace`.
const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// The time left between SIGKILL and the end of the lease's validity for the kernel to tear
/// the group down (a tenth of the validity when that is shorter).
const KILL_MARGIN: Duration = Duration::from_millis(200);

/// When to act on a lease whose longest validity seen so far is `valid`: the grace actually
/// used (the one asked, at most a quarter of the validity, so renewals that land never let the
/// lease come that close to its end) and the margin left for the kernel after SIGKILL.
fn timing(grace: Duration, valid: Duration) -> (Duration, Duration) {
    (grace.min(valid / 4), KILL_MARGIN.min(valid / 10))
}

/// Which primitive the command runs under.
#[derive(Clone, Debug)]
pub enum Kind {
    /// An exclusive lock (the default).
    Mutex,
    /// The shared side of a read-write lock.
    Read,
    /// The exclusive side of a read-write lock.
    Write,
    /// One permit of a counting semaphore of this many permits.
    Semaphore(u32),
    /// Leadership of an election, publishing this value to observers.
    Leader(String),
}

/// Everything `run` / `elect` were given.
pub struct Plan {
    /// The lock service's URL (never printed: the core redacts it).
    pub url: String,
    /// The lock's name.
    pub name: String,
    /// What to hold.
    pub kind: Kind,
    /// The lease (`None`: the core's default).
    pub lease: Option<Duration>,
    /// ZooKeeper/etcd: the session timeout.
    pub session_timeout: Option<Duration>,
    /// The shortest hold (`--min-hold`), kept by the server after the command exits.
    pub min_hold: Option<Duration>,
    /// The longest hold (`--max-hold`): no renewal past it; the command is ended before it.
    pub max_hold: Option<Duration>,
    /// The label stored with this process's entries (`None`: `<hostname>:<pid>`).
    pub label: Option<String>,
    /// `None` waits until granted; `Some(ZERO)` is `--no-wait`.
    pub wait: Option<Duration>,
    /// SIGTERM to SIGKILL (`None`: the default).
    pub grace: Option<Duration>,
    /// The exit code when busy or timed out.
    pub busy_exit_code: i32,
    /// Log grants, renewals, at-risk spells and losses to stderr.
    pub verbose: bool,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// Runs the plan; the process's exit code.
pub async fn run(plan: Plan) -> i32 {
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => return fail(exit_code::INTERNAL, &format!("cannot handle signals: {e}")),
    };
    let mut options = ClientOptions::new(plan.url.clone());
    options.session_timeout = plan.session_timeout;
    options.label = plan.label.clone();
    // --verbose prints the core's events; the one lock's name in them is no cardinality risk.
    options.telemetry_lock_names = plan.verbose;
    // The lock's options and the label checked before connecting: bad input starts nothing.
    let checked = options
        .lock_options(plan.lease, Some(true), None, None, &Spelling::CLI)
        .and_then(|lock| options.lock_holds(lock, plan.min_hold, plan.max_hold, &Spelling::CLI));
    if let Err(e) = checked {
        return fail(exit_code::USAGE, &e.to_string());
    }
    if let Some(label) = &plan.label {
        if let Err(e) = lockgate_core::label::check_label(label, "--label") {
            return fail(exit_code::USAGE, &e.to_string());
        }
    }
    let label = options.label();
    let client = tokio::select! {
        c = options.connect() => match c {
            Ok(c) if plan.verbose => match c.on_telemetry(stderr::events()) {
                Ok(()) => c,
                Err(e) => return fail(exit_code::INTERNAL, &e.to_string()),
            },
            Ok(c) => c,
            Err(e) => return fail(exit_code::of(&e, plan.busy_exit_code), &e.to_string()),
        },
        sig = signals.next() => return 128 + sig,
    };
    let code = hold_and_run(&plan, &label, &client, &mut signals).await;
    client.close().await;
    code
}

async fn hold_and_run(plan: &Plan, label: &str, client: &Client, signals: &mut Signals) -> i32 {
    let lease = match acquire(plan, label, client, signals).await {
        Ok(lease) => lease,
        Err(code) => return code,
    };
    let log = |msg: &str| {
        if plan.verbose {
            stderr::say(Line::Text(msg.to_string()));
        }
    };
    let Some(valid) = lease.remaining() else {
        return fail(exit_code::LOST, &format!("the lock {:?} was lost at once after it was granted", plan.name));
    };
    let grace = plan.grace.unwrap_or(DEFAULT_GRACE);
    // The grant itself is the core's `acquire.granted` event (verbose.rs); its token is not in
    // events (tokens stay out of telemetry), so it is logged here.
    log(&format!(
        "holding {:?}: fencing token {}, valid for {}",
        plan.name,
        lease.fencing_token().map_or("none".to_string(), |t| t.to_string()),
        secs(valid)
    ));
    // Started before the command, so no moment of the command's life goes unwatched.
    let mut watchdog = match Watchdog::start() {
        Ok(w) => w,
        Err(e) => {
            let _ = lease.release().await;
            return fail(exit_code::INTERNAL, &format!("cannot start the watchdog: {e}"));
        }
    };
    let env = JobEnv { name: &plan.name, fencing_token: lease.fencing_token(), label };
    let mut job = match Job::start(&plan.command, &env) {
        Ok(job) => job,
        Err((code, msg)) => {
            watchdog.done();
            let _ = lease.release().await;
            return fail(code, &msg);
        }
    };
    watchdog.watch(job.pgid());
    let outcome = supervise(plan, &lease, &mut job, &mut watchdog, signals, grace).await;
    let status = match outcome.status {
        Ok(s) => s,
        Err(e) => {
            job.signal_group(signals::KILL);
            let _ = lease.release().await;
            return fail(exit_code::INTERNAL, &format!("cannot wait for the command: {e}"));
        }
    };
    let mut lost = outcome.lost;
    // The command is done; anything it left running in its group would run unlocked.
    if job.group_alive() {
        if lost.is_some() {
            job.signal_group(signals::KILL);
        } else {
            log("the command left processes in its group: terminating them before the release");
            end_group(&job, grace).await;
        }
    }
    watchdog.done();
    if lost.is_some() {
        // Nothing to wait for: the lease ends by itself at its validity, and a release through
        // a silent server would only delay the exit. Sent in the background until then.
        let until = outcome.until;
        let _ = tokio::time::timeout_at(until, lease.release()).await;
    } else {
        match lease.release().await {
            Ok(true) => {} // the core's `lease.released` event
            Ok(false) => lost = Some("it was no longer held when released".to_string()),
            Err(e) => stderr::say(Line::Text(format!("the release of {:?} was not confirmed ({e}); the lease runs out by itself", plan.name))),
        }
    }
    match lost {
        Some(reason) => fail(exit_code::LOST, &format!("lost the lock {:?} while the command ran: {reason}", plan.name)),
        None => exit_code::of_status(status),
    }
}

/// Waits for the grant as the plan says, showing a status line on a terminal; the exit code
/// if none came.
async fn acquire(plan: &Plan, label: &str, client: &Client, signals: &mut Signals) -> Result<Lease, i32> {
    let options = client
        .lock_options(plan.lease, Some(true), None, None, &Spelling::CLI)
        .and_then(|lock| client.lock_holds(lock, plan.min_hold, plan.max_hold, &Spelling::CLI))
        .map_err(|e| fail(exit_code::USAGE, &e.to_string()))?;
    let no_wait = plan.wait == Some(Duration::ZERO);
    let wait = plan.wait;
    let failed = |e: Error| fail(exit_code::of(&e, plan.busy_exit_code), &e.to_string());
    let granted = async {
        let taken = match &plan.kind {
            Kind::Leader(value) => {
                let election = client.election(&plan.name, options).map_err(failed)?;
                if no_wait {
                    election.try_campaign(value).await
                } else {
                    election.campaign(value, wait).await.map(Some)
                }
            }
            kind => {
                let lock = match kind {
                    Kind::Read => client.read_write_lock(&plan.name, options).map(|rw| rw.read().clone()),
                    Kind::Write => client.read_write_lock(&plan.name, options).map(|rw| rw.write().clone()),
                    Kind::Semaphore(n) => client.semaphore(&plan.name, *n, options),
                    _ => client.lock(&plan.name, options),
                }
                .map_err(failed)?;
                if no_wait {
                    lock.try_acquire().await
                } else {
                    lock.acquire_unless(wait, std::future::pending()).await.map(Some)
                }
            }
        };
        match taken {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => Err(fail(plan.busy_exit_code, &format!("{:?} is busy", plan.name))),
            Err(e) => Err(failed(e)),
        }
    };
    let inspect_kind = match plan.kind {
        Kind::Mutex => lockgate_core::inspect::Kind::Mutex,
        Kind::Read | Kind::Write => lockgate_core::inspect::Kind::ReadWrite,
        Kind::Semaphore(_) => lockgate_core::inspect::Kind::Semaphore,
        Kind::Leader(_) => lockgate_core::inspect::Kind::Election,
    };
    let mut status = Status::new(&plan.name, inspect_kind, label);
    tokio::pin!(granted);
    let result = loop {
        tokio::select! {
            r = &mut granted => break r,
            // Dropping the wait cancels it: the core removes the queue entry in the background.
            sig = signals.next() => break Err(128 + sig),
            _ = status.tick(client) => {}
        }
    };
    status.clear();
    result
}

/// How the supervised command ended.
struct Outcome {
    status: std::io::Result<std::process::ExitStatus>,
    /// Why the lock was lost (or became unconfirmable) while it ran, if it was.
    lost: Option<String>,
    /// The end of the lease's local validity as last seen.
    until: Instant,
}

/// Where the command is on its way out.
enum Phase {
    /// Running under a confirmed lease.
    Running,
    /// SIGTERM sent; SIGKILL at this instant.
    Terminating(Instant),
    /// SIGKILL sent.
    Killed,
}

async fn supervise(
    plan: &Plan,
    lease: &Lease,
    job: &mut Job,
    watchdog: &mut Watchdog,
    signals: &mut Signals,
    asked_grace: Duration,
) -> Outcome {
    let log = |msg: &str| {
        if plan.verbose {
            stderr::say(Line::Text(msg.to_string()));
        }
    };
    let lost_signal = lease.lost_signal();
    tokio::pin!(lost_signal);
    let mut spells = lease.at_risk_spells();
    let (mut lost_open, mut spells_open) = (true, true);
    let mut lost: Option<String> = None;
    // Whether a spell at risk is on: a validity running out without one is --max-hold's end.
    let mut risky = false;
    let mut phase = Phase::Running;
    let mut valid = lease.remaining().unwrap_or_default();
    let mut until = Instant::now() + valid;
    let (grace, margin) = timing(asked_grace, valid);
    watchdog.valid_for(valid, grace, margin);
    loop {
        let now = Instant::now();
        match lease.remaining() {
            Some(r) => {
                let fresh = now + r;
                if fresh > until + Duration::from_millis(1) {
                    risky = false;
                    log(&format!("renewed, valid for {}", secs(r)));
                }
                if fresh.max(until) - fresh.min(until) > Duration::from_millis(1) {
                    valid = valid.max(r);
                    let (grace, margin) = timing(asked_grace, valid);
                    watchdog.valid_for(r, grace, margin);
                }
                until = fresh;
            }
            None if lost.is_none() => lost = Some(lease.lost_reason().map_or("its validity ran out".to_string(), |e| e.to_string())),
            None => {}
        }
        let (grace, margin) = timing(asked_grace, valid);
        let deadline = until.checked_sub(grace + margin).unwrap_or(now);
        if matches!(phase, Phase::Running) && (lost.is_some() || now >= deadline) {
            let why = lost.clone().unwrap_or_else(|| match plan.max_hold {
                Some(max) if !risky => format!("it reaches --max-hold ({}) in {}", secs(max), secs(until.saturating_duration_since(now))),
                _ => format!("it could not be confirmed and is valid for only {}", secs(until.saturating_duration_since(now))),
            });
            lost.get_or_insert_with(|| why.clone());
            let kill_at = (now + grace).min(until.checked_sub(margin).unwrap_or(now)).max(now);
            stderr::say(Line::Text(format!(
                "the lock {:?} is lost ({why}): {} to the command, {} in {}",
                plan.name,
                signals::TERM_NAME,
                signals::KILL_NAME,
                secs(kill_at - now)
            )));
            job.signal_group(signals::TERM);
            phase = Phase::Terminating(kill_at);
        }
        let wake = match phase {
            Phase::Running if plan.verbose => deadline.min(now + Duration::from_millis(250)),
            Phase::Running => deadline,
            Phase::Terminating(at) => at,
            Phase::Killed => now + Duration::from_secs(3600),
        };
        tokio::select! {
            status = job.process.wait() => return Outcome { status, lost, until },
            reason = &mut lost_signal, if lost_open => {
                lost_open = false;
                // Logged by the core's `lease.lost` event (verbose.rs).
                if let Some(e) = reason {
                    lost.get_or_insert_with(|| e.to_string());
                }
            }
            // A spell's start and end are the core's `lease.at_risk` / `lease.safe` events;
            // here only how long the lease stays valid.
            at_risk = spells.next(), if spells_open => {
                if at_risk {
                    risky = true;
                    log(&format!("valid for {} unless confirmed", secs(lease.remaining().unwrap_or_default())));
                } else {
                    spells_open = false;
                }
            }
            sig = signals.next() => {
                log(&format!("forwarding signal {sig} to the command"));
                job.signal_group(sig);
            }
            _ = tokio::time::sleep_until(wake) => {
                if let Phase::Terminating(at) = phase {
                    if Instant::now() >= at {
                        log(&format!("{} to the command", signals::KILL_NAME));
                        job.signal_group(signals::KILL);
                        phase = Phase::Killed;
                    }
                }
            }
        }
    }
}

/// Terminates what is left of the command's group after it exited: SIGTERM, then SIGKILL
/// after `grace` if anything is still there.
async fn end_group(job: &Job, grace: Duration) {
    job.signal_group(signals::TERM);
    let end = Instant::now() + grace;
    while job.group_alive() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.signal_group(signals::KILL);
}

/// Prints `lockgate: msg` (one line, after the lines queued for stderr) and returns `code`.
pub fn fail(code: i32, msg: &str) -> i32 {
    stderr::flush();
    eprintln!("lockgate: {msg}");
    code
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}
