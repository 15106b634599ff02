//! Throwaway SQL servers from Debian's packages: PostgreSQL 15 (`postgresql`) and MariaDB 10.11
//! (`mariadb-server`), each one server on a free loopback port with its data, socket and log in
//! a temp dir, started here and stopped by its own pid (never by name).
//!
//! Every server has a database `lockgate` owned by a user `lockgate` (password
//! [`PASSWORD`]; what the tests' clients use) and an administrator (`postgres` / `root`, password
//! [`ADMIN_PASSWORD`]; what fixtures use to inspect rows and end other sessions). Over TCP every
//! login needs its password (PostgreSQL `scram-sha-256`, MariaDB's native passwords), so a wrong
//! one is refused as in production.
//!
//! Why a template: `initdb` takes about a second here and `mariadb-install-db` about three, while
//! a started server is ready in a few hundred milliseconds. So the first server of an engine
//! in a run (`$LOCKGATE_TMP`) initializes a data directory once, with the database and users,
//! and every server copies it (`cp -a`, ~25-40 MB).
//!
//! Durability is traded for speed as the other test servers do: PostgreSQL runs with `fsync=off`
//! and MariaDB with `innodb_flush_log_at_trx_commit=2`: every commit is written to the kernel,
//! never synced, so a server killed with SIGKILL keeps every committed row (only a machine crash
//! would lose some), and a restart on the same data directory (`restart I`) is a real crash
//! recovery with the data kept.
//!
//! Run as root (this machine, CI), the servers run as Debian's `postgres` / `mysql` accounts
//! (PostgreSQL refuses to run as root): the data directory is theirs, and the temp dirs above it
//! must let them pass (see [`traversable`]). Run as anyone else, they run as that user.
//!
//! A PostgreSQL server may get a [`PgBouncer`] in front of it (Debian's `pgbouncer` 1.18, in
//! session or transaction mode): the pooler real deployments put between clients and the
//! server, whose transaction mode cannot carry `LISTEN` (PROTOCOL.md §11).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::process::{send, Ports, ServerProcess};

/// The database every server has.
pub const DATABASE: &str = "lockgate";
/// The user clients log in as (owner of [`DATABASE`]).
pub const USER: &str = "lockgate";
/// Its password.
pub const PASSWORD: &str = "lockgate-test-pw";
/// The administrator's password (`postgres` / `root` over TCP).
pub const ADMIN_PASSWORD: &str = "lockgate-admin-pw";
/// How long a server may take from its start to accepting connections (crash recovery on a
/// loaded 2-core machine included).
const READY_LIMIT: Duration = Duration::from_secs(60);
/// Bumped when what a template holds changes, so an old one left under the temp dir is not used.
const TEMPLATE_VERSION: u32 = 1;

/// Which database server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// PostgreSQL 15.
    Postgres,
    /// MariaDB 10.11 (the MySQL dialect).
    MariaDb,
}

impl Engine {
    /// The launcher kind's name: `postgres`, `mariadb`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::MariaDb => "mariadb",
        }
    }

    /// The URL scheme clients are given (`mysql://` for MariaDB: both it and `mariadb://`
    /// select the MySQL dialect).
    pub fn scheme(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::MariaDb => "mysql",
        }
    }

    /// The administrator's login.
    pub fn admin_user(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::MariaDb => "root",
        }
    }

    /// The OS account the server runs as when the launcher is root.
    fn os_user(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::MariaDb => "mysql",
        }
    }

    /// What provides the binaries, for errors.
    fn install(self) -> &'static str {
        match self {
            Engine::Postgres => "apt-get install postgresql",
            Engine::MariaDb => "apt-get install mariadb-server",
        }
    }
}

/// PostgreSQL's bin directory (`LOCKGATE_PG_BIN` overrides Debian's).
fn pg_bin(tool: &str) -> PathBuf {
    let dir = std::env::var_os("LOCKGATE_PG_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    dir.join(tool)
}

/// The MariaDB server binary (`LOCKGATE_MARIADBD` overrides it; Debian puts it in /usr/sbin,
/// which a normal user's PATH may lack).
fn mariadbd() -> PathBuf {
    if let Some(p) = std::env::var_os("LOCKGATE_MARIADBD") {
        return PathBuf::from(p);
    }
    let debian = PathBuf::from("/usr/sbin/mariadbd");
    if debian.exists() {
        debian
    } else {
        PathBuf::from("mariadbd")
    }
}

/// The uid and gid to run `engine`'s programs as: its Debian account when this process is root,
/// else none (run as we are).
fn account(engine: Engine) -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = std::ffi::CString::new(engine.os_user()).map_err(|e| e.to_string())?;
    // SAFETY: getpwnam with a valid C string; the record is read at once, before any other
    // getpw* call of this thread.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(format!("no {} account to run the server as ({})", engine.os_user(), engine.install()));
    }
    // SAFETY: pw is a valid passwd record (checked above).
    Ok(Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) }))
}

