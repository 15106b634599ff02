//! Issue 17's benchmark: on PostgreSQL and MariaDB (one server each from the project's launcher,
//! `test-servers postgres` / `mariadb`, or the URLs given), in one run on the same servers:
//! lockgate's native SQL mutex, the naive insert-and-retry table lock (seed 004, written here
//! with the SQL crates the core uses: tokio-postgres and sqlx's MySQL driver) as the floor, and
//! the most used peer library of each database driven from its own language (bench/sql-peers:
//! npm `advisory-lock` on PostgreSQL, PyPI `PyMySQLLock` on MariaDB). For each: uncontended
//! acquire+release pairs per second, contended acquisitions per second with 4 and 16 worker
//! processes holding ~1 ms (handoff p50/p99, Jain index), and what the server executed per
//! acquisition (its own counters: PostgreSQL's transactions, MariaDB's statements).
//!
//! `--worker naive` runs one contending process of the naive table lock (the bench spawns it),
//! printing what `lockgate-bench worker --mode bench` prints.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use sqlx::Connection as _;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::stats::{jain, percentile, wall_ns};

/// `bench-sql`'s arguments.
#[derive(clap::Args)]
pub struct BenchSqlArgs {
    /// The node binary (the PostgreSQL peer and lockgate's Node binding).
    #[arg(long)]
    node: String,
    /// The Python of the peers' venv (PyMySQLLock).
    #[arg(long)]
    python: String,
    /// The Python that imports lockgate's binding.
    #[arg(long, default_value = "python3")]
    binding_python: String,
    /// The peers' folder (bench/sql-peers).
    #[arg(long)]
    peers: String,
    /// Also write the Markdown to this file.
    #[arg(long)]
    out: Option<String>,
    /// Seconds of each contended run.
    #[arg(long, default_value_t = 2)]
    seconds: u64,
    /// Uncontended acquire/release pairs.
    #[arg(long, default_value_t = 300)]
    pairs: u64,
    /// Rounds of each measurement.
    #[arg(long, default_value_t = 3)]
    rounds: u64,
    /// Runs of each contended row.
    #[arg(long, default_value_t = 2)]
    runs: u64,
    /// Only these libraries (comma-separated: lockgate, naive, peer, binding).
    #[arg(long)]
    libs: Option<String>,
    /// A PostgreSQL to use instead of starting one.
    #[arg(long)]
    pg_url: Option<String>,
    /// A MariaDB/MySQL to use instead of starting one.
    #[arg(long)]
    mysql_url: Option<String>,
    /// The test-server launcher (default: test-servers beside this binary).
    #[arg(long)]
    launcher: Option<String>,
    /// The command line shown in the report.
    #[arg(long)]
    command: Option<String>,
}

const HOLD_US: u64 = 1000;
const WORKERS: [u64; 2] = [4, 16];
/// The naive lock's retry sleep after finding the row taken (seed 004 says "a short sleep").
const NAIVE_RETRY: Duration = Duration::from_millis(1);
/// The naive lock's table: one row per held lock, its primary key the lock's name.
const NAIVE_TABLE_PG: &str = "CREATE TABLE IF NOT EXISTS lockgate_bench_naive (resource VARCHAR(255) PRIMARY KEY, owner VARCHAR(64) NOT NULL)";
const NAIVE_TABLE_MY: &str = "CREATE TABLE IF NOT EXISTS lockgate_bench_naive (resource VARCHAR(255) PRIMARY KEY, owner VARCHAR(64) NOT NULL) ENGINE=InnoDB";

/// The two SQL dialects the bench measures.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Db {
    Postgres,
    MySql,
}

impl Db {
    fn title(self) -> &'static str {
        match self {
            Db::Postgres => "PostgreSQL",
            Db::MySql => "MariaDB",
        }
    }
}

/// The libraries measured on each database.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Lib {
    /// lockgate's native Rust client (`lockgate_core::native`).
    Lockgate,
    /// Seed 004's table lock: INSERT the lock's row, retry after a short sleep while it exists,
    /// DELETE it to release.
    Naive,
    /// The database's most used peer library, in its own language (bench/sql-peers).
    Peer,
    /// lockgate through the binding of the peer's language (Node on PostgreSQL, Python on
    /// MariaDB), so the peer is also compared in its own language.
    Binding,
}

const LIBS: [Lib; 4] = [Lib::Lockgate, Lib::Naive, Lib::Peer, Lib::Binding];

/// The libraries `--libs a,b` names (all by default), in LIBS' order (lockgate first).
fn chosen_libs(args: &BenchSqlArgs) -> Result<Vec<Lib>, String> {
    let Some(list) = &args.libs else { return Ok(LIBS.to_vec()) };
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(bad) = names.iter().find(|n| !LIBS.iter().any(|l| l.slug() == **n)) {
        return Err(format!("--libs: no library {bad:?} (lockgate, naive, peer, binding)"));
    }
    Ok(LIBS.into_iter().filter(|l| names.contains(&l.slug())).collect())
}

