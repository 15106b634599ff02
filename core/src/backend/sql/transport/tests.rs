//! The SQL transport against real servers (PostgreSQL 15 and MariaDB 10.11 from Debian): batches
//! in order with values bound and converted, the first failure ending a batch with the server's
//! code, one main connection replaced (with a notice) after the server killed it or it left a
//! batch unanswered for the response timeout, PostgreSQL notifications on the listening
//! connection and its replacement, MySQL blocking waits on wait connections woken by a release
//! or by the holder's death, silent connections (the launcher's fault proxy) replaced, TLS as
//! asked, and no password in any error or `Debug` output. Servers from the
//! project's launcher (`test-servers postgres|mariadb`), one of each shared by the tests.

use std::sync::OnceLock;
use std::time::Instant;

use super::*;
use crate::backend::sql::Value::{Int, Null, Text};

#[path = "server.rs"]
mod server;
use server::{Server, TestServers};

fn postgres() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(Server::postgres)
}

fn mariadb() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(Server::mariadb)
}

fn endpoint(server: &Server, response_ms: u64) -> Endpoint {
    Endpoint {
        dialect: server.dialect,
        host: "127.0.0.1".into(),
        port: server.port,
        others: vec![],
        application_name: None,
        user: server.user.clone(),
        password: Some(server.password.clone()),
        database: server.database.clone(),
        tls: TlsMode::Off,
        tls_ca_pem: None,
        connect_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_millis(response_ms),
    }
}

async fn transport(server: &Server, response_ms: u64) -> (SqlTransport, mpsc::UnboundedReceiver<SqlNotice>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (SqlTransport::connect(endpoint(server, response_ms), Schema::default_for(server.dialect), tx).await.expect("connect"), rx)
}

fn st(sql: &str, params: Vec<Value>) -> Statement {
    Statement { sql: sql.into(), params }
}

fn batch(conn: Conn, statements: Vec<Statement>) -> Batch {
    Batch { conn, statements }
}

/// A table name no other test or run uses.
fn table(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("t_{tag}_{}_{n}", std::process::id())
}

/// The placeholder of parameter `i` (1-based) in `dialect`.
fn ph(dialect: Dialect, i: usize) -> String {
    match dialect {
        Dialect::Postgres => format!("${i}"),
        Dialect::MySql => "?".into(),
    }
}

async fn one(t: &SqlTransport, conn: Conn, sql: &str, params: Vec<Value>) -> Rows {
    let mut r = t.execute(batch(conn, vec![st(sql, params)])).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    r.remove(0)
}

/// This session's id on the server (`pg_backend_pid()` / `CONNECTION_ID()`).
async fn session_id(t: &SqlTransport, conn: Conn) -> i64 {
    let sql = match t.dialect() {
        Dialect::Postgres => "SELECT pg_backend_pid()",
        Dialect::MySql => "SELECT CONNECTION_ID()",
    };
    one(t, conn, sql, vec![]).await.rows[0][0].as_int().expect("an id")
}

async fn kill(admin: &SqlTransport, id: i64) {
    match admin.dialect() {
        Dialect::Postgres => {
            let r = one(admin, Conn::Main, "SELECT pg_terminate_backend($1)", vec![Int(id)]).await;
            assert_eq!(r.rows[0][0], Text("true".into()));
        }
        Dialect::MySql => {
            one(admin, Conn::Main, &format!("KILL {id}"), vec![]).await;
        }
    }
}

async fn next_notice(rx: &mut mpsc::UnboundedReceiver<SqlNotice>, within: Duration) -> Option<SqlNotice> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