/// A command for `engine`'s program, run as its account (see [`account`]).
fn command(program: &Path, who: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    if let Some((uid, gid)) = who {
        // std also drops root's supplementary groups when it changes the uid.
        cmd.uid(uid).gid(gid);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to its end (feeding `input` on stdin); its output as the error if it fails.
fn run(mut cmd: Command, input: Option<&str>, what: &str, install: &str) -> Result<String, String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {what} ({install}): {e}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(|e| format!("{what}: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("{what}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        let tail: Vec<&str> = text.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        Err(format!("{what} failed ({}): {}", out.status, tail.join(" | ")))
    }
}

/// Gives `path` and everything under it to `who`.
fn chown_tree(path: &Path, who: Option<(u32, u32)>) -> Result<(), String> {
    let Some((uid, gid)) = who else { return Ok(()) };
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(|e| format!("chown {}: {e}", path.display()))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))? {
            chown_tree(&entry.map_err(|e| e.to_string())?.path(), who)?;
        }
    }
    Ok(())
}

/// The directory temp dirs are made in (`$LOCKGATE_TMP`, else the system's).
fn temp_base() -> PathBuf {
    std::env::var_os("LOCKGATE_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir)
}

/// Lets the server's account reach `dir`: every directory from the temp base down to it gets
/// the others' search bit (not read: nothing is listed), since `./run`'s `mktemp -d` base is
/// private to root. Directories above the base are left alone: one there that blocks the way is
/// an error that says so.
fn traversable(dir: &Path, who: Option<(u32, u32)>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if who.is_none() {
        return Ok(());
    }
    let base = temp_base();
    for d in dir.ancestors() {
        let meta = std::fs::metadata(d).map_err(|e| format!("{}: {e}", d.display()))?;
        if meta.permissions().mode() & 0o001 == 0 {
            if !d.starts_with(&base) {
                return Err(format!("{} is not searchable by others, so the database's account cannot reach {}: set LOCKGATE_TMP elsewhere", d.display(), dir.display()));
            }
            let mode = meta.permissions().mode() | 0o001;
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).map_err(|e| format!("chmod {}: {e}", d.display()))?;
        }
    }
    Ok(())
}

/// The server's version line (`postgres --version`, `mariadbd --version`): names the template,
/// so a template of another server version is never used.
fn version(engine: Engine) -> Result<String, String> {
    let program = match engine {
        Engine::Postgres => pg_bin("postgres"),
        Engine::MariaDb => mariadbd(),
    };
    let mut cmd = Command::new(&program);
    cmd.arg("--version");
    let text = run(cmd, None, &format!("{} --version", program.display()), engine.install())?;
    Ok(text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect::<String>().trim_matches('-').chars().take(80).collect())
}

/// The initialized data directory every server of `engine` copies, made on first use within a
/// temp base (one run). Two launchers starting at once may both make one; the first rename
/// wins and the other's is removed.
fn template(engine: Engine, who: Option<(u32, u32)>) -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = temp_base();
    let name = format!("lockgate-{}-template-{TEMPLATE_VERSION}-{}", engine.name(), version(engine)?);
    let done = base.join(&name);
    if done.join("ready").exists() {
        return Ok(done.join("data"));
    }
    let work = base.join(format!("{name}.{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let made = (|| {
        traversable(&work, who)?;
        chown_tree(&work, who)?;
        match engine {
            Engine::Postgres => init_postgres(&work, who)?,
            Engine::MariaDb => init_mariadb(&work, who)?,
        }
        std::fs::write(work.join("ready"), "").map_err(|e| e.to_string())
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&work);
        return Err(format!("{} template: {e}", engine.name()));
    }
    if std::fs::rename(&work, &done).is_err() {
        // Another launcher's template got there first.
        let _ = std::fs::remove_dir_all(&work);
        if !done.join("ready").exists() {
            return Err(format!("{}: cannot place the template", done.display()));
        }
    }
    Ok(done.join("data"))
}