impl Lib {
    fn name(self, db: Db) -> &'static str {
        match (self, db) {
            (Lib::Lockgate, _) => "lockgate (native Rust)",
            (Lib::Naive, _) => "naive table lock (Rust, seed 004)",
            (Lib::Peer, Db::Postgres) => "npm `advisory-lock` 2.0.0 (Node)",
            (Lib::Peer, Db::MySql) => "PyPI `PyMySQLLock` 0.2.0 (Python)",
            (Lib::Binding, Db::Postgres) => "lockgate (Node binding)",
            (Lib::Binding, Db::MySql) => "lockgate (Python binding)",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Lib::Lockgate => "lockgate",
            Lib::Naive => "naive",
            Lib::Peer => "peer",
            Lib::Binding => "binding",
        }
    }
}

/// Where the peers' harnesses and their interpreters are.
struct Peers {
    node: String,
    python: String,
    /// The Python that has lockgate's binding installed (bindings-python/ci.sh build).
    binding_python: String,
    dir: PathBuf,
}

impl Peers {
    /// The harness command of `lib` (the peer or the binding) on `db`, before its mode's own
    /// arguments.
    fn command(&self, lib: Lib, db: Db, mode: &str) -> Command {
        let (program, script) = match (lib, db) {
            (Lib::Binding, Db::Postgres) => (&self.node, "lockgate_node.js"),
            (Lib::Binding, Db::MySql) => (&self.binding_python, "lockgate_python.py"),
            (_, Db::Postgres) => (&self.node, "pg_advisory_lock.js"),
            (_, Db::MySql) => (&self.python, "mysql_pymysqllock.py"),
        };
        let mut c = Command::new(program);
        c.arg(self.dir.join(script)).arg(mode);
        c
    }
}

/// The server's own count of what its clients had it execute.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Counter {
    /// PostgreSQL's `pg_stat_statements` (loaded by the launcher's `shared_preload_libraries`):
    /// the sum of `calls`, every statement a client sent (utility ones too: LISTEN, NOTIFY,
    /// BEGIN), counted when it completes.
    PgStatements,
    /// PostgreSQL without it (a `--pg-url` server): `pg_stat_database`'s committed + rolled-back
    /// transactions; a statement outside BEGIN is one, a batch in one transaction counts once.
    PgTransactions,
    /// MariaDB's `Questions`: every statement a client sent.
    Questions,
}

impl Counter {
    /// What it counts, for the tables' columns.
    fn counted(self) -> &'static str {
        match self {
            Counter::PgStatements | Counter::Questions => "statements",
            Counter::PgTransactions => "transactions",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Counter::PgStatements => "`pg_stat_statements` (the sum of `calls`; loaded with the launcher's `-- shared_preload_libraries=pg_stat_statements`)",
            Counter::PgTransactions => "`pg_stat_database` (`xact_commit + xact_rollback`: a batch sent as one transaction counts once)",
            Counter::Questions => "`Questions` (global status)",
        }
    }
}

/// One database server: from the launcher (stopped with it on drop), or a URL given.
struct Server {
    db: Db,
    launcher: Option<Child>,
    /// lockgate's URL of it (postgres:// or mysql:// as the launcher prints it).
    url: String,
    /// The administrator's URL (the counters; `pg_stat_statements`' extension), else `url`.
    admin_url: String,
    counter: Counter,
    /// What one reading of the counter adds to it (its own statement, a connection's set-up),
    /// measured once by two readings in a row.
    overhead: std::cell::Cell<f64>,
}

impl Server {
    async fn start(db: Db, launcher: &PathBuf, given: Option<String>) -> Result<Server, String> {
        let (launcher, url, admin_url) = match given {
            Some(url) => (None, url.clone(), url),
            None => {
                let mut cmd = Command::new(launcher);
                match db {
                    Db::Postgres => cmd.args(["postgres", "--", "shared_preload_libraries=pg_stat_statements"]),
                    Db::MySql => cmd.arg("mariadb"),
                };
                let mut child = cmd
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("{}: {e}", launcher.display()))?;
                let mut line = String::new();
                BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).await.map_err(|e| e.to_string())?;
                let (Some(url), Some(admin_url)) = (json_str(&line, "url"), json_str(&line, "admin_url")) else {
                    return Err(format!("test-servers {db:?} said {line:?}"));
                };
                (Some(child), url, admin_url)
            }
        };
        let mut server = Server { db, launcher, url, admin_url, counter: Counter::Questions, overhead: Default::default() };
        if db == Db::Postgres {
            server.counter = Counter::PgTransactions;
            let (client, conn) = tokio_postgres::connect(&server.admin_url, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            if client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT sum(calls) FROM pg_stat_statements").await.is_ok() {
                server.counter = Counter::PgStatements;
            }
        }
        Ok(server)
    }

    /// The URL for sqlx and the Python peer, which know `mysql://` only.
    fn mysql_url(&self) -> String {
        match self.url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => self.url.clone(),
        }
    }

    /// The URL each library is given (the same server, user and database for all).
    fn url_for(&self, lib: Lib) -> String {
        match (lib, self.db) {
            (Lib::Lockgate | Lib::Binding, _) => self.url.clone(),
            (_, Db::MySql) => self.mysql_url(),
            (_, Db::Postgres) => self.url.clone(),
        }
    }

    /// What the server has executed so far (its [`Counter`]), read on a connection of its own.
    async fn executed(&self) -> Result<f64, String> {
        match self.db {
            Db::Postgres => {
                let (client, conn) = tokio_postgres::connect(&self.admin_url, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
                let task = tokio::spawn(conn);
                let sql = match self.counter {
                    Counter::PgStatements => "SELECT sum(calls)::bigint FROM pg_stat_statements",
                    _ => "SELECT sum(xact_commit + xact_rollback)::bigint FROM pg_stat_database",
                };
                let row = client.query_one(sql, &[]).await.map_err(|e| e.to_string())?;
                drop(client);
                let _ = task.await;
                Ok(row.get::<_, Option<i64>>(0).unwrap_or(0) as f64)
            }
            Db::MySql => {
                let admin = match self.admin_url.strip_prefix("mariadb://") {
                    Some(rest) => format!("mysql://{rest}"),
                    None => self.admin_url.clone(),
                };
                let mut c = sqlx::MySqlConnection::connect(&admin).await.map_err(|e| e.to_string())?;
                let v: String = sqlx::query_scalar("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'")
                    .fetch_one(&mut c)
                    .await
                    .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                v.trim().parse().map_err(|_| format!("Questions = {v:?}"))
            }
        }
    }

    /// Waits until closed connections' counts are in: `pg_stat_database`'s when their backends
    /// exited (each flushes then, or at most once a second); the others count at once.
    async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(if self.counter == Counter::PgTransactions { 600 } else { 100 })).await;
    }

    /// Measures what one reading adds to the counter.
    async fn calibrate(&self) -> Result<(), String> {
        self.settle().await;
        let a = self.executed().await?;
        self.settle().await;
        let b = self.executed().await?;
        self.overhead.set((b - a).max(0.0));
        Ok(())
    }

    /// What the server executed since the reading `before`, this reading's own share taken off.
    async fn executed_since(&self, before: f64) -> Result<f64, String> {
        self.settle().await;
        Ok(self.executed().await? - before - self.overhead.get())
    }

    async fn stop(mut self) {
        if let Some(mut launcher) = self.launcher.take() {
            // Closing its stdin stops the launcher and the server it started.
            drop(launcher.stdin.take());
            let _ = tokio::time::timeout(Duration::from_secs(30), launcher.wait()).await;
        }
    }
}