async fn batches_run_in_order_with_values_bound_and_converted(server: &Server) {
    let (t, _rx) = transport(server, 5000).await;
    let d = server.dialect;
    let name = table("values");
    let key = match d {
        Dialect::Postgres => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        Dialect::MySql => "BIGINT AUTO_INCREMENT PRIMARY KEY",
    };
    let r = t
        .execute(batch(
            Conn::Main,
            vec![
                st(&format!("CREATE TABLE {name} (id {key}, k VARCHAR(255) NOT NULL UNIQUE, n INT, v TEXT NULL)"), vec![]),
                st(&format!("INSERT INTO {name} (k, n, v) VALUES ({}, {}, {})", ph(d, 1), ph(d, 2), ph(d, 3)), vec![Text("a".into()), Int(7), Null]),
                st(&format!("INSERT INTO {name} (k, n, v) VALUES ({}, {}, {})", ph(d, 1), ph(d, 2), ph(d, 3)), vec![Text("b".into()), Int(-3), Text("x y".into())]),
                st(&format!("UPDATE {name} SET n = n + 1 WHERE n > {}", ph(d, 1)), vec![Int(-100)]),
                st(&format!("SELECT id, k, n, v, n * 1.5, n > 0 FROM {name} ORDER BY id"), vec![]),
                st(&format!("SELECT COUNT(*) FROM {name} WHERE k = {}", ph(d, 1)), vec![Text("b".into())]),
            ],
        ))
        .await
        .expect("the batch");
    assert_eq!(r.len(), 6);
    assert_eq!((r[1].affected, r[2].affected, r[3].affected), (1, 1, 2));
    assert_eq!(r[4].affected, 0, "a query changes nothing");
    let rows = &r[4].rows;
    assert_eq!(rows.len(), 2);
    let id = rows[0][0].as_int().expect("an integer id");
    assert_eq!(rows[1][0], Int(id + 1), "ids grow");
    assert_eq!(rows[0][1..4], [Text("a".into()), Int(8), Null]);
    assert_eq!(rows[1][1..4], [Text("b".into()), Int(-2), Text("x y".into())]);
    // A decimal comes back as text that reads as a number; a boolean as text (PostgreSQL) or an
    // integer (MySQL has no boolean type).
    assert_eq!(rows[0][4].as_text().map(|t| t.trim_end_matches('0')), Some("12."), "{:?}", rows[0][4]);
    match d {
        Dialect::Postgres => assert_eq!((&rows[0][5], &rows[1][5]), (&Text("true".into()), &Text("false".into()))),
        Dialect::MySql => assert_eq!((&rows[0][5], &rows[1][5]), (&Int(1), &Int(0))),
    }
    assert_eq!(r[5].rows, vec![vec![Int(1)]]);
}