/// `initdb` (the superuser `postgres` with [`ADMIN_PASSWORD`], passwords over TCP, trust on the
/// server's own socket), then the user and database, in single-user mode (no server to start).
fn init_postgres(work: &Path, who: Option<(u32, u32)>) -> Result<(), String> {
    let pwfile = work.join("admin-password");
    std::fs::write(&pwfile, format!("{ADMIN_PASSWORD}\n")).map_err(|e| e.to_string())?;
    chown_tree(&pwfile, who)?;
    let mut init = command(&pg_bin("initdb"), who);
    init.arg("-D").arg(work.join("data")).args(["-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "-N", "-E", "UTF8", "--locale=C"]);
    init.arg(format!("--pwfile={}", pwfile.display()));
    run(init, None, "initdb", Engine::Postgres.install())?;
    let _ = std::fs::remove_file(&pwfile);
    let mut single = command(&pg_bin("postgres"), who);
    single.arg("--single").arg("-D").arg(work.join("data")).args(["-F", "-c", "exit_on_error=on", "postgres"]);
    let sql = format!("CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}';\nCREATE DATABASE {DATABASE} OWNER {USER};\n");
    let out = run(single, Some(&sql), "postgres --single", Engine::Postgres.install())?;
    if out.contains("ERROR:") || out.contains("FATAL:") {
        return Err(format!("creating the database: {}", out.lines().filter(|l| l.contains("ERROR") || l.contains("FATAL")).collect::<Vec<_>>().join(" | ")));
    }
    Ok(())
}

/// `mariadb-install-db`, then the user, the database and root's password over TCP, in
/// bootstrap mode (no server to start).
fn init_mariadb(work: &Path, who: Option<(u32, u32)>) -> Result<(), String> {
    let data = work.join("data");
    let mut install = command(Path::new("mariadb-install-db"), None);
    install.arg("--no-defaults").arg(format!("--datadir={}", data.display())).args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
    install.args(MARIADB_STORAGE);
    if who.is_some() {
        install.arg(format!("--user={}", Engine::MariaDb.os_user()));
    }
    run(install, None, "mariadb-install-db", Engine::MariaDb.install())?;
    chown_tree(&data, who)?;
    let mut boot = command(&mariadbd(), who);
    boot.arg("--no-defaults").arg("--bootstrap").arg(format!("--datadir={}", data.display())).args(MARIADB_STORAGE);
    let sql = format!(
        "FLUSH PRIVILEGES;\nCREATE DATABASE {DATABASE};\nCREATE OR REPLACE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';\n\
         GRANT ALL ON {DATABASE}.* TO '{USER}'@'%';\nCREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{ADMIN_PASSWORD}';\n\
         GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
    );
    run(boot, Some(&sql), "mariadbd --bootstrap", Engine::MariaDb.install())?;
    Ok(())
}

/// InnoDB settings the data directory is made with and every server runs with (a smaller redo
/// log than the default 100 MB, so a copy is quick).
const MARIADB_STORAGE: &[&str] = &["--innodb-log-file-size=8M"];

/// How a [`PgBouncer`] hands server connections to its clients (its `pool_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// A client connection keeps one server connection for its whole life, so `LISTEN` works.
    Session,
    /// A client connection borrows a server connection per transaction: a `LISTEN`'s server
    /// connection goes back to the pool after it, so notifications never reach that client.
    Transaction,
}

impl PoolMode {
    /// PgBouncer's name for it (`session`, `transaction`), as the launcher takes it too.
    pub fn name(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Result<PoolMode, String> {
        match name {
            "session" => Ok(PoolMode::Session),
            "transaction" => Ok(PoolMode::Transaction),
            other => Err(format!("--pgbouncer takes session or transaction, not {other:?}")),
        }
    }
}

/// The pgbouncer binary (`LOCKGATE_PGBOUNCER` overrides Debian's, which is in /usr/sbin: a
/// normal user's PATH may lack it).
fn pgbouncer_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LOCKGATE_PGBOUNCER") {
        return PathBuf::from(p);
    }
    let debian = PathBuf::from("/usr/sbin/pgbouncer");
    if debian.exists() {
        debian
    } else {
        PathBuf::from("pgbouncer")
    }
}

/// How many server connections PgBouncer may open for the test user: a session-mode client
/// holds two (its statement and its listening connection), and the server allows 300.
const PGBOUNCER_POOL: u32 = 200;

