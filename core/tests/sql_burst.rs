//! FIFO under a burst (issue 23, item 6), on one real server per dialect (Debian's PostgreSQL 15
//! and MariaDB 10.11 from the project's launcher, `test-servers postgres|mariadb`; each test
//! has its server, and they run one at a time).
//!
//! Cost: about 75 s for the three bursts, one after another (`./run test` runs them with the
//! core's tests).
//!
//! Three clients queue [`WAITERS`] waiters each on one mutex at once, `entry_ttl` 4 s, behind a
//! holder that lets go only once every waiter has queued and more than an entry lease has
//! passed: each waiter's row must be refreshed while its client is busy with the others'
//! inserts and re-checks. A DBA's trigger logs every row inserted for the name (id, owner), so
//! the test sees what the API does not:
//! - no row is inserted twice for one acquire (a live waiter's row that expired is inserted
//!   again at the back of the queue: a new id for the same owner);
//! - grants follow arrival: the grants, in holding order, come in the order of each acquire's
//!   first row id (0 inversions), and within one client in the order its acquires were called.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::LockOptions;
use sqlx::{Connection, Executor, Row};
use test_servers::TestServers;

/// Waiters per client: the 500 (1,500 in all; the old code inserted 3,536 rows on
/// MariaDB and 4,167 on PostgreSQL for 601 acquires at 200, nearly every waiter timed out).
/// Each re-check reads and counts only the rows just ahead of its waiter, and a waiter whose
/// predecessor its client's heartbeat reads as live sends no timed re-check, so the queue is
/// handed over in 10–20 s in a debug build, on both dialects and with either entry lease.
const WAITERS: usize = 500;
const CLIENTS: usize = 3;
/// The waiters' entry lease.
const ENTRY_TTL: Duration = Duration::from_secs(4);
/// How long a waiter waits (the whole queue is handed over in seconds when FIFO holds).
const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Db {
    Postgres,
    MariaDb,
}

/// The administrator's connection: creates the table and the logging trigger, reads the log.
enum Admin {
    Pg(tokio_postgres::Client),
    My(sqlx::MySqlConnection),
}

impl Admin {
    async fn connect(s: &TestServers) -> Admin {
        let url = s.info["admin_url"].as_str().expect("admin_url").to_string();
        if url.starts_with("postgres") {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("admin");
            tokio::spawn(conn);
            Admin::Pg(client)
        } else {
            Admin::My(sqlx::MySqlConnection::connect(url.replacen("mariadb://", "mysql://", 1).as_str()).await.expect("admin"))
        }
    }

