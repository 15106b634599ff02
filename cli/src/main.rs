//! `lockgate`: run a command under a distributed lock, from a shell, cron or CI (docs/CLI.md).
//!
//! `lockgate run NAME -- CMD ARGS...` waits in the same FIFO queue as the library's users in
//! any language, runs CMD with the fencing token in its environment while the lease is renewed,
//! and kills CMD's process group before the lease's validity ends if the lock is lost.

mod break_lock;
mod child;
mod duration;
mod exit_code;
mod inspect;
mod list;
mod run;
mod signals;
mod sql_schema;
mod status;
mod stderr;
mod verbose;
#[cfg(unix)]
mod watchdog;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use run::{Kind, Plan};

/// Run a command under a distributed lock: fenced, and killed before anyone else can get the
/// lock. Exit codes: the command's own status (128+N for signal N); 64 bad arguments; 69 cannot
/// connect; 70 internal error; 75 busy or timed out (--busy-exit-code); 77 authentication
/// refused; 79 lock lost (the command was terminated); 126/127 command not executable/found.
#[derive(Parser)]
#[command(name = "lockgate", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run CMD while holding the lock NAME (a mutex by default).
    Run(RunArgs),
    /// Run CMD while this process leads the election NAME (the term is the fencing token).
    Elect(ElectArgs),
    /// Show who holds the lock NAME (label, fencing token, how long, how much longer) and who
    /// waits behind it in queue order; racy by nature, for operators and dashboards.
    Inspect(InspectArgs),
    /// Break the lock NAME: remove its current holder's entry (only the one with --token's
    /// fencing token when given) and wake the next waiter. For a holder known to be dead; safe
    /// only with fencing. Asks on a terminal unless --yes. Exit 0 broken, 1 nothing broken.
    Break(BreakArgs),
    /// List the locks whose names start with PREFIX (every lock if none): kind, holders,
    /// waiters and the holder's label; bounded and paged, never blocking the server.
    List(ListArgs),
    /// The watchdog lockgate starts beside each command (watchdog.rs; Unix: on Windows the
    /// command's job object does its work); not for users.
    #[cfg(unix)]
    #[command(hide = true)]
    Watchdog,
    /// Print the DDL of lockgate's table for a postgres:// or mysql:// URL (connects nowhere).
    SqlSchema {
        /// The database URL (`postgres://...` or `mysql://...`; the password is never printed).
        url: String,
    },
}

/// What `run` and `elect` share: where, how long, and what to run.
#[derive(Args)]
struct Common {
    /// The lock service: redis://, rediss://, redis+cluster://, redlock://, zookeeper://, etcd://,
    /// postgres://, mysql:// (README "URLs"). Its password is never printed.
    #[arg(long, env = "LOCKGATE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// Wait at most this long for the lock (e.g. 30s, 500ms, 2m); default: until granted.
    #[arg(long, value_name = "D", value_parser = duration::parse, conflicts_with = "no_wait")]
    wait: Option<Duration>,
    /// Do not wait: exit busy if the lock is held or others queue for it.
    #[arg(long)]
    no_wait: bool,
    /// The lease, renewed every third of it while the command runs (default: the library's, 30s).
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    lease: Option<Duration>,
    /// Who holds or waits, as stored with this process's entries and shown to operators (at most
    /// 256 bytes, no control characters, never a credential; default: `<hostname>:<pid>`).
    #[arg(long, env = "LOCKGATE_LABEL", value_name = "LABEL")]
    label: Option<String>,
    /// ZooKeeper and etcd: the session timeout (how long the server keeps a silent client's locks).
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    session_timeout: Option<Duration>,
    /// Keep the lock held until this long after it was granted even if the command exits
    /// sooner (kept by the server, also once lockgate is gone), so a job runs at most once per
    /// interval across servers. Not on ZooKeeper or etcd (a usage error there).
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    min_hold: Option<Duration>,
    /// Stop renewing this long after the grant: the command is terminated before then (SIGTERM,
    /// SIGKILL after --grace, as on a loss) and lockgate exits 79.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    max_hold: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when the lock is lost (default: 5s or a quarter of the
    /// lease's validity if shorter; SIGKILL always comes before the validity ends).
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    grace: Option<Duration>,
    /// The exit code when the lock is busy (--no-wait) or the wait timed out (like flock -E).
    #[arg(long, short = 'E', value_name = "CODE", default_value_t = exit_code::BUSY, value_parser = clap::value_parser!(i32).range(1..=255))]
    busy_exit_code: i32,
    /// Log the library's telemetry events (acquire, grant, release, at-risk spells, loss: README
    /// "Telemetry"), renewals and what lockgate does to the command, to stderr.
    #[arg(long, short)]
    verbose: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Args)]
