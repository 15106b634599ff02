//! Test servers for the SQL transport's tests: Debian's PostgreSQL 15 and MariaDB 10.11 on a
//! free loopback port with a data directory of their own, each started under a small shell
//! that stops exactly that server (by its pid) when this test process exits (its stdin
//! closes). Used until the project's launcher (`test-servers postgres|mariadb`) is built.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sql::Dialect;

/// One running server. Dropping it (or this process ending) stops it.
pub(super) struct Server {
    pub(super) dialect: Dialect,
    pub(super) port: u16,
    /// A login with every right (PostgreSQL's `postgres`, MariaDB's `app`).
    pub(super) user: String,
    pub(super) database: Option<String>,
    _guard: Child,
    _stdin: ChildStdin,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn work_dir(tag: &str) -> PathBuf {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("lockgate-sqlnative-{tag}-{}-{t}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// Runs `command` (a shell line) in the background under a guard shell that prints its pid
/// and sends it `signal` (PostgreSQL's fast shutdown is INT, MariaDB's is TERM: it ignores
/// INT) once its stdin closes.
fn guarded(command: &str, signal: &str) -> (Child, ChildStdin) {
    let script = format!("{command} & pid=$!; echo $pid; read _; kill -{signal} $pid; wait $pid");
    let mut child = Command::new("sh").arg("-c").arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.trim().parse::<u32>().is_ok(), "no pid: {line:?}");
    (child, stdin)
}

fn await_port(port: u16, log: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the server did not start: {}", std::fs::read_to_string(log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Server {
    /// PostgreSQL with password (SCRAM) logins over TCP; `postgres` has `password`.
    pub(super) fn postgres(password: &str) -> Server {
        let dir = work_dir("pg");
        let data = dir.join("data");
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, format!("{password}\n")).unwrap();
        run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir), "chown");
        let bin = |tool: &str| format!("/usr/lib/postgresql/15/bin/{tool}");
        run(
            Command::new("setpriv")
                .args(["--reuid=postgres", "--regid=postgres", "--init-groups", &bin("initdb")])
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256"])
                .arg(format!("--pwfile={}", pwfile.display())),
            "initdb",
        );
        let port = free_port();
        let log = dir.join("server.log");
        let line = format!(
            "setpriv --reuid=postgres --regid=postgres --init-groups {} -D {} -p {port} -k {} -c listen_addresses=127.0.0.1 \
             -c fsync=off -c max_connections=200 >>{} 2>&1",
            bin("postgres"),
            data.display(),
            dir.display(),
            log.display()
        );
        let (guard, stdin) = guarded(&line, "INT");
        await_port(port, &log);
        Server { dialect: Dialect::Postgres, port, user: "postgres".into(), database: Some("postgres".into()), _guard: guard, _stdin: stdin }
    }

    /// MariaDB with a user `app` (every right, `password`) and a database `lockgate`.
    pub(super) fn mariadb(password: &str) -> Server {
        let dir = work_dir("maria");
        let data = dir.join("data");
        run(Command::new("chown").args(["-R", "mysql:mysql"]).arg(&dir), "chown");
        run(
            Command::new("mariadb-install-db")
                .args(["--user=mysql", "--auth-root-authentication-method=normal", "--skip-test-db"])
                .arg(format!("--datadir={}", data.display())),
            "mariadb-install-db",
        );
        let port = free_port();
        let log = dir.join("server.log");
        let line = format!(
            "mariadbd --no-defaults --user=mysql --datadir={} --port={port} --bind-address=127.0.0.1 --socket={}/sock \
             --pid-file={}/pid --skip-log-bin --skip-name-resolve --innodb-buffer-pool-size=32M --performance-schema=OFF \
             --innodb-flush-log-at-trx-commit=0 >>{} 2>&1",
            data.display(),
            dir.display(),
            dir.display(),
            log.display()
        );
        let (guard, stdin) = guarded(&line, "TERM");
        await_port(port, &log);
        let sql = format!(
            "CREATE DATABASE lockgate; CREATE USER 'app'@'%' IDENTIFIED BY '{password}'; GRANT ALL ON *.* TO 'app'@'%' WITH GRANT OPTION;"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("mariadb").args(["-h127.0.0.1", &format!("-P{port}"), "-uroot", "-e", &sql]).output().unwrap();
            if out.status.success() {
                break;
            }
            assert!(Instant::now() < deadline, "mariadb: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(Duration::from_millis(200));
        }
        Server { dialect: Dialect::MySql, port, user: "app".into(), database: Some("lockgate".into()), _guard: guard, _stdin: stdin }
    }
}