    async fn exec(&mut self, sql: &str) {
        match self {
            Admin::Pg(c) => c.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}")),
            Admin::My(c) => {
                c.execute(sqlx::AssertSqlSafe(sql.to_string())).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
    }

    /// A trigger on lockgate's table logging every entry row inserted (MySQL's anchors left out)
    /// into `burst_log`.
    async fn install_log(&mut self) {
        match self {
            Admin::Pg(_) => {
                self.exec(
                    "CREATE TABLE burst_log (id BIGINT NOT NULL, owner VARCHAR(64) NOT NULL, lock_key VARCHAR(255) NOT NULL);
                     CREATE FUNCTION burst_log_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
                     BEGIN INSERT INTO burst_log VALUES (NEW.id, NEW.owner, NEW.lock_key); RETURN NEW; END $$;
                     CREATE TRIGGER burst_log_insert AFTER INSERT ON lockgate_entry FOR EACH ROW EXECUTE FUNCTION burst_log_row();",
                )
                .await
            }
            Admin::My(_) => {
                self.exec("CREATE TABLE burst_log (id BIGINT NOT NULL, owner VARCHAR(64) NOT NULL, lock_key VARCHAR(255) NOT NULL)").await;
                self.exec(
                    "CREATE TRIGGER burst_log_insert AFTER INSERT ON lockgate_entry FOR EACH ROW \
                     INSERT INTO burst_log SELECT NEW.id, NEW.owner, NEW.lock_key FROM DUAL WHERE NEW.owner <> ''",
                )
                .await
            }
        }
    }

    /// Every row inserted for `name`: (id, owner), by id.
    async fn inserted(&mut self, name: &str) -> Vec<(i64, String)> {
        let key = format!("mutex/{name}");
        match self {
            Admin::Pg(c) => c
                .query("SELECT id, owner FROM burst_log WHERE lock_key = $1 ORDER BY id", &[&key])
                .await
                .expect("read the log")
                .iter()
                .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
                .collect(),
            Admin::My(c) => sqlx::query("SELECT id, owner FROM burst_log WHERE lock_key = ? ORDER BY id")
                .bind(key)
                .fetch_all(&mut *c)
                .await
                .expect("read the log")
                .iter()
                .map(|r| (r.get::<i64, _>(0), r.get::<String, _>(1)))
                .collect(),
        }
    }

    /// How many live-or-dead rows `name` has now (MySQL's anchor left out).
    async fn rows(&mut self, name: &str) -> usize {
        let key = format!("mutex/{name}");
        match self {
            Admin::Pg(c) => {
                let r = c.query_one("SELECT COUNT(*) FROM lockgate_entry WHERE lock_key = $1", &[&key]).await.expect("count");
                r.get::<_, i64>(0) as usize
            }
            Admin::My(c) => {
                let r = sqlx::query("SELECT COUNT(*) FROM lockgate_entry WHERE lock_key = ? AND owner <> ''")
                    .bind(key)
                    .fetch_one(&mut *c)
                    .await
                    .expect("count");
                r.get::<i64, _>(0) as usize
            }
        }
    }
}

/// One grant: who (client, call index) and its fencing token (its row id).
#[derive(Clone, Copy, Debug)]
struct Grant {
    client: usize,
    call: usize,
    token: u64,
}

/// How many of `seq` come after an element that should have come after them: each one smaller
/// than the largest seen before it counts once.
fn inversions(seq: impl IntoIterator<Item = i64>) -> usize {
    let mut max = i64::MIN;
    let mut n = 0;
    for x in seq {
        if x < max {
            n += 1;
        }
        max = max.max(x);
    }
    n
}

/// One burst at a time: two at once on this machine's cores measure the CPU, not the queue.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn a_burst_keeps_fifo(db: Db, entry_ttl: Duration, waiters: usize) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let servers = TestServers::start(&[match db {
        Db::Postgres => "postgres",
        Db::MariaDb => "mariadb",
    }]);
    let url = servers.url();
    let mut admin = Admin::connect(&servers).await;
    let name = format!("burst-{}", SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos());
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..CLIENTS {
        let mut o = ClientOptions::new(&url);
        o.response_timeout = Duration::from_secs(10);
        clients.push(o.connect().await.unwrap_or_else(|e| panic!("connect: {e}")));
    }
    let options = LockOptions { entry_ttl, lease: Duration::from_secs(10), ..LockOptions::default() };
    // The clients' first acquire creates the table (owned by their login); the DBA's trigger
    // goes on it before the first row of this name.
    let setup = clients[0].lock(&format!("{name}-setup"), options.clone()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    setup.release().await.unwrap();
    admin.install_log().await;
    let holder = clients[0].lock(&name, options.clone()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let grants = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(Mutex::new(Vec::<String>::new()));
    // Grants whose lease was over by the release (a grant that came later than its lease).
    let late = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let locks: Vec<_> = (0..waiters).map(|_| client.lock(&name, options.clone()).unwrap()).collect();
        let (grants, failed, late) = (grants.clone(), failed.clone(), late.clone());
        // One task per client polls its acquires in call order, so they reach the client in
        // that order.
        tasks.push(tokio::spawn(async move {
            let waits = locks.into_iter().enumerate().map(|(call, lock)| {
                let (grants, failed, late) = (grants.clone(), failed.clone(), late.clone());
                async move {
                    let lease = match lock.acquire(WAIT).await {
                        Ok(lease) => lease,
                        Err(e) => return failed.lock().unwrap().push(format!("client {c} waiter {call}: {e}")),
                    };
                    let token = lease.fencing_token().expect("a fencing token");
                    grants.lock().unwrap().push(Grant { client: c, call, token });
                    if !lease.release().await.unwrap() {
                        late.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            futures_util::future::join_all(waits).await;
        }));
    }
    // The holder lets go once every waiter has a row and more than an entry lease has passed
    // (each row lived on its refreshes alone), or after 30 s.
    let all = CLIENTS * waiters + 1;
    loop {
        let rows = admin.rows(&name).await;
        if (rows >= all && started.elapsed() > entry_ttl + entry_ttl / 2) || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        if std::env::var_os("BURST_TRACE").is_some() {
            eprintln!("{:?}: {rows} rows", started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let queued_for = started.elapsed();
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(WAIT + Duration::from_secs(10), t).await.expect("every waiter ends").unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    let log = admin.inserted(&name).await;
    for c in clients {
        c.close().await;
    }
    // Each owner's first row is its arrival; a grant's token is its last row.
    let mut first: HashMap<String, i64> = HashMap::new();
    let mut owner_of: HashMap<i64, String> = HashMap::new();
    for (id, owner) in &log {
        first.entry(owner.clone()).or_insert(*id);
        owner_of.insert(*id, owner.clone());
    }
    let mut grants = grants;
    // Holding order: a mutex is held by the lowest live row, so grants come in token order.
    grants.sort_by_key(|g| g.token);
    let arrival = |g: &Grant| owner_of.get(&(g.token as i64)).and_then(|o| first.get(o)).copied().expect("a granted row was logged");
    let global = inversions(grants.iter().map(arrival));
    let within: usize = (0..CLIENTS).map(|c| inversions(grants.iter().filter(|g| g.client == c).map(|g| g.call as i64))).sum();
    let reinserted = log.len() - first.len();
    eprintln!(
        "{db:?} {CLIENTS} x {waiters} waiters, entry_ttl {entry_ttl:?}: queued {queued_for:?} behind the holder, all granted {:?} after the start; \
         {} rows inserted for {} acquires ({reinserted} again), {global} inversions of arrival, {within} within a client; {} released after their lease ended",
        started.elapsed(),
        log.len(),
        first.len(),
        late.load(Ordering::Relaxed)
    );
    let failed = failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "{} waiter(s) failed: {:?}", failed.len(), &failed[..failed.len().min(5)]);
    assert_eq!(grants.len(), CLIENTS * waiters);
    assert_eq!(first.len(), all, "one owner per acquire");
    assert_eq!(reinserted, 0, "{reinserted} live waiters' rows expired and were inserted again at the back");
    assert_eq!(global, 0, "{global} grants came after a later arrival");
    assert_eq!(within, 0, "{within} grants came after a later call on the same client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_mariadb() {
    a_burst_keeps_fifo(Db::MariaDb, ENTRY_TTL, WAITERS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_postgres() {
    a_burst_keeps_fifo(Db::Postgres, ENTRY_TTL, WAITERS).await;
}

/// With a 10 s entry lease rows lived through the burst on the old code too, but MariaDB still
/// granted hundreds of one client's acquires out of the order they were called (deadlocked
/// inserts re-run behind the client's later ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_mariadb_entry_ttl_10s() {
    a_burst_keeps_fifo(Db::MariaDb, Duration::from_secs(10), WAITERS).await;
}
