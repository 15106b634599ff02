//! The fencing token enforced in the user's OWN table (docs/fencing-sql.md), on real PostgreSQL 15
//! and MariaDB 10.11 servers from the project's launcher, with the drivers an application would
//! use (tokio-postgres; sqlx's MySQL driver, as the core's transport): a holder whose lease
//! expired while it was paused writes late with its old token and the database refuses it (0
//! rows: "you lost the lock, stop"), while the next holder's writes land. Both shapes of the
//! docs: one `fence` column per protected row, and one fence row per resource checked first in
//! the transaction that writes several rows.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::time::Duration;

use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::LockOptions;
use sqlx::Connection;
use test_servers::TestServers;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Db {
    Postgres,
    MariaDb,
}

/// A lock name no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("fence-{tag}-{}-{t}", std::process::id())
}

async fn connect(url: &str) -> Client {
    let mut options = ClientOptions::new(url);
    options.response_timeout = Duration::from_secs(2);
    options.connect().await.unwrap_or_else(|e| panic!("{e}"))
}

/// The fencing token as the BIGINT the fence column holds (ids fit: they are BIGINT ids).
fn token(lease: &Lease) -> i64 {
    i64::try_from(lease.fencing_token().expect("SQL grants carry a fencing token")).unwrap()
}

/// The application's own connection to the same database (as the test user, `lockgate`).
enum App {
    Pg(tokio_postgres::Client),
    My(sqlx::MySqlConnection),
}

impl App {
    async fn connect(db: Db, url: &str) -> App {
        match db {
            Db::Postgres => {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("app connection");
                tokio::spawn(conn);
                App::Pg(client)
            }
            Db::MariaDb => App::My(sqlx::MySqlConnection::connect(url).await.expect("app connection")),
        }
    }