/// The string value of `"key":"..."` in the launcher's one JSON line (no escapes in it).
fn json_str(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    Some(line[start..].split('"').next()?.to_string())
}

/// Contended figures of one library at one worker count.
#[derive(Clone)]
struct Contended {
    per_s: f64,
    p50_us: f64,
    p99_us: f64,
    jain: f64,
    executed: f64,
    retaken: f64,
    n: usize,
}

/// Everything measured on one database.
struct Measured {
    db: Db,
    counter: Counter,
    libs: Vec<Lib>,
    /// Libraries left out, with why.
    skipped: Vec<(Lib, String)>,
    /// Contended runs that failed (a worker's error).
    failures: Vec<String>,
    version: String,
    /// Uncontended pairs/s per round, per library (`libs` order).
    rates: Vec<Vec<f64>>,
    /// Server transactions / statements per uncontended pair, per library.
    pair_executed: Vec<f64>,
    /// Per worker count, each library's best run (None: every run failed).
    rows: Vec<(u64, Vec<Option<Contended>>)>,
}

/// Why a contended run produced no figures.
enum Failure {
    /// A worker process failed (the library's own error): reported in the section.
    Worker(String),
    /// The bench itself could not measure, or the library broke mutual exclusion.
    Bench(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Bench(e)
    }
}

/// `lockgate-bench bench-sql --node NODE --python PYTHON --peers DIR [--out FILE] [--seconds S]
/// [--pairs P] [--rounds R] [--runs N] [--libs lockgate,naive,peer] [--pg-url URL] [--mysql-url URL] [--launcher PATH]
/// [--command TEXT]`; its naive-lock workers are `worker --lock naive ...`.
pub async fn run(args: &BenchSqlArgs) -> i32 {
    match bench(args).await {
        Ok(md) => {
            if let Some(path) = &args.out {
                if let Err(e) = std::fs::write(path, &md) {
                    eprintln!("bench-sql: cannot write {path}: {e}");
                    return 1;
                }
            }
            print!("{md}");
            0
        }
        Err(e) => {
            eprintln!("bench-sql: {e}");
            1
        }
    }
}

struct Plan {
    seconds: u64,
    pairs: u64,
    rounds: u64,
    runs: u64,
    libs: Vec<Lib>,
}