async fn the_first_failure_ends_a_batch_with_the_servers_code(server: &Server) {
    let (t, _rx) = transport(server, 5000).await;
    let d = server.dialect;
    let name = table("fail");
    one(&t, Conn::Main, &format!("CREATE TABLE {name} (k VARCHAR(64) PRIMARY KEY)"), vec![]).await;
    let insert = |k: &str| st(&format!("INSERT INTO {name} (k) VALUES ({})", ph(d, 1)), vec![Text(k.into())]);
    let e = t.execute(batch(Conn::Main, vec![insert("a"), insert("a"), insert("b")])).await.expect_err("a duplicate key");
    let code = match d {
        Dialect::Postgres => "23505",
        Dialect::MySql => "1062",
    };
    match &e {
        SqlFailure::Server { code: c, message } => assert!(c == code && !message.is_empty(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    // Autocommit: the first insert stays, the one after the failure never ran.
    let r = one(&t, Conn::Main, &format!("SELECT k FROM {name} ORDER BY k"), vec![]).await;
    assert_eq!(r.rows, vec![vec![Text("a".into())]]);
    // A failure inside a batch's transaction rolls it back: its first insert is gone, and the
    // next batch runs outside any transaction.
    let tx = vec![st("BEGIN", vec![]), insert("c"), insert("a"), st("COMMIT", vec![])];
    match t.execute(batch(Conn::Main, tx)).await {
        Err(SqlFailure::Server { code: c, .. }) => assert_eq!(c, code),
        other => panic!("{other:?}"),
    }
    let r = t.execute(batch(Conn::Main, vec![insert("d"), st("ROLLBACK", vec![])])).await;
    assert!(r.is_ok(), "{r:?}");
    let r = one(&t, Conn::Main, &format!("SELECT k FROM {name} ORDER BY k"), vec![]).await;
    assert_eq!(r.rows, vec![vec![Text("a".into())], vec![Text("d".into())]], "c rolled back, d committed on its own");
    // A syntax error is the server's refusal too, and the connection stays usable.
    let id = session_id(&t, Conn::Main).await;
    match t.execute(batch(Conn::Main, vec![st("SELEKT 1", vec![])])).await {
        Err(SqlFailure::Server { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(session_id(&t, Conn::Main).await, id);
}

async fn a_killed_main_connection_is_replaced_with_a_notice(server: &Server) {
    let (t, mut rx) = transport(server, 5000).await;
    let (admin, _arx) = transport(server, 5000).await;
    let first = session_id(&t, Conn::Main).await;
    assert_eq!(session_id(&t, Conn::Main).await, first, "one main connection");
    kill(&admin, first).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The batch that finds the connection gone fails as lost (never retried), or the
    // transport already knew and opened a new one; either way a later batch runs on a new
    // connection, announced first.
    let second = match t.execute(batch(Conn::Main, vec![st("SELECT 1", vec![])])).await {
        Err(SqlFailure::ConnectionLost(why)) => {
            assert!(!why.contains(&server.password), "{why}");
            session_id(&t, Conn::Main).await
        }
        Ok(_) => session_id(&t, Conn::Main).await,
        Err(other) => panic!("{other:?}"),
    };
    assert_ne!(second, first);
    assert_eq!(next_notice(&mut rx, Duration::from_secs(1)).await, Some(SqlNotice::Reconnected { conn: Conn::Main }));
    assert_eq!(session_id(&t, Conn::Main).await, second);
    assert!(rx.try_recv().is_err(), "one notice per replacement");
}

async fn an_unanswered_batch_is_lost_in_the_response_timeout(server: &Server) {
    let (t, mut rx) = transport(server, 400).await;
    let first = session_id(&t, Conn::Main).await;
    let sleep = match server.dialect {
        Dialect::Postgres => "SELECT pg_sleep(3)",
        Dialect::MySql => "SELECT SLEEP(3)",
    };
    let started = Instant::now();
    match t.execute(batch(Conn::Main, vec![st(sleep, vec![])])).await {
        Err(SqlFailure::ConnectionLost(why)) => assert!(why.contains("response timeout"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
    assert_ne!(session_id(&t, Conn::Main).await, first, "the silent connection was replaced");
    assert_eq!(next_notice(&mut rx, Duration::from_secs(1)).await, Some(SqlNotice::Reconnected { conn: Conn::Main }));
}

async fn passwords_never_show(server: &Server) {
    let mut e = endpoint(server, 2000);
    e.password = Some("Wrong-pw-77".into());
    let (tx, _rx) = mpsc::unbounded_channel();
    let err = SqlTransport::connect(e.clone(), Schema::default_for(e.dialect), tx.clone()).await.expect_err("a wrong password");
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
    let shown = format!("{err} {err:?} {e:?}");
    assert!(!shown.contains("Wrong-pw-77"), "{shown}");
    let (t, _rx) = transport(server, 2000).await;
    let shown = format!("{t:?}");
    assert!(!shown.contains(&server.password) && shown.contains(&server.port.to_string()), "{shown}");
    // Nothing listens on port 1: a connection failure, with the server named but no password.
    e.port = 1;
    e.password = Some(server.password.clone());
    let err = SqlTransport::connect(e, Schema::default_for(Dialect::Postgres), tx).await.expect_err("nothing listens");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(!format!("{err} {err:?}").contains(&server.password), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_batches() {
    let s = postgres();
    batches_run_in_order_with_values_bound_and_converted(s).await;
    the_first_failure_ends_a_batch_with_the_servers_code(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_batches() {
    let s = mariadb();
    batches_run_in_order_with_values_bound_and_converted(s).await;
    the_first_failure_ends_a_batch_with_the_servers_code(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connections() {
    let s = postgres();
    a_killed_main_connection_is_replaced_with_a_notice(s).await;
    an_unanswered_batch_is_lost_in_the_response_timeout(s).await;
    passwords_never_show(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_connections() {
    let s = mariadb();
    a_killed_main_connection_is_replaced_with_a_notice(s).await;
    an_unanswered_batch_is_lost_in_the_response_timeout(s).await;
    passwords_never_show(s).await;
}

/// PostgreSQL: a DBA's statement timeout surfaces as SQLSTATE 57014 and leaves the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_statement_timeout_is_the_servers_code() {
    let (t, _rx) = transport(postgres(), 5000).await;
    let id = session_id(&t, Conn::Main).await;
    let r = t.execute(batch(Conn::Main, vec![st("SET statement_timeout = 100", vec![]), st("SELECT pg_sleep(2)", vec![])])).await;
    match r {
        Err(SqlFailure::Server { code, .. }) => assert_eq!(code, "57014"),
        other => panic!("{other:?}"),
    }
    assert_eq!(session_id(&t, Conn::Main).await, id);
}

/// PostgreSQL: notifications on the listening connection are pushed; when the server ends that
/// connection the transport opens another at once and says so (the backend listens again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_notifications_and_a_replaced_listener() {
    let (t, mut rx) = transport(postgres(), 2000).await;
    let (admin, _arx) = transport(postgres(), 2000).await;
    let channel = table("wake");
    one(&t, Conn::Listen, &format!("LISTEN {channel}"), vec![]).await;
    one(&t, Conn::Main, "SELECT pg_notify($1, $2)", vec![Text(channel.clone()), Text("mutex/a".into())]).await;
    let n = next_notice(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(n, Some(SqlNotice::Notified { channel: channel.clone(), payload: "mutex/a".into() }));
    let listener = session_id(&t, Conn::Listen).await;
    assert_ne!(listener, session_id(&t, Conn::Main).await, "two connections");
    kill(&admin, listener).await;
    let n = next_notice(&mut rx, Duration::from_secs(3)).await;
    assert_eq!(n, Some(SqlNotice::Reconnected { conn: Conn::Listen }), "replaced at once, without a batch");
    // The new connection listens once told to.
    one(&t, Conn::Listen, &format!("LISTEN {channel}"), vec![]).await;
    assert_ne!(session_id(&t, Conn::Listen).await, listener);
    one(&admin, Conn::Main, "SELECT pg_notify($1, $2)", vec![Text(channel.clone()), Text("mutex/b".into())]).await;
    let n = next_notice(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(n, Some(SqlNotice::Notified { channel, payload: "mutex/b".into() }));
    // MySQL has no listening connection.
    let (my, _mrx) = transport(mariadb(), 2000).await;
    match my.execute(batch(Conn::Listen, vec![st("SELECT 1", vec![])])).await {
        Err(SqlFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::InvalidArgument),
        other => panic!("{other:?}"),
    }
}

/// MySQL/MariaDB: a blocking `GET_LOCK` on a wait connection is woken by the holder's
/// `RELEASE_LOCK` and by the holder's connection being killed; at most
/// `MAX_WAIT_CONNECTIONS` idle wait connections are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_waits_are_woken_by_release_and_by_death() {
    let (holder, _hrx) = transport(mariadb(), 2000).await;
    let (waiter, _wrx) = transport(mariadb(), 500).await;
    let (admin, _arx) = transport(mariadb(), 2000).await;
    let bell = format!("lockgate:{}", table("bell"));
    let take = |t: i64| st("SELECT GET_LOCK(?, ?)", vec![Text(bell.clone()), Int(t)]);
    let r = holder.execute(batch(Conn::Main, vec![take(0)])).await.unwrap();
    assert_eq!(r[0].rows, vec![vec![Int(1)]]);
    // Woken by the release, long before its own 20 s (and far past the response timeout:
    // a wait's limit is its own wait plus the response timeout).
    let wait = waiter.execute(batch(Conn::Wait, vec![take(20), st("SELECT RELEASE_LOCK(?)", vec![Text(bell.clone())])]));
    let wait = tokio::spawn(wait);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!wait.is_finished(), "blocked while held");
    let released = Instant::now();
    holder.execute(batch(Conn::Main, vec![st("SELECT RELEASE_LOCK(?)", vec![Text(bell.clone())])])).await.unwrap();
    let r = wait.await.unwrap().expect("the wait");
    assert_eq!(r[0].rows, vec![vec![Int(1)]]);
    assert!(released.elapsed() < Duration::from_millis(500), "{:?}", released.elapsed());
    // Woken by the holder's death.
    holder.execute(batch(Conn::Main, vec![take(0)])).await.unwrap();
    let wait = tokio::spawn(waiter.execute(batch(Conn::Wait, vec![take(20), st("SELECT RELEASE_LOCK(?)", vec![Text(bell.clone())])])));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = Instant::now();
    kill(&admin, session_id(&holder, Conn::Main).await).await;
    let r = wait.await.unwrap().expect("the wait");
    assert_eq!(r[0].rows, vec![vec![Int(1)]]);
    assert!(killed.elapsed() < Duration::from_millis(500), "{:?}", killed.elapsed());
    // A timed-out wait answers 0 (the server's own timeout).
    admin.execute(batch(Conn::Main, vec![take(0)])).await.unwrap();
    let r = waiter.execute(batch(Conn::Wait, vec![take(1)])).await.expect("a timed-out wait");
    assert_eq!(r[0].rows, vec![vec![Int(0)]]);
    // Six waits at once: six connections, of which four stay idle afterwards.
    let waits: Vec<_> = (0..6).map(|_| tokio::spawn(waiter.execute(batch(Conn::Wait, vec![take(1)])))).collect();
    for w in waits {
        assert_eq!(w.await.unwrap().expect("a wait")[0].rows, vec![vec![Int(0)]]);
    }
    assert_eq!(waiter.shared.waits.lock().unwrap().len(), MAX_WAIT_CONNECTIONS);
}

/// MySQL/MariaDB: a batch of several statements is one script (parameters as literals, the text
/// protocol) whose results come back per statement, in order, converted as a prepared
/// statement's are; the first failing statement ends it (the rest never run) and a transaction
/// it opened is rolled back; text of any kind round-trips.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_batches_are_one_script() {
    let (t, _rx) = transport(mariadb(), 5000).await;
    let name = table("script");
    one(&t, Conn::Main, &format!("CREATE TABLE {name} (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(255) NOT NULL UNIQUE, n BIGINT NULL, v TEXT NULL) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"), vec![]).await;
    let prepared = |t: &SqlTransport| {
        let t = t.clone();
        async move {
            let r = one(&t, Conn::Main, "SHOW SESSION STATUS LIKE 'Com_stmt_execute'", vec![]).await;
            r.rows[0][1].as_int().expect("a count")
        }
    };
    let texts = ["it's", "a \"quote\"", "back\\slash\\", "`tick`", "what?", "semi; -- colon /* */ #", "é 鍵 🔒", "", "nul\0byte", "\\' OR 1=1 -- "];
    let insert = |k: &str, n: Value| st(&format!("INSERT INTO {name} (k, n, v) VALUES (?, ?, ?)"), vec![Text(k.into()), n, Text(k.into())]);
    let before = prepared(&t).await;
    let mut statements: Vec<Statement> = texts.iter().enumerate().map(|(i, k)| insert(k, Int(i as i64 - 5))).collect();
    statements.push(insert("min", Int(i64::MIN)));
    statements.push(insert("max", Int(i64::MAX)));
    statements.push(insert("null", Null));
    let select = format!("SELECT k, n, v, n * 1.5, n > 0, CHAR_LENGTH(k), k = ? FROM {name} WHERE k IN (?, ?) ORDER BY id");
    statements.push(st(&select, vec![Text("é 鍵 🔒".into()), Text("é 鍵 🔒".into()), Text("min".into())]));
    statements.push(st(&format!("SELECT COUNT(*) FROM {name}"), vec![]));
    let r = t.execute(batch(Conn::Main, statements.clone())).await.expect("the script");
    assert_eq!(prepared(&t).await, before, "the script ran as text: no statement executed prepared");
    assert_eq!(r.len(), statements.len());
    assert!(r[..texts.len() + 3].iter().all(|x| x.affected == 1 && x.rows.is_empty()), "{r:?}");
    let n = texts.len() + 3;
    assert_eq!(r[n + 1].rows, vec![vec![Int(n as i64)]]);
    // Every text reads back as it went in, through a prepared statement (the binary protocol).
    for (i, k) in texts.iter().enumerate() {
        let got = one(&t, Conn::Main, &format!("SELECT v, n FROM {name} WHERE k = ?"), vec![Text(k.to_string())]).await;
        assert_eq!(got.rows, vec![vec![Text(k.to_string()), Int(i as i64 - 5)]], "{k:?}");
    }
    // The script's rows convert exactly as the prepared statement's do.
    let before = prepared(&t).await;
    let alone = t.execute(batch(Conn::Main, vec![statements[n].clone()])).await.expect("one prepared statement");
    assert_eq!(r[n].rows, alone[0].rows);
    assert_eq!(prepared(&t).await, before + 1, "a statement alone runs prepared (so the count above means something)");
    assert_eq!(r[n].rows[1][..3], [Text("min".into()), Int(i64::MIN), Text("min".into())]);
    assert_eq!(r[n].rows[0][5..], [Int(5), Int(1)], "{:?}", r[n].rows[0]);
    let r = t.execute(batch(Conn::Main, vec![st(&format!("SELECT n, v FROM {name} WHERE k = ?"), vec![Text("max".into())]), st(&format!("SELECT n, v FROM {name} WHERE k = ?"), vec![Text("null".into())])])).await.unwrap();
    assert_eq!((r[0].rows.clone(), r[1].rows.clone()), (vec![vec![Int(i64::MAX), Text("max".into())]], vec![vec![Null, Text("null".into())]]));

    // A failing middle statement ends the script: the statements after it never run; a
    // transaction the batch opened is rolled back (its first insert gone, no transaction left
    // open, its row locks released).
    let tx = vec![st("BEGIN", vec![]), insert("tx-a", Null), insert("it's", Null), insert("tx-b", Null), st("COMMIT", vec![])];
    match t.execute(batch(Conn::Main, tx)).await {
        Err(SqlFailure::Server { code, .. }) => assert_eq!(code, "1062"),
        other => panic!("{other:?}"),
    }
    let r = t.execute(batch(Conn::Main, vec![st("SELECT @@in_transaction", vec![]), st(&format!("SELECT COUNT(*) FROM {name} WHERE k LIKE 'tx-%'"), vec![])])).await.unwrap();
    assert_eq!((r[0].rows.clone(), r[1].rows.clone()), (vec![vec![Int(0)]], vec![vec![Int(0)]]));
    let (other, _orx) = transport(mariadb(), 5000).await;
    let r = other.execute(batch(Conn::Main, vec![st("SET SESSION innodb_lock_wait_timeout = 1", vec![]), insert("tx-a", Null)])).await;
    assert!(r.is_ok(), "the rolled-back insert's lock was released: {r:?}");
    // Without a transaction the statements before the failure stay.
    let r = t.execute(batch(Conn::Main, vec![insert("auto-a", Null), insert("it's", Null), insert("auto-b", Null)])).await;
    assert!(matches!(&r, Err(SqlFailure::Server { code, .. }) if code == "1062"), "{r:?}");
    let r = one(&t, Conn::Main, &format!("SELECT k FROM {name} WHERE k LIKE 'auto-%'"), vec![]).await;
    assert_eq!(r.rows, vec![vec![Text("auto-a".into())]]);
    // A statement that is not one statement, or whose parameters do not fit, is refused before
    // anything is sent.
    match t.execute(batch(Conn::Main, vec![st("SELECT 1", vec![]), st("SELECT ?", vec![])])).await {
        Err(SqlFailure::Other(e)) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wait_is_bounded_by_its_own_wait_and_the_response_timeout() {
    let s = |params: Vec<Value>| st("SELECT GET_LOCK(?, ?)", params);
    let response = Duration::from_millis(500);
    assert_eq!(wait_limit(&[s(vec![Text("lockgate:x".into()), Int(7)])], response), Duration::from_millis(7500));
    assert_eq!(wait_limit(&[s(vec![Text("lockgate:x".into()), Text("0.25".into())])], response), Duration::from_millis(750));
    assert_eq!(wait_limit(&[s(vec![Null, Int(-1)])], response), response);
}

#[test]
fn transactions_are_recognized_by_their_first_statement() {
    assert!(begins_transaction("BEGIN") && begins_transaction(" begin;") && begins_transaction("START TRANSACTION"));
    assert!(begins_transaction("BEGIN ISOLATION LEVEL SERIALIZABLE"));
    assert!(!begins_transaction("SELECT 1") && !begins_transaction("START SLAVE") && !begins_transaction("BEGINNING"));
}

/// PostgreSQL over TLS: `verify-full` with the CA that signed the server's certificate is
/// encrypted; without it (the system's roots) the handshake is refused as a `CONNECTION` error
/// that says so; `require` encrypts without checking; `Off` stays plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_is_verified_when_asked() {
    let server = Server::postgres_tls();
    let ca = std::fs::read(server.ca_file.as_deref().expect("the launcher's CA")).unwrap();
    let encrypted = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    let with = |tls: TlsMode, ca: Option<Vec<u8>>| {
        let mut e = endpoint(&server, 5000);
        e.tls = tls;
        e.tls_ca_pem = ca;
        e
    };
    for (mode, ca, ssl) in [
        (TlsMode::VerifyFull, Some(ca.clone()), "true"),
        (TlsMode::VerifyCa, Some(ca.clone()), "true"),
        (TlsMode::Require, None, "true"),
        (TlsMode::Prefer, None, "true"),
        (TlsMode::Off, None, "false"),
    ] {
        let (tx, _rx) = mpsc::unbounded_channel();
        let t = SqlTransport::connect(with(mode.clone(), ca), Schema::default_for(Dialect::Postgres), tx).await.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(one(&t, Conn::Main, encrypted, vec![]).await.rows, vec![vec![Text(ssl.into())]], "{mode:?}");
    }
    let (tx, _rx) = mpsc::unbounded_channel();
    let e = SqlTransport::connect(with(TlsMode::VerifyFull, None), Schema::default_for(Dialect::Postgres), tx).await.expect_err("not signed by a system root");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("TLS") && !e.message().contains(&server.password), "{e}");
    let (tx, _rx) = mpsc::unbounded_channel();
    let e = SqlTransport::connect(with(TlsMode::VerifyFull, Some(b"not pem".to_vec())), Schema::default_for(Dialect::Postgres), tx).await.expect_err("no CA");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// MariaDB over TLS (sqlx's rustls): `VERIFY_IDENTITY` and `VERIFY_CA` with the CA that signed
/// the server's certificate, `REQUIRED` and `PREFERRED` encrypted, `DISABLED` plain; without
/// the CA (Mozilla's roots) the handshake is refused as a `CONNECTION` error that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_tls_is_verified_when_asked() {
    let server = Server::mariadb_tls();
    let ca = std::fs::read(server.ca_file.as_deref().expect("the launcher's CA")).unwrap();
    let with = |tls: TlsMode, ca: Option<Vec<u8>>| {
        let mut e = endpoint(&server, 5000);
        e.tls = tls;
        e.tls_ca_pem = ca;
        e
    };
    for (mode, ca, encrypted) in [
        (TlsMode::VerifyFull, Some(ca.clone()), true),
        (TlsMode::VerifyCa, Some(ca.clone()), true),
        (TlsMode::Require, None, true),
        (TlsMode::Prefer, None, true),
        (TlsMode::Off, None, false),
    ] {
        let (tx, _rx) = mpsc::unbounded_channel();
        let t = SqlTransport::connect(with(mode.clone(), ca), Schema::default_for(Dialect::MySql), tx).await.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let r = one(&t, Conn::Main, "SHOW SESSION STATUS LIKE 'Ssl_cipher'", vec![]).await;
        let cipher = r.rows[0][1].as_text().unwrap_or_default().to_string();
        assert_eq!(!cipher.is_empty(), encrypted, "{mode:?}: {cipher:?}");
    }
    let (tx, _rx) = mpsc::unbounded_channel();
    let e = SqlTransport::connect(with(TlsMode::VerifyFull, None), Schema::default_for(Dialect::MySql), tx).await.expect_err("not signed by Mozilla's roots");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("TLS") && !e.message().contains(&server.password), "{e}");
}

/// PostgreSQL through the launcher's fault proxy, whose `silence` leaves the connections open
/// but forwards nothing: a main batch is lost within the response timeout and the next one runs
/// on a new connection; the listening connection, which carries no batch, is found silent by
/// its ping and replaced by itself, and notifications flow again once the backend listens anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_silent_connections_are_replaced() {
    let mut servers = TestServers::start(&["postgres", "--proxied"]);
    let e = Endpoint {
        dialect: Dialect::Postgres,
        host: "127.0.0.1".into(),
        port: servers.info["nodes"][0]["proxy_port"].as_u64().expect("proxy_port") as u16,
        others: vec![],
        application_name: None,
        user: servers.info["user"].as_str().unwrap().into(),
        password: servers.info["password"].as_str().map(str::to_string),
        database: servers.info["database"].as_str().map(str::to_string),
        tls: TlsMode::Off,
        tls_ca_pem: None,
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_millis(500),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let t = SqlTransport::connect(e, Schema::default_for(Dialect::Postgres), tx).await.expect("connect through the proxy");
    let channel = table("silent");
    one(&t, Conn::Listen, &format!("LISTEN {channel}"), vec![]).await;
    let main = session_id(&t, Conn::Main).await;
    servers.command("silence");
    let started = Instant::now();
    match t.execute(batch(Conn::Main, vec![st("SELECT 1", vec![])])).await {
        Err(SqlFailure::ConnectionLost(why)) => assert!(why.contains("response timeout"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
    assert_ne!(session_id(&t, Conn::Main).await, main, "a new main connection");
    let mut seen = Vec::new();
    let deadline = Instant::now() + PING_INTERVAL + Duration::from_secs(4);
    while seen.len() < 2 && Instant::now() < deadline {
        if let Some(n) = next_notice(&mut rx, Duration::from_millis(200)).await {
            seen.push(n);
        }
    }
    assert!(seen.contains(&SqlNotice::Reconnected { conn: Conn::Main }), "{seen:?}");
    assert!(seen.contains(&SqlNotice::Reconnected { conn: Conn::Listen }), "the silent listener replaced by its ping: {seen:?}");
    one(&t, Conn::Listen, &format!("LISTEN {channel}"), vec![]).await;
    one(&t, Conn::Main, "SELECT pg_notify($1, $2)", vec![Text(channel.clone()), Text("again".into())]).await;
    let n = next_notice(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(n, Some(SqlNotice::Notified { channel, payload: "again".into() }));
}