    /// Runs `pg` (PostgreSQL, `$n` placeholders) or `my` (MySQL, `?` placeholders, `my_args`
    /// in their order) and returns the rows it changed (MySQL: matched, sqlx sets FOUND_ROWS).
    async fn exec(&mut self, pg: &'static str, pg_args: &[i64], my: &'static str, my_args: &[i64]) -> u64 {
        match self {
            App::Pg(c) => {
                let args: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    pg_args.iter().map(|a| a as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                c.execute(pg, &args).await.unwrap_or_else(|e| panic!("{pg}: {e}"))
            }
            App::My(c) => {
                let mut q = sqlx::query(my);
                for a in my_args {
                    q = q.bind(*a);
                }
                q.execute(&mut *c).await.unwrap_or_else(|e| panic!("{my}: {e}")).rows_affected()
            }
        }
    }

    async fn one(&mut self, pg: &'static str, my: &'static str) -> (i64, i64) {
        match self {
            App::Pg(c) => {
                let row = c.query_one(pg, &[]).await.unwrap_or_else(|e| panic!("{pg}: {e}"));
                (row.get(0), row.get(1))
            }
            App::My(c) => sqlx::query_as(my).fetch_one(&mut *c).await.unwrap_or_else(|e| panic!("{my}: {e}")),
        }
    }
}

/// The protected row's fenced write (docs/fencing-sql.md): lands only if no later holder has
/// written or claimed the row. `<=`: the same holder may write again (and retry a write whose
/// reply it lost); a token below the row's fence is an older holder's.
async fn write_account(app: &mut App, id: i64, balance: i64, fence: i64) -> u64 {
    app.exec(
        "UPDATE account SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2",
        &[balance, fence, id],
        "UPDATE account SET balance = ?, fence = ? WHERE id = ? AND fence <= ?",
        &[balance, fence, id, fence],
    )
    .await
}

/// The claim a new holder makes before it reads the row: from here on, every older holder's
/// write is refused, even before the new holder's first real write.
async fn claim_account(app: &mut App, id: i64, fence: i64) -> u64 {
    app.exec(
        "UPDATE account SET fence = $1 WHERE id = $2 AND fence <= $1",
        &[fence, id],
        "UPDATE account SET fence = ? WHERE id = ? AND fence <= ?",
        &[fence, id, fence],
    )
    .await
}

async fn a_paused_holders_late_row_write_is_refused(db: Db) {
    let servers = TestServers::start(&[match db {
        Db::Postgres => "postgres",
        Db::MariaDb => "mariadb",
    }]);
    let url = servers.url();
    let mut app = App::connect(db, &url).await;
    let create = match db {
        Db::Postgres => "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)",
        Db::MariaDb => "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
    };
    app.exec(create, &[], create, &[]).await;
    assert_eq!(app.exec("INSERT INTO account (id, balance) VALUES (1, 100)", &[], "INSERT INTO account (id, balance) VALUES (1, 100)", &[]).await, 1);

    let (a, b) = (connect(&url).await, connect(&url).await);
    let name = unique("account-1");
    // A's lease is fixed (not renewed): a paused process renews nothing either.
    let first = a.lock(&name, LockOptions::fixed_lease(Duration::from_secs(1))).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    let old = token(&first);
    assert_eq!(write_account(&mut app, 1, 110, old).await, 1, "the holder's write lands");
    assert_eq!(write_account(&mut app, 1, 110, old).await, 1, "and again with the same token (a retry, the same value)");
    assert_eq!(write_account(&mut app, 1, 120, old).await, 1, "and again with a new value");

    // A pauses past its lease; B, waiting meanwhile, is granted when A's row expires.
    let lb = b.lock(&name, LockOptions::renewed_lease(Duration::from_secs(30))).unwrap();
    let second = lb.acquire(Duration::from_secs(10)).await.unwrap();
    let new = token(&second);
    assert!(new > old, "tokens only grow: {new} > {old}");
    assert!(!first.is_held(), "A's lease is over");
    assert_eq!(claim_account(&mut app, 1, new).await, 1, "B claims the row before reading it");

    // A wakes up and finishes its work: refused, the row is B's.
    assert_eq!(write_account(&mut app, 1, 999, old).await, 0, "the late write of the old token changes nothing");
    assert_eq!(app.one("SELECT balance, fence FROM account WHERE id = 1", "SELECT balance, fence FROM account WHERE id = 1").await, (120, new));
    assert_eq!(write_account(&mut app, 1, 200, new).await, 1, "B's write lands");
    assert_eq!(write_account(&mut app, 1, 999, old).await, 0, "A is still refused after B's write");
    assert_eq!(app.one("SELECT balance, fence FROM account WHERE id = 1", "SELECT balance, fence FROM account WHERE id = 1").await, (200, new));
    assert!(second.release().await.unwrap());
    a.close().await;
    b.close().await;
}

/// One fence per resource: the row `name` of `lock_fence`, updated first in the transaction that
/// writes the resource's rows; 0 rows = roll back and stop. The row lock that UPDATE takes holds
/// until COMMIT, so a newer holder's claim waits for a transaction already past the check.
async fn fenced_restock(app: &mut App, name: &str, fence: i64, qty: i64) -> bool {
    match app {
        App::Pg(c) => {
            let tx = c.transaction().await.unwrap();
            let n = tx.execute("UPDATE lock_fence SET fence = $1 WHERE name = $2 AND fence <= $1", &[&fence, &name]).await.unwrap();
            if n == 0 {
                tx.rollback().await.unwrap();
                return false;
            }
            tx.execute("UPDATE item SET qty = $1", &[&qty]).await.unwrap();
            tx.commit().await.unwrap();
            true
        }
        App::My(c) => {
            let mut tx = c.begin().await.unwrap();
            let n = sqlx::query("UPDATE lock_fence SET fence = ? WHERE name = ? AND fence <= ?")
                .bind(fence)
                .bind(name)
                .bind(fence)
                .execute(&mut *tx)
                .await
                .unwrap()
                .rows_affected();
            if n == 0 {
                tx.rollback().await.unwrap();
                return false;
            }
            sqlx::query("UPDATE item SET qty = ?").bind(qty).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            true
        }
    }
}

async fn a_paused_holders_late_transaction_is_refused(db: Db) {
    let servers = TestServers::start(&[match db {
        Db::Postgres => "postgres",
        Db::MariaDb => "mariadb",
    }]);
    let url = servers.url();
    let mut app = App::connect(db, &url).await;
    for ddl in [
        "CREATE TABLE lock_fence (name VARCHAR(255) PRIMARY KEY, fence BIGINT NOT NULL DEFAULT 0)",
        "CREATE TABLE item (id BIGINT PRIMARY KEY, qty BIGINT NOT NULL)",
        "INSERT INTO item (id, qty) VALUES (1, 0), (2, 0), (3, 0)",
    ] {
        app.exec(ddl, &[], ddl, &[]).await;
    }
    let name = unique("stock");
    match &mut app {
        App::Pg(c) => c.execute("INSERT INTO lock_fence (name) VALUES ($1) ON CONFLICT DO NOTHING", &[&name]).await.unwrap(),
        App::My(c) => sqlx::query("INSERT IGNORE INTO lock_fence (name) VALUES (?)").bind(&name).execute(&mut *c).await.unwrap().rows_affected(),
    };

    let (a, b) = (connect(&url).await, connect(&url).await);
    let first = a.lock(&name, LockOptions::fixed_lease(Duration::from_secs(1))).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    let old = token(&first);
    assert!(fenced_restock(&mut app, &name, old, 5).await, "the holder's transaction commits");
    assert!(fenced_restock(&mut app, &name, old, 6).await, "and a second one");

    let second = b.lock(&name, LockOptions::renewed_lease(Duration::from_secs(30))).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    let new = token(&second);
    assert!(new > old && !first.is_held());
    assert!(fenced_restock(&mut app, &name, new, 7).await, "B's transaction commits");
    assert!(!fenced_restock(&mut app, &name, old, 999).await, "A's late transaction is rolled back");
    assert_eq!(
        app.one("SELECT MIN(qty), MAX(qty) FROM item", "SELECT CAST(MIN(qty) AS SIGNED), CAST(MAX(qty) AS SIGNED) FROM item").await,
        (7, 7),
        "every row is B's"
    );
    assert!(second.release().await.unwrap());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_row_fence_refuses_a_late_write() {
    a_paused_holders_late_row_write_is_refused(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_row_fence_refuses_a_late_write() {
    a_paused_holders_late_row_write_is_refused(Db::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_resource_fence_refuses_a_late_transaction() {
    a_paused_holders_late_transaction_is_refused(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_resource_fence_refuses_a_late_transaction() {
    a_paused_holders_late_transaction_is_refused(Db::MariaDb).await;
}
