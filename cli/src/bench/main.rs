//! `lockgate-bench`: the developer benchmarks of lockgate (`./run bench`, `scripts/bench_etcd.sh`,
//! `scripts/bench_sql.sh`, `scripts/bench-compare.sh`) and the worker processes they spawn. Not
//! shipped to users: the user's command is `lockgate` (`cli/src/main.rs`, docs/CLI.md).

mod bench;
mod bench_etcd;
mod bench_label;
mod bench_listing;
mod bench_redlock;
mod bench_sql;
#[cfg(feature = "bench-telemetry")]
mod bench_telemetry;
mod bench_timers;
mod stats;
mod worker;

use clap::{Parser, Subcommand};

/// The benchmarks of lockgate (see BENCHMARKS.md for what each measures).
#[derive(Parser)]
#[command(name = "lockgate-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The core benchmarks on one Redis (uncontended pairs, contended 4 / 16, fairness, Redlock, timers).
    Bench(bench::BenchArgs),
    /// Timer cost at 10,000 held leases (no server).
    BenchTimers,
    /// etcd: lockgate against etcd's concurrency.Mutex (scripts/bench_etcd.sh).
    BenchEtcd(bench_etcd::BenchEtcdArgs),
    /// PostgreSQL and MariaDB: lockgate against the naive table lock and the peers (scripts/bench_sql.sh).
    BenchSql(bench_sql::BenchSqlArgs),
    /// Issue 25: inspect of a lock with 1,000 waiters and list over 10,000 locks (scripts/bench_listing.sh).
    BenchListing(bench_listing::BenchListingArgs),
    /// Issue 25: the contended rows with the default holder label and with none, interleaved.
    BenchLabel(bench_label::BenchLabelArgs),
    /// Telemetry off vs fully on, uncontended pairs (also part of `bench` when built with it).
    #[cfg(feature = "bench-telemetry")]
    BenchTelemetry {
        /// A Redis server to measure on (`redis://127.0.0.1:PORT`).
        #[arg(long)]
        url: String,
        /// Uncontended acquire/release pairs per round.
        #[arg(long, default_value_t = 5000)]
        pairs: u64,
    },
    /// One contending process of a benchmark (spawned by the benchmarks themselves).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = match cli.command {
        Command::Bench(args) => rt.block_on(bench::run(&args)),
        Command::Worker(args) => rt.block_on(worker::run(&args)),
        Command::BenchEtcd(args) => rt.block_on(bench_etcd::run(&args)),
        Command::BenchSql(args) => rt.block_on(bench_sql::run(&args)),
        Command::BenchListing(args) => rt.block_on(bench_listing::run(&args)),
        Command::BenchLabel(args) => rt.block_on(bench_label::run(&args)),
        #[cfg(feature = "bench-telemetry")]
        Command::BenchTelemetry { url, pairs } => match rt.block_on(bench_telemetry::run(&url, pairs)) {
            Ok(md) => {
                print!("{md}");
                0
            }
            Err(e) => {
                eprintln!("bench-telemetry: {e}");
                1
            }
        },
        Command::BenchTimers => {
            print!("{}", bench_timers::run("cargo run --release -p lockgate-cli --bin lockgate-bench -- bench-timers"));
            0
        }
    };
    std::process::exit(code)
}