/// Debian's PgBouncer in front of one PostgreSQL server: one process on a free loopback port,
/// its configuration, login file, log and Unix socket in a temp dir of its own, run as the
/// server's account when the launcher is root (PgBouncer refuses to run as root), stopped by
/// its pid. Clients log in as [`USER`] with [`PASSWORD`] (`scram-sha-256`, as the server asks);
/// PgBouncer logs in to the server with the same password, read from its login file.
pub struct PgBouncer {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// How it hands out server connections.
    pub mode: PoolMode,
    process: ServerProcess,
}

impl PgBouncer {
    /// Starts one in front of the PostgreSQL server on `server_port`; waits until it listens. One
    /// that loses its port meanwhile is started again on a new one.
    fn start(server_port: u16, mode: PoolMode, who: Option<(u32, u32)>) -> Result<PgBouncer, String> {
        use std::os::unix::fs::PermissionsExt;
        let process = ServerProcess::new("pgbouncer")?;
        let dir = process.dir().to_path_buf();
        traversable(&dir, who)?;
        let users = dir.join("users.txt");
        // A plain-text password (not a SCRAM secret): PgBouncer needs the password itself to
        // log in to the server with SCRAM on the client's behalf.
        std::fs::write(&users, format!("\"{USER}\" \"{PASSWORD}\"\n")).map_err(|e| format!("{}: {e}", users.display()))?;
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
        let mut bouncer = PgBouncer { port: 0, mode, process };
        let mut failures = Vec::new();
        let mut ports = Ports::default();
        for _ in 0..5 {
            bouncer.port = ports.pick()?;
            let ini = dir.join("pgbouncer.ini");
            let config = format!(
                "[databases]\n{DATABASE} = host=127.0.0.1 port={server_port} dbname={DATABASE}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir = {dir}\n\
                 auth_type = scram-sha-256\nauth_file = {users}\npool_mode = {mode}\n\
                 max_client_conn = 300\ndefault_pool_size = {PGBOUNCER_POOL}\n",
                port = bouncer.port,
                dir = dir.display(),
                users = users.display(),
                mode = mode.name(),
            );
            std::fs::write(&ini, config).map_err(|e| format!("{}: {e}", ini.display()))?;
            chown_tree(&dir, who)?;
            let mut cmd = command(&pgbouncer_bin(), who);
            cmd.arg(&ini);
            let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("pgbouncer.log"));
            cmd.stdout(Stdio::null()).stderr(log.map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
            bouncer.process.spawn(cmd, "apt-get install pgbouncer")?;
            match bouncer.process.await_listening(bouncer.port, READY_LIMIT) {
                Ok(()) => return Ok(bouncer),
                Err(why) => {
                    bouncer.process.stop();
                    failures.push(format!("port {}: {why}: {}", bouncer.port, bouncer.log_tail()));
                }
            }
        }
        Err(format!("pgbouncer did not start: {}", failures.join("; ")))
    }

    /// The last lines of its log that say what went wrong.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.process.dir().join("pgbouncer.log")).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().filter(|l| l.contains("ERROR") || l.contains("FATAL") || l.contains("WARNING")).rev().take(3).collect();
        tail.reverse();
        tail.join(" | ")
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// `postgres://lockgate:<pw>@127.0.0.1:P/lockgate` through the pooler.
    pub fn url(&self) -> String {
        format!("{}://{USER}:{PASSWORD}@127.0.0.1:{}/{DATABASE}", Engine::Postgres.scheme(), self.port)
    }
}

/// One running (or stopped) database server.
pub struct SqlServer {
    /// Which server.
    pub engine: Engine,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// Whether it serves TLS too (on the same port, beside plaintext), with a certificate of the
    /// launcher's CA.
    pub tls: bool,
    /// The account it runs as (root launcher only).
    who: Option<(u32, u32)>,
    /// Extra server settings (PostgreSQL `-c key=value` values as `key=value`; MariaDB
    /// `--key=value` flags), after the defaults.
    extra: Vec<String>,
    /// The pooler in front of it, once [`SqlServer::start_pgbouncer`] started one.
    pgbouncer: Option<PgBouncer>,
    process: ServerProcess,
}

