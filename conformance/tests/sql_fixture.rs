//! The SQL fixture against real servers (the launcher's postgres and mariadb kinds), on rows
//! written here with the core's own table definition: it counts holders and waiters by the
//! recipes' rules, skips expired rows and MySQL's anchor row, steals and expires on the server's
//! clock. Run: `cargo test --release -p lockgate-conformance --test sql_fixture`.

use std::time::Duration;

use lockgate_conformance::deploy::{Deployment, Kind};
use lockgate_conformance::fixture::sql::SqlFixture;
use lockgate_conformance::fixture::{Fixture, Op, Structure};
use lockgate_conformance::sql::Engine;
use lockgate_core::backend::sql::{Dialect, Schema};
use sqlx::Connection as _;

/// Rows `(lock_key, owner, kind, permits, expires in ms from the server's now)`.
const ROWS: &[(&str, &str, &str, i64, i64)] = &[
    ("mutex/m1", "a", "mutex", 1, 60_000),
    ("mutex/m1", "b", "mutex", 1, 60_000),
    ("mutex/m2", "a", "mutex", 1, -1_000),
    ("rw/r1", "a", "read", 1, 60_000),
    ("rw/r1", "b", "read", 1, 60_000),
    ("rw/r1", "c", "write", 1, 60_000),
    ("rw/r1", "d", "read", 1, 60_000),
    ("semaphore/s1", "a", "semaphore", 2, 60_000),
    ("semaphore/s1", "b", "semaphore", 2, 60_000),
    ("semaphore/s1", "c", "semaphore", 2, 60_000),
    // MySQL's anchor of a name (owner ''): never an entry.
    ("mutex/m2", "", "anchor", 0, 0),
];

async fn write_rows(d: &Deployment, engine: Engine) {
    let sql = d.sql.as_ref().unwrap();
    let dialect = if engine == Engine::Postgres { Dialect::Postgres } else { Dialect::MySql };
    let schema = Schema::default_for(dialect);
    let t = schema.table();
    let now = schema.now_ms();
    let mut statements = schema.ddl();
    for (key, owner, kind, permits, ms) in ROWS {
        statements.push(format!("INSERT INTO {t} (lock_key, owner, kind, permits, value, expires_ms) VALUES ('{key}', '{owner}', '{kind}', {permits}, NULL, {now} + {ms})"));
    }
    match engine {
        Engine::Postgres => {
            let (c, conn) = tokio_postgres::connect(&sql.url(), tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            for s in statements {
                c.batch_execute(&s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
            }
        }
        Engine::MariaDb => {
            let mut c = sqlx::MySqlConnection::connect(&sql.url()).await.unwrap();
            for s in statements {
                sqlx::raw_sql(sqlx::AssertSqlSafe(s.clone())).execute(&mut c).await.unwrap_or_else(|e| panic!("{s}: {e}"));
            }
        }
    }
}

fn holders(lock: &str, structure: Structure, count: u64) -> Op {
    Op::ExpectHolders { lock: lock.into(), structure, count, master: None }
}

fn queued(lock: &str, structure: Structure, count: u64) -> Op {
    Op::ExpectQueued { lock: lock.into(), structure, count, at_once: false }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_reads_and_changes_rows_as_the_recipes_count_them() {
    for engine in [Engine::Postgres, Engine::MariaDb] {
        let d = Deployment::start(Kind::Sql { engine, proxied: false }, &[]).unwrap();
        let url = d.url();
        write_rows(&d, engine).await;
        let mut f = SqlFixture::new(d);
        tokio::task::block_in_place(|| {
            assert_eq!(f.connect(false).unwrap().url, url);
            let ok = |f: &mut SqlFixture, op: Op| f.apply(&op).unwrap_or_else(|e| panic!("{engine:?} {op:?}: {e}"));
            ok(&mut f, holders("m1", Structure::Mutex, 1));
            ok(&mut f, queued("m1", Structure::Mutex, 1));
            ok(&mut f, holders("r1", Structure::ReadWrite, 2));
            ok(&mut f, queued("r1", Structure::ReadWrite, 2));
            ok(&mut f, holders("s1", Structure::Semaphore, 2));
            ok(&mut f, queued("s1", Structure::Semaphore, 1));
            // An expired row and the anchor are nothing left.
            ok(&mut f, holders("m2", Structure::Mutex, 0));
            ok(&mut f, Op::ExpectClean { lock: "m2".into() });
            let e = f.apply(&Op::ExpectClean { lock: "m1".into() }).unwrap_err();
            assert!(e.contains("mutex/m1: 2 live rows"), "{e}");
            // Stealing the holder makes the waiter the holder.
            ok(&mut f, Op::Steal { lock: "m1".into(), structure: Structure::Mutex, master: None });
            ok(&mut f, holders("m1", Structure::Mutex, 1));
            ok(&mut f, queued("m1", Structure::Mutex, 0));
            // Its lease ends 300 ms from the server's now.
            ok(&mut f, Op::Expire { lock: "m1".into(), structure: Structure::Mutex, ms: 300, master: None });
            ok(&mut f, holders("m1", Structure::Mutex, 1));
            std::thread::sleep(Duration::from_millis(400));
            ok(&mut f, Op::ExpectClean { lock: "m1".into() });
            assert!(f.apply(&Op::Steal { lock: "m1".into(), structure: Structure::Mutex, master: None }).unwrap_err().contains("nothing held"));
            assert!(f.apply(&Op::ForgetFence { lock: "m1".into() }).is_err());
            // A proxied connection goes through a proxy of its own to the same server.
            let proxied = f.connect(true).unwrap().url;
            assert_ne!(proxied, url);
            f.finish();
        });
    }
}
