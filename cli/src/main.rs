//! `lockgate-cli`: the core benchmarks (`bench`) of lockgate and the worker processes they
//! spawn. `./run bench` starts a Redis and calls it.

mod bench;
mod bench_etcd;
mod bench_redlock;
mod bench_sql;
mod bench_timers;
mod sql_schema;
mod stats;
mod worker;

use std::collections::HashMap;

fn usage() -> ! {
    eprintln!(
        "usage:\n  lockgate-cli bench --url URL [--out FILE] [--seconds S] [--redlock-urls URL,URL,URL,URL,URL]\n  lockgate-cli bench-timers   (timer cost at 10,000 held leases; no server)\n  lockgate-cli sql-schema URL   (prints the DDL of lockgate's table for a postgres:// or mysql:// URL; connects nowhere)\n  lockgate-cli bench-etcd --go BIN [--out FILE] [--seconds S] [--pairs P] [--rounds R]   (vs etcd's concurrency.Mutex; scripts/bench_etcd.sh)\n  lockgate-cli bench-sql --node NODE --python PYTHON --peers DIR [--out FILE] [--seconds S] [--pairs P] [--rounds R] [--runs N] [--libs lockgate,naive,peer] [--pg-url URL] [--mysql-url URL]   (PostgreSQL and MariaDB: vs the naive table lock and the peers; scripts/bench_sql.sh)\n  (internal) lockgate-cli worker --url URL --name NAME --mode bench ..."
    );
    std::process::exit(2)
}

/// `--key value` pairs after the subcommand.
pub(crate) struct Args(HashMap<String, String>);

impl Args {
    fn parse(rest: &[String]) -> Args {
        let mut map = HashMap::new();
        let mut it = rest.iter();
        while let Some(k) = it.next() {
            let Some(k) = k.strip_prefix("--") else { usage() };
            let Some(v) = it.next() else { usage() };
            map.insert(k.to_string(), v.clone());
        }
        Args(map)
    }

    pub(crate) fn str(&self, k: &str) -> String {
        self.0.get(k).cloned().unwrap_or_else(|| {
            eprintln!("missing --{k}");
            usage()
        })
    }

    pub(crate) fn num(&self, k: &str, default: u64) -> u64 {
        match self.0.get(k) {
            Some(v) => v.parse().unwrap_or_else(|_| {
                eprintln!("--{k} must be a whole number");
                usage()
            }),
            None => default,
        }
    }

    pub(crate) fn opt(&self, k: &str) -> Option<String> {
        self.0.get(k).cloned()
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let Some(cmd) = argv.get(1) else { usage() };
    if cmd == "sql-schema" {
        std::process::exit(sql_schema::run(&argv[2..]));
    }
    let args = Args::parse(&argv[2..]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = match cmd.as_str() {
        "bench" => rt.block_on(bench::run(&args)),
        "worker" => rt.block_on(worker::run(&args)),
        "bench-etcd" => rt.block_on(bench_etcd::run(&args)),
        "bench-sql" => rt.block_on(bench_sql::run(&args)),
        "bench-timers" => {
            print!("{}", bench_timers::run("cargo run --release -p lockgate-cli -- bench-timers"));
            0
        }
        _ => usage(),
    };
    std::process::exit(code)
}