impl SqlServer {
    /// Starts a server of `engine` on a free port with these extra settings; `tls`: the
    /// directory holding `server.crt` and `server.key` for 127.0.0.1. Waits until it accepts
    /// connections; a server that loses its port meanwhile is started again on a new one.
    pub fn start(engine: Engine, extra: &[String], tls: Option<&Path>) -> Result<SqlServer, String> {
        let who = account(engine)?;
        let template = template(engine, who)?;
        let process = ServerProcess::new(engine.name())?;
        let dir = process.dir().to_path_buf();
        let mut s = SqlServer { engine, port: 0, tls: tls.is_some(), who, extra: extra.to_vec(), pgbouncer: None, process };
        traversable(&dir, who)?;
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(&template).arg(dir.join("data"));
        run(cp, None, "cp -a <template>", "coreutils")?;
        if let Some(t) = tls {
            for f in ["server.crt", "server.key"] {
                std::fs::copy(t.join(f), dir.join(f)).map_err(|e| format!("{f}: {e}"))?;
            }
            use std::os::unix::fs::PermissionsExt;
            // PostgreSQL refuses a key others can read.
            std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
        }
        chown_tree(&dir, who)?;
        let mut failures = Vec::new();
        let mut ports = Ports::default();
        for _ in 0..5 {
            s.port = ports.pick()?;
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => failures.push(e),
            }
        }
        Err(format!("{} did not start: {}", engine.name(), failures.join("; ")))
    }

    /// The command line of one start on `self.port`.
    fn command(&self) -> Command {
        let dir = self.process.dir();
        let data = dir.join("data");
        let port = self.port.to_string();
        let mut cmd = match self.engine {
            Engine::Postgres => {
                let mut c = command(&pg_bin("postgres"), self.who);
                c.arg("-D").arg(&data).args(["-p", &port]).arg("-k").arg(dir);
                let mut settings: Vec<String> = [
                    "listen_addresses=127.0.0.1",
                    // Every commit is still written to the kernel (synchronous_commit stays
                    // on), so a killed server loses nothing: only no fsync.
                    "fsync=off",
                    "full_page_writes=off",
                    "shared_buffers=16MB",
                    "max_connections=300",
                    "logging_collector=off",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                if self.tls {
                    settings.push("ssl=on".into());
                    settings.push(format!("ssl_cert_file={}", dir.join("server.crt").display()));
                    settings.push(format!("ssl_key_file={}", dir.join("server.key").display()));
                }
                settings.extend(self.extra.iter().cloned());
                for s in settings {
                    c.arg("-c").arg(s);
                }
                c
            }
            Engine::MariaDb => {
                let mut c = command(&mariadbd(), self.who);
                c.arg("--no-defaults")
                    .arg(format!("--datadir={}", data.display()))
                    .arg(format!("--port={port}"))
                    .arg("--bind-address=127.0.0.1")
                    .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
                    .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
                    .arg(format!("--log-error={}", dir.join("server.log").display()))
                    .args(["--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M"])
                    .args(["--performance-schema=OFF", "--max-connections=300"])
                    .args(MARIADB_STORAGE);
                if self.tls {
                    c.arg(format!("--ssl-cert={}", dir.join("server.crt").display())).arg(format!("--ssl-key={}", dir.join("server.key").display()));
                }
                c.args(self.extra.iter().map(|e| if e.starts_with("--") { e.clone() } else { format!("--{e}") }));
                c
            }
        };
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log"));
        cmd.stdout(Stdio::null()).stderr(log.map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
        cmd
    }

    /// One start on `self.port`: Ok once the server accepts connections, else why not (with the
    /// tail of its log); a server that did not come up is stopped.
    fn spawn(&mut self) -> Result<(), String> {
        let cmd = self.command();
        self.process.spawn(cmd, self.engine.install())?;
        match self.await_ready() {
            Ok(()) => Ok(()),
            Err(why) => {
                self.stop();
                Err(format!("port {}: {why}: {}", self.port, self.log_tail()))
            }
        }
    }

    /// Waits until the server accepts connections: its port listens (MariaDB opens it only once
    /// it is ready) and, for PostgreSQL, `postmaster.pid` says `ready` (it listens already
    /// while it still refuses connections during start-up and recovery).
    fn await_ready(&mut self) -> Result<(), String> {
        self.process.await_listening(self.port, READY_LIMIT)?;
        if self.engine == Engine::MariaDb {
            return Ok(());
        }
        let pidfile = self.process.dir().join("data").join("postmaster.pid");
        let deadline = std::time::Instant::now() + READY_LIMIT;
        loop {
            let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
            if text.lines().nth(7).is_some_and(|l| l.trim() == "ready") {
                return Ok(());
            }
            if let Some(status) = self.process.exited() {
                return Err(format!("exited with {status}"));
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!("not ready after {} s", READY_LIMIT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last lines of the server's log that say what went wrong.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.process.dir().join("server.log")).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().filter(|l| l.contains("ERROR") || l.contains("FATAL") || l.contains("PANIC") || l.contains("[ERROR]")).rev().take(3).collect();
        tail.reverse();
        tail.join(" | ")
    }

    /// The process id of the server (PostgreSQL's postmaster) while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The server's directory (`data/`, `server.log`, the socket).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// Whether it runs.
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// Where its Unix socket is: PostgreSQL's socket directory (`host=` for libpq), MariaDB's
    /// socket file.
    pub fn socket(&self) -> PathBuf {
        match self.engine {
            Engine::Postgres => self.dir().to_path_buf(),
            Engine::MariaDb => self.dir().join("mysqld.sock"),
        }
    }


    /// Starts a [`PgBouncer`] in `mode` in front of this PostgreSQL server (it stays up across
    /// the server's stops and restarts, reconnecting as a real one does). One per server.
    pub fn start_pgbouncer(&mut self, mode: PoolMode) -> Result<(), String> {
        if self.engine != Engine::Postgres {
            return Err(format!("PgBouncer is for PostgreSQL, not {}", self.engine.name()));
        }
        if self.pgbouncer.is_some() {
            return Err("this server has a PgBouncer already".into());
        }
        self.pgbouncer = Some(PgBouncer::start(self.port, mode, self.who)?);
        Ok(())
    }

    /// The pooler in front of it, if one was started.
    pub fn pgbouncer(&self) -> Option<&PgBouncer> {
        self.pgbouncer.as_ref()
    }

    /// Kills the server (SIGKILL, by pid: a crash) and reaps it; its data stays for
    /// [`SqlServer::restart`]. PostgreSQL's backends are killed with the postmaster (frozen
    /// first, so it forks no new one meanwhile), as a crash of the machine's server would end
    /// them, and so the next start finds no old backend holding its shared memory.
    pub fn stop(&mut self) {
        if let Some(pid) = self.pid() {
            if self.engine == Engine::Postgres {
                let _ = send(pid, libc::SIGSTOP);
                for child in children(pid) {
                    let _ = send(child, libc::SIGKILL);
                }
            }
        }
        self.process.stop();
    }

    /// Starts the server again on its port with its data (after [`SqlServer::stop`], a crash
    /// recovery); kills it first if it runs. Waits until it accepts connections.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let (what, port) = (self.engine.name(), self.port);
        crate::process::start_again(what, port, Duration::from_millis(300), || self.spawn())
    }

    /// Sends `signal` to every process of the server (SIGSTOP: the whole server freezes, its
    /// open sessions too; SIGCONT: it goes on).
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        let pid = self.pid().ok_or("the server is stopped")?;
        send(pid, signal)?;
        if self.engine == Engine::Postgres {
            // The backends the postmaster forked; one may end meanwhile (its client left).
            for child in children(pid) {
                let _ = send(child, signal);
            }
        }
        Ok(())
    }

    /// `postgres://lockgate:<pw>@127.0.0.1:P/lockgate` or `mysql://...` (the user's URL).
    pub fn url(&self) -> String {
        self.url_as(USER, PASSWORD)
    }

    /// The administrator's URL (`postgres` / `root`).
    pub fn admin_url(&self) -> String {
        self.url_as(self.engine.admin_user(), ADMIN_PASSWORD)
    }

    /// The URL without a login.
    pub fn url_without_credentials(&self) -> String {
        format!("{}://127.0.0.1:{}/{DATABASE}", self.engine.scheme(), self.port)
    }

    /// The user's URL on another port (the fault proxy's in front of this server).
    pub fn url_on(&self, port: u16) -> String {
        format!("{}://{USER}:{PASSWORD}@127.0.0.1:{port}/{DATABASE}", self.engine.scheme())
    }

    fn url_as(&self, user: &str, password: &str) -> String {
        format!("{}://{user}:{password}@127.0.0.1:{}/{DATABASE}", self.engine.scheme(), self.port)
    }
}

/// The pids whose parent is `pid` (from /proc).
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            // `pid (comm) state ppid ...`: comm may hold spaces, so split after its ')'.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()))
                == Some(pid)
        })
        .collect()
}