struct RunArgs {
    /// The lock's name (the same name library users lock).
    name: String,
    /// Hold the shared side of the read-write lock NAME.
    #[arg(long, group = "primitive")]
    read: bool,
    /// Hold the exclusive side of the read-write lock NAME.
    #[arg(long, group = "primitive")]
    write: bool,
    /// Hold one permit of the counting semaphore NAME with N permits.
    #[arg(long, group = "primitive", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    semaphore: Option<u32>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct InspectArgs {
    /// The lock's name.
    name: String,
    /// The lock service (as for `run`); its password is never printed.
    #[arg(long, env = "LOCKGATE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// What NAME is: a mutex, a read-write lock, a semaphore or an election (each kind keeps
    /// its own entries).
    #[arg(long, default_value = "mutex", value_parser = ["mutex", "rw", "semaphore", "election"])]
    kind: String,
    /// ZooKeeper and etcd: the session timeout of this short-lived client.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    session_timeout: Option<Duration>,
    /// Print one JSON object (name, kind, locked, holders, waiters, permits, remaining_ms)
    /// instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BreakArgs {
    /// The lock's name.
    name: String,
    /// The lock service (as for `run`); its password is never printed.
    #[arg(long, env = "LOCKGATE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// Break only the holder whose grant has this fencing token (as `inspect` shows it): a
    /// stale token breaks nothing. Not on Redlock or memcached (no fencing tokens).
    #[arg(long, value_name = "T")]
    token: Option<u64>,
    /// What NAME is: a mutex, a read-write lock, a semaphore or an election.
    #[arg(long, default_value = "mutex", value_parser = ["mutex", "rw", "semaphore", "election"])]
    kind: String,
    /// ZooKeeper and etcd: the session timeout of this short-lived client.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    session_timeout: Option<Duration>,
    /// Do not ask for confirmation on a terminal.
    #[arg(long, short)]
    yes: bool,
    /// Print one JSON object (name, kind, broken, label, fencing_token) instead of a sentence.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ListArgs {
    /// Only names starting with this (default: every name).
    #[arg(default_value = "")]
    prefix: String,
    /// The lock service (as for `run`); its password is never printed.
    #[arg(long, env = "LOCKGATE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// Print at most N locks (read in pages of up to 1,000).
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: u64,
    /// Continue where an earlier `list` stopped (the cursor it printed).
    #[arg(long, value_name = "CURSOR")]
    cursor: Option<String>,
    /// ZooKeeper and etcd: the session timeout of this short-lived client.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    session_timeout: Option<Duration>,
    /// Print one JSON object (prefix, entries with name, kind, holders, waiters, label; cursor)
    /// instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ElectArgs {
    /// The election's name.
    name: String,
    /// The value published to observers while leading (default: `lockgate pid <pid>`).
    #[arg(long)]
    value: Option<String>,
    #[command(flatten)]
    common: Common,
}

fn plan(name: String, kind: Kind, c: Common) -> Plan {
    Plan {
        url: c.url,
        name,
        kind,
        lease: c.lease,
        session_timeout: c.session_timeout,
        min_hold: c.min_hold,
        max_hold: c.max_hold,
        label: c.label,
        wait: if c.no_wait { Some(Duration::ZERO) } else { c.wait },
        grace: c.grace,
        busy_exit_code: c.busy_exit_code,
        verbose: c.verbose,
        command: c.command,
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version: printed, exit 0
        Err(e) => {
            // One line: clap's first line (what is wrong) and where to look.
            let rendered = e.render().to_string();
            let what: Vec<&str> = rendered.lines().map(str::trim).take_while(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
            eprintln!("lockgate: {} (see lockgate --help)", what.join(" ").trim_start_matches("error: "));
            std::process::exit(exit_code::USAGE)
        }
    };
    let plan = match cli.command {
        Command::SqlSchema { url } => std::process::exit(sql_schema::run(&url)),
        #[cfg(unix)]
        Command::Watchdog => std::process::exit(watchdog::serve()),
        Command::Inspect(a) => {
            let kind = match lockgate_core::inspect::Kind::parse(&a.kind) {
                Ok(k) => k,
                Err(e) => std::process::exit(run::fail(exit_code::USAGE, &e.to_string())),
            };
            let ask = inspect::Ask { url: a.url, name: a.name, kind, session_timeout: a.session_timeout, json: a.json };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            std::process::exit(rt.block_on(inspect::run(ask)))
        }
        Command::Break(a) => {
            let kind = match lockgate_core::inspect::Kind::parse(&a.kind) {
                Ok(k) => k,
                Err(e) => std::process::exit(run::fail(exit_code::USAGE, &e.to_string())),
            };
            let ask = break_lock::Ask {
                url: a.url,
                name: a.name,
                kind,
                token: a.token,
                session_timeout: a.session_timeout,
                yes: a.yes,
                json: a.json,
            };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            std::process::exit(rt.block_on(break_lock::run(ask)))
        }
        Command::List(a) => {
            let ask = list::Ask { url: a.url, prefix: a.prefix, limit: a.limit, cursor: a.cursor, session_timeout: a.session_timeout, json: a.json };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            std::process::exit(rt.block_on(list::run(ask)))
        }
        Command::Run(a) => {
            let kind = match (a.read, a.write, a.semaphore) {
                (true, _, _) => Kind::Read,
                (_, true, _) => Kind::Write,
                (_, _, Some(n)) => Kind::Semaphore(n),
                _ => Kind::Mutex,
            };
            plan(a.name, kind, a.common)
        }
        Command::Elect(a) => {
            let value = a.value.unwrap_or_else(|| format!("lockgate pid {}", std::process::id()));
            plan(a.name, Kind::Leader(value), a.common)
        }
    };
    // One thread: the command is forked from it, and PR_SET_PDEATHSIG fires when the thread
    // that forked ends (child/unix.rs).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(run::run(plan));
    stderr::flush();
    std::process::exit(code)
}