async fn bench(args: &BenchSqlArgs) -> Result<String, String> {
    let peers = Peers {
        node: args.node.clone(),
        python: args.python.clone(),
        binding_python: args.binding_python.clone(),
        dir: PathBuf::from(&args.peers),
    };
    let plan = Plan {
        seconds: args.seconds,
        pairs: args.pairs,
        rounds: args.rounds,
        runs: args.runs,
        libs: chosen_libs(args)?,
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let launcher = args.launcher.as_ref().map(PathBuf::from).unwrap_or_else(|| exe.with_file_name("test-servers"));
    let node_version = output(Command::new(&peers.node).arg("--version")).await?.trim().to_string();
    let python_version = output(Command::new(&peers.python).arg("--version")).await?.trim().to_string();
    let mut all = Vec::new();
    for (db, given) in [(Db::Postgres, args.pg_url.clone()), (Db::MySql, args.mysql_url.clone())] {
        let server = Server::start(db, &launcher, given).await?;
        let result = measure(&server, &exe, &peers, &plan).await;
        server.stop().await;
        all.push(result?);
    }
    Ok(markdown(args, &plan, &node_version, &python_version, &all))
}

async fn measure(server: &Server, exe: &PathBuf, peers: &Peers, plan: &Plan) -> Result<Measured, String> {
    let db = server.db;
    let mut libs = plan.libs.clone();
    let version = server_version(server).await?;
    naive_table(server).await?;
    server.calibrate().await?;
    // What the server executes per pair: one run of 50 + 200 pairs each, counted whole (each
    // library's connecting and session set-up included).
    // A library that cannot do this (not built, or failing at once) is left out of the run and
    // named in the section; a failure later on fails the bench.
    let mut pair_executed = Vec::new();
    let mut skipped = Vec::new();
    for lib in std::mem::take(&mut libs) {
        server.settle().await;
        let before = server.executed().await?;
        if let Err(e) = pairs(server, peers, lib, &format!("bench-u-x-{}", lib.slug()), 200).await {
            eprintln!("{}: {} left out: {e}", db.title(), lib.name(db));
            skipped.push((lib, e));
            continue;
        }
        pair_executed.push(server.executed_since(before).await? / 250.0);
        libs.push(lib);
    }
    if libs.is_empty() {
        return Err(format!("{}: no library could run", db.title()));
    }
    let mut rates = vec![Vec::new(); libs.len()];
    for r in 0..plan.rounds {
        let mut said = Vec::new();
        for (i, &lib) in libs.iter().enumerate() {
            let rate = pairs(server, peers, lib, &format!("bench-u-{}-{r}", lib.slug()), plan.pairs).await?;
            said.push(format!("{} {rate:.0}", lib.slug()));
            rates[i].push(rate);
        }
        eprintln!("{} round {}: {} pairs/s", db.title(), r + 1, said.join(", "));
    }
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for workers in WORKERS {
        // `runs` runs per library, in rotating order; a row keeps the run with more
        // acquisitions (the one the rest of the shared machine disturbed least).
        let mut best: Vec<Option<Contended>> = vec![None; libs.len()];
        for run in 0..plan.runs as usize {
            for k in 0..libs.len() {
                let i = (k + run) % libs.len();
                let lib = libs[i];
                let name = format!("bench-c-{}-{workers}-{run}", lib.slug());
                server.settle().await;
                let c = match contended(server, exe, peers, lib, &name, workers, plan.seconds).await {
                    Ok(c) => c,
                    // A library failing under contention is a result too: the section says so
                    // (a wrong holding order is not: it fails the bench).
                    Err(Failure::Worker(e)) => {
                        eprintln!("{} contended {}, {workers} workers, run {}: failed: {e}", db.title(), lib.name(db), run + 1);
                        failures.push(format!("{} at {workers} workers, run {}: {e}", lib.name(db), run + 1));
                        continue;
                    }
                    Err(Failure::Bench(e)) => return Err(e),
                };
                eprintln!(
                    "{} contended {}, {workers} workers, run {}: {:.0} acq/s, p50 {:.0} µs, p99 {:.0} µs, Jain {:.3}, {:.2} {} per acquisition",
                    db.title(),
                    lib.name(db),
                    run + 1,
                    c.per_s,
                    c.p50_us,
                    c.p99_us,
                    c.jain,
                    c.executed,
                    server.counter.counted()
                );
                if best[i].as_ref().is_none_or(|b| c.n > b.n) {
                    best[i] = Some(c);
                }
            }
        }
        rows.push((workers, best));
    }
    Ok(Measured { db, counter: server.counter, libs, skipped, failures, version, rates, pair_executed, rows })
}

async fn server_version(server: &Server) -> Result<String, String> {
    match server.db {
        Db::Postgres => {
            let (client, conn) = tokio_postgres::connect(&server.url, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            let row = client.query_one("SHOW server_version", &[]).await.map_err(|e| e.to_string())?;
            Ok(row.get::<_, String>(0).split(' ').next().unwrap_or("").to_string())
        }
        Db::MySql => {
            let mut c = sqlx::MySqlConnection::connect(&server.mysql_url()).await.map_err(|e| e.to_string())?;
            let v: String = sqlx::query_scalar("SELECT VERSION()").fetch_one(&mut c).await.map_err(|e| e.to_string())?;
            let _ = c.close().await;
            Ok(v.split('-').next().unwrap_or("").to_string())
        }
    }
}

/// The naive lock's table, created once before anything is measured.
async fn naive_table(server: &Server) -> Result<(), String> {
    let mut conn = NaiveConn::connect(server.db, &server.url_for(Lib::Naive)).await?;
    conn.create().await
}

/// One connection of the naive table lock.
enum NaiveConn {
    Postgres(tokio_postgres::Client, tokio_postgres::Statement, tokio_postgres::Statement),
    MySql(sqlx::MySqlConnection),
}

impl NaiveConn {
    async fn connect(db: Db, url: &str) -> Result<NaiveConn, String> {
        match db {
            Db::Postgres => {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                client.batch_execute(NAIVE_TABLE_PG).await.map_err(|e| e.to_string())?;
                // The duplicate key is seen as 0 rows inserted, not as an error: the same
                // algorithm, without the server logging an error for every retry.
                let insert = client
                    .prepare("INSERT INTO lockgate_bench_naive (resource, owner) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                    .await
                    .map_err(|e| e.to_string())?;
                let delete = client.prepare("DELETE FROM lockgate_bench_naive WHERE resource = $1 AND owner = $2").await.map_err(|e| e.to_string())?;
                Ok(NaiveConn::Postgres(client, insert, delete))
            }
            Db::MySql => Ok(NaiveConn::MySql(sqlx::MySqlConnection::connect(url).await.map_err(|e| e.to_string())?)),
        }
    }

    async fn create(&mut self) -> Result<(), String> {
        match self {
            NaiveConn::Postgres(..) => Ok(()),
            NaiveConn::MySql(c) => sqlx::raw_sql(NAIVE_TABLE_MY).execute(c).await.map(|_| ()).map_err(|e| e.to_string()),
        }
    }

    /// One INSERT: true when this owner's row went in (the lock is held).
    async fn try_lock(&mut self, name: &str, owner: &str) -> Result<bool, String> {
        let n = match self {
            NaiveConn::Postgres(client, insert, _) => client.execute(insert, &[&name, &owner]).await.map_err(|e| e.to_string())?,
            NaiveConn::MySql(c) => {
                match sqlx::query("INSERT IGNORE INTO lockgate_bench_naive (resource, owner) VALUES (?, ?)").bind(name).bind(owner).execute(&mut *c).await {
                    Ok(done) => done.rows_affected(),
                    // InnoDB's next-key locks make contending INSERT IGNOREs and DELETEs
                    // deadlock now and then; the server rolls the INSERT back: not had, retry.
                    Err(e) if deadlock(&e) => 0,
                    Err(e) => return Err(e.to_string()),
                }
            }
        };
        Ok(n == 1)
    }

    /// INSERT, and again after a short sleep while the row is someone else's, until `give_up`
    /// (wall-clock ns): false then.
    async fn lock(&mut self, name: &str, owner: &str, give_up: u128) -> Result<bool, String> {
        loop {
            if self.try_lock(name, owner).await? {
                return Ok(true);
            }
            if wall_ns() > give_up {
                return Ok(false);
            }
            tokio::time::sleep(NAIVE_RETRY).await;
        }
    }

    /// The owner-only DELETE: true when the row was this owner's.
    async fn unlock(&mut self, name: &str, owner: &str) -> Result<bool, String> {
        let n = match self {
            NaiveConn::Postgres(client, _, delete) => client.execute(delete, &[&name, &owner]).await.map_err(|e| e.to_string())?,
            NaiveConn::MySql(c) => {
                let mut tries = 0;
                loop {
                    match sqlx::query("DELETE FROM lockgate_bench_naive WHERE resource = ? AND owner = ?").bind(name).bind(owner).execute(&mut *c).await {
                        Ok(done) => break done.rows_affected(),
                        // A deadlock victim's DELETE was rolled back: the row is still ours.
                        Err(e) if deadlock(&e) && tries < 100 => tries += 1,
                        Err(e) => return Err(e.to_string()),
                    }
                }
            }
        };
        Ok(n == 1)
    }
}

/// InnoDB chose this statement as a deadlock's victim (SQLSTATE 40001, error 1213).
fn deadlock(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "40001")
}

fn db_of(url: &str) -> Db {
    if url.starts_with("postgres") {
        Db::Postgres
    } else {
        Db::MySql
    }
}

/// One contending process of the naive lock (`worker --lock naive --url URL --name NAME --hold-us H
/// --start-ns NS --duration-ms MS`): from NS for MS, lock / hold (spinning) / unlock at once
/// again; its "token" is its own count (the table lock has none). A lock not had by the end of
/// the window plus 10 s is given up (starved), not counted.
pub(crate) async fn naive_worker(url: &str, name: &str, hold: Duration, start_ns: u128, duration: Duration) -> Result<Vec<(u64, u128, u128, u128)>, String> {
    let end_ns = start_ns + duration.as_nanos();
    let mut conn = NaiveConn::connect(db_of(url), url).await?;
    let owner = format!("{}", std::process::id());
    tokio::time::sleep(Duration::from_nanos(start_ns.saturating_sub(wall_ns()) as u64)).await;
    let mut records = Vec::new();
    while wall_ns() < end_ns {
        let wait_start = wall_ns();
        if !conn.lock(name, &owner, end_ns + 10_000_000_000).await? {
            break;
        }
        let acquired = wall_ns();
        let spin = Instant::now();
        while spin.elapsed() < hold {
            std::hint::spin_loop();
        }
        let release_start = wall_ns();
        if !conn.unlock(name, &owner).await? {
            return Err("the naive lock's row was gone at release".into());
        }
        records.push((records.len() as u64 + 1, wait_start, acquired, release_start));
    }
    Ok(records)
}

/// Uncontended pairs/s of `lib` on one client/connection, after 50 warm-up pairs.
async fn pairs(server: &Server, peers: &Peers, lib: Lib, name: &str, pairs: u64) -> Result<f64, String> {
    let url = server.url_for(lib);
    match lib {
        Lib::Lockgate => {
            let client = Client::connect(&url).await.map_err(|e| e.to_string())?;
            let lock = client.lock(name, LockOptions::default()).map_err(|e| e.to_string())?;
            let mut t = Instant::now();
            for i in 0..50 + pairs {
                if i == 50 {
                    t = Instant::now();
                }
                let lease = lock.acquire(Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
                if !lease.release().await.map_err(|e| e.to_string())? {
                    return Err("an uncontended lease was lost".into());
                }
            }
            let rate = pairs as f64 / t.elapsed().as_secs_f64();
            client.close().await;
            Ok(rate)
        }
        Lib::Naive => {
            let mut conn = NaiveConn::connect(server.db, &url).await?;
            let owner = format!("{}", std::process::id());
            let mut t = Instant::now();
            for i in 0..50 + pairs {
                if i == 50 {
                    t = Instant::now();
                }
                if !conn.try_lock(name, &owner).await? {
                    return Err("the naive lock's row was taken, uncontended".into());
                }
                if !conn.unlock(name, &owner).await? {
                    return Err("the naive lock's row was gone at release".into());
                }
            }
            Ok(pairs as f64 / t.elapsed().as_secs_f64())
        }
        Lib::Peer | Lib::Binding => {
            let out = output(peers.command(lib, server.db, "pairs").args(["--url", &url, "--name", name, "--pairs", &pairs.to_string()])).await?;
            out.trim().parse().map_err(|_| format!("the {} harness said {out:?}", lib.name(server.db)))
        }
    }
}

/// Runs `cmd` to its end: its stdout, else its last stderr line. Messages name the program and
/// its script only (the arguments hold URLs with passwords).
async fn output(cmd: &mut Command) -> Result<String, String> {
    let std = cmd.as_std();
    let mut shown = std.get_program().to_string_lossy().into_owned();
    if let Some(first) = std.get_args().next() {
        shown = format!("{shown} {}", first.to_string_lossy().rsplit('/').next().unwrap_or(""));
    }
    let out = cmd.stdin(Stdio::null()).output().await.map_err(|e| format!("{shown}: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    eprint!("{err}");
    if !out.status.success() {
        return Err(format!("{shown}: {}", err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("failed").trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `workers` processes (one client / connection each) loop acquire → hold ~1 ms (spinning) →
/// release → at once again on one lock for `seconds`.
async fn contended(server: &Server, exe: &PathBuf, peers: &Peers, lib: Lib, name: &str, workers: u64, seconds: u64) -> Result<Contended, Failure> {
    let db = server.db;
    let url = server.url_for(lib);
    // Time for every worker to start and connect before the window opens: 60 ms a process for
    // Rust, 130 ms for Node and Python (slower to start); a late worker is reported below.
    let start_ns = wall_ns() + 500_000_000 + workers as u128 * if matches!(lib, Lib::Peer | Lib::Binding) { 130_000_000 } else { 60_000_000 };
    let end_ns = start_ns + seconds as u128 * 1_000_000_000;
    let (start, duration) = (start_ns.to_string(), (seconds * 1000).to_string());
    let before = server.executed().await?;
    let mut children = Vec::new();
    for _ in 0..workers {
        let mut cmd = match lib {
            Lib::Lockgate => {
                let mut c = Command::new(exe);
                c.args(["worker", "--mode", "bench", "--lock", "fair", "--tasks", "1"]);
                c
            }
            Lib::Naive => {
                let mut c = Command::new(exe);
                c.args(["worker", "--mode", "bench", "--lock", "naive"]);
                c
            }
            Lib::Peer | Lib::Binding => peers.command(lib, db, "worker"),
        };
        cmd.args(["--url", &url, "--name", name, "--hold-us", &HOLD_US.to_string(), "--start-ns", &start, "--duration-ms", &duration]);
        children.push(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn().map_err(|e| e.to_string())?);
    }
    // (worker, token, wait_start, acquired, release_start)
    let mut recs: Vec<(usize, u64, u128, u128, u128)> = Vec::new();
    for (w, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().await.map_err(|e| e.to_string())?;
        let err = String::from_utf8_lossy(&out.stderr);
        eprint!("{err}");
        if !out.status.success() {
            let last = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("failed").trim().to_string();
            return Err(Failure::Worker(format!("worker {w}: {last}")));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: Vec<u128> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            if v.len() == 5 {
                recs.push((w, v[1] as u64, v[2], v[3], v[4]));
            }
        }
    }
    // Each worker's first acquire starts at start_ns unless it was not ready by then.
    for w in 0..workers as usize {
        if let Some(first) = recs.iter().filter(|r| r.0 == w).map(|r| r.2).min() {
            if first > start_ns + 20_000_000 {
                eprintln!("{}: {} worker {w} started {} ms late", db.title(), lib.name(db), (first - start_ns) / 1_000_000);
            }
        }
    }
    // Every client is closed (PostgreSQL's backends flush their counts on exit).
    let executed = server.executed_since(before).await?;
    recs.sort_by_key(|r| r.3);
    // Holding order: never two at once; lockgate's tokens (its rows' ids) also increase. The
    // naive lock's and the peers' "tokens" are each process's own count.
    let fenced = matches!(lib, Lib::Lockgate | Lib::Binding);
    // Node and Python workers stamp times from their runtime's own reading of the wall clock
    // (Node: `performance.timeOrigin`, read once at start-up), which under load can be off by
    // a fraction of a millisecond between processes; one such run once "overlapped" a peer
    // library by less than that. The Rust workers read CLOCK_REALTIME directly: no slack.
    let slack: u128 = if matches!(lib, Lib::Peer | Lib::Binding) { 1_000_000 } else { 0 };
    if recs.windows(2).any(|w| w[1].3 + slack < w[0].4 || (fenced && w[1].1 <= w[0].1)) {
        return Err(Failure::Bench(format!("{}: two holders overlapped, or tokens did not increase in holding order", lib.name(db))));
    }
    let total = recs.len();
    let window: Vec<_> = recs.iter().filter(|r| r.3 >= start_ns && r.3 < end_ns).cloned().collect();
    let n = window.len();
    if n < 2 {
        return Err(Failure::Worker(format!("{} acquisitions in the window", n)));
    }
    let mut gaps: Vec<f64> = window.windows(2).map(|w| (w[1].3 as f64 - w[0].4 as f64) / 1e3).collect();
    gaps.sort_by(f64::total_cmp);
    let mut counts = vec![0u64; workers as usize];
    for r in &window {
        counts[r.0] += 1;
    }
    let retaken = window.windows(2).filter(|w| w[0].0 == w[1].0).count() as f64 / (n - 1) as f64;
    Ok(Contended {
        per_s: n as f64 / seconds as f64,
        p50_us: percentile(&gaps, 50.0),
        p99_us: percentile(&gaps, 99.0),
        jain: jain(&counts),
        executed: executed / total as f64,
        retaken,
        n,
    })
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 50.0)
}

/// lockgate's figure against another's: "1.23× better" / "1.23× worse" / "equal".
fn ratio(ours: f64, theirs: f64, higher_is_better: bool) -> String {
    if !(ours > 0.0 && theirs > 0.0) {
        return "—".into();
    }
    let r = if higher_is_better { ours / theirs } else { theirs / ours };
    if (r - 1.0).abs() < 0.005 {
        return "equal".into();
    }
    if r > 1.0 {
        format!("{r:.2}× better")
    } else {
        format!("{:.2}× worse", 1.0 / r)
    }
}

fn markdown(args: &BenchSqlArgs, plan: &Plan, node_version: &str, python_version: &str, all: &[Measured]) -> String {
    let Plan { seconds, pairs, rounds, runs, .. } = *plan;
    let mut md = String::from("## Core (Rust) on PostgreSQL and MariaDB: lockgate vs the naive table lock and the most used peer library\n\n");
    let _ = writeln!(
        md,
        "Command: `{}`\n",
        args.command.clone().unwrap_or_else(|| "lockgate-bench bench-sql --node node --python <venv python> --peers bench/sql-peers".into())
    );
    let versions: Vec<String> = all.iter().map(|m| format!("{} {}", m.db.title(), m.version)).collect();
    let _ = writeln!(
        md,
        "Setup: {} on loopback, one server each from the project's launcher, {} cores (shared). \
         **lockgate**: the native Rust client with its defaults (`postgres://`, `mysql://`). \
         **Naive table lock** (seed 004, the floor): `INSERT` the lock's row (primary key = the lock's name) to lock, while it is taken sleep {} ms and insert again, `DELETE` it (owner-checked) to unlock; \
         written in this bench with the crates the core uses (tokio-postgres; sqlx's MySQL driver), prepared statements, one connection per process; the taken row is seen as 0 rows inserted \
         (`ON CONFLICT DO NOTHING` / `INSERT IGNORE`) rather than as a duplicate-key error, so the server does not log an error per retry. \
         **Peers**, the most used lock library for each database, in its own language (bench/sql-peers): on PostgreSQL npm `advisory-lock` 2.0.0 on `pg` (Node {node_version}): \
         `lock()` opens a connection and runs `pg_advisory_lock`, `unlock()` runs `pg_advisory_unlock` and closes it; on MariaDB PyPI `PyMySQLLock` 0.2.0 on PyMySQL 1.2.4 ({python_version}): \
         `acquire()` opens a connection and runs `GET_LOCK`, `release()` runs `RELEASE_LOCK` and closes it (plaintext, as every row: `ssl_disabled`). \
         **lockgate in the peer's language**: its Node binding on PostgreSQL and its Python binding on MariaDB, defaults (bench/sql-peers/lockgate_node.js, lockgate_python.py).\n",
        versions.join(" and "),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        NAIVE_RETRY.as_millis()
    );
    let sources: Vec<String> = all.iter().map(|m| format!("{}: {}", m.db.title(), m.counter.source())).collect();
    let _ = writeln!(
        md,
        "Statements per acquisition: what the server itself counted, read before and after each measurement with every client of it closed, divided by the acquisitions \
         (contended: every acquisition of the run; connecting and lockgate's session set-up included). {}.\n",
        sources.join("; ")
    );
    for m in all {
        let db = m.db;
        let _ = writeln!(
            md,
            "### {} {}\n\n**Uncontended acquire + release**, one client, one task: {rounds} interleaved rounds of {pairs} pairs per library after 50 warm-up pairs, best and median round (higher is better); {} per pair over one run of 250 pairs, connecting included.\n",
            db.title(),
            m.version,
            m.counter.counted()
        );
        let _ = writeln!(
            md,
            "| library | pairs/s, best | pairs/s, median | {} per pair | lockgate (native) is (median) |\n|---|---:|---:|---:|---:|",
            m.counter.counted()
        );
        for (lib, why) in &m.skipped {
            let _ = writeln!(md, "**{} left out of this run**: it failed its first measurement ({}).\n", lib.name(db), why.replace('|', "/"));
        }
        let best = |v: &[f64]| v.iter().cloned().fold(0f64, f64::max);
        let native = m.libs[0] == Lib::Lockgate;
        for (i, lib) in m.libs.iter().enumerate() {
            let vs = if i == 0 || !native || *lib == Lib::Binding { "—".to_string() } else { ratio(median(&m.rates[0]), median(&m.rates[i]), true) };
            let _ = writeln!(md, "| {} | {:.0} | {:.0} | {:.2} | {vs} |", lib.name(db), best(&m.rates[i]), median(&m.rates[i]), m.pair_executed[i]);
        }
        let _ = writeln!(
            md,
            "\n**Contended**: one lock, {} worker processes (one client / connection each) loop acquire → hold ~{HOLD_US} µs (spinning) → release → acquire again at once, measured for {seconds} s; \
             {runs} runs per row (libraries in rotating order), the row shows the run with more acquisitions. Handoff = one holder starting its release → the next holder's acquire returning. \
             Jain = (Σx)² / (n·Σx²) over the workers' acquisition counts (1.0 = perfectly even). Re-taken by releaser: the share of acquisitions by the process that held the lock just before; \
             the naive lock lets its releaser insert again at once while the others sleep between tries, so most of its handoffs stay inside one process with nobody woken \
             (its high acquisitions/s and short handoffs come from that: a first-come lock hands the lock to another process every time).\n",
            WORKERS.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(" or ")
        );
        let _ = writeln!(
            md,
            "| workers | library | acquisitions/s | handoff p50 | handoff p99 | Jain | {} per acquisition | re-taken by releaser |\n|---:|---|---:|---:|---:|---:|---:|---:|",
            m.counter.counted()
        );
        for (workers, libs) in &m.rows {
            for (i, c) in libs.iter().enumerate() {
                let Some(c) = c else {
                    let _ = writeln!(md, "| {workers} | {} | failed | | | | | |", m.libs[i].name(db));
                    continue;
                };
                let _ = writeln!(
                    md,
                    "| {workers} | {} | {:.0} | {:.0} µs | {:.0} µs | {:.3} | {:.2} | {:.1}% |",
                    m.libs[i].name(db),
                    c.per_s,
                    c.p50_us,
                    c.p99_us,
                    c.jain,
                    c.executed,
                    100.0 * c.retaken
                );
            }
        }
        if !m.failures.is_empty() {
            let _ = writeln!(md, "\nFailed contended runs (the row shows the other run, if any): {}.", m.failures.join("; ").replace('|', "/"));
        }
        let at = |lib: Lib| m.libs.iter().position(|&l| l == lib);
        let mut behind = Vec::new();
        let pairs_to_compare = [(Lib::Lockgate, Lib::Naive), (Lib::Lockgate, Lib::Peer), (Lib::Binding, Lib::Peer)];
        for (ours, theirs) in pairs_to_compare {
            let (Some(i), Some(j)) = (at(ours), at(theirs)) else { continue };
            let (mine, other) = (median(&m.rates[i]), median(&m.rates[j]));
            let mut parts = vec![format!("uncontended {}", ratio(mine, other, true))];
            let mut short = Vec::new();
            if mine < other {
                short.push("uncontended pairs/s".to_string());
            }
            for (workers, libs) in &m.rows {
                let (Some(a), Some(b)) = (&libs[i], &libs[j]) else {
                    if libs[i].is_none() {
                        short.push(format!("failed at {workers} workers"));
                    }
                    continue;
                };
                parts.push(format!(
                    "{workers} workers: acquisitions/s {}, handoff p50 {}, p99 {}, Jain {:.3} vs {:.3}, {} {}",
                    ratio(a.per_s, b.per_s, true),
                    ratio(a.p50_us, b.p50_us, false),
                    ratio(a.p99_us, b.p99_us, false),
                    a.jain,
                    b.jain,
                    m.counter.counted(),
                    ratio(a.executed, b.executed, false)
                ));
                for (what, worse) in [
                    ("acquisitions/s", a.per_s < b.per_s),
                    ("handoff p50", a.p50_us > b.p50_us),
                    ("handoff p99", a.p99_us > b.p99_us),
                    ("Jain index", a.jain + 0.0005 < b.jain),
                ] {
                    if worse {
                        short.push(format!("{what} at {workers} workers"));
                    }
                }
            }
            let _ = writeln!(md, "\n{} against {}, row by row: {}.", ours.name(db), theirs.name(db), parts.join("; "));
            if !short.is_empty() {
                behind.push(format!("{} vs {}: {}", ours.name(db), theirs.name(db), short.join(", ")));
            }
        }
        if at(Lib::Lockgate).is_none() && at(Lib::Binding).is_none() {
            md.push_str("\n(lockgate not measured in this run: `--libs`.)\n\n");
            continue;
        }
        let _ = writeln!(
            md,
            "\nTarget (issue 17): faster than the naive table lock on every row and at least as fast as the peer (natively and in the peer's own language). {}\n",
            if behind.is_empty() { "Met on every row in this run.".to_string() } else { format!("Not met in this run: {}.", behind.join("; ")) }
        );
    }
    md
}
