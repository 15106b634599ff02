//! Free loopback ports for throwaway redis-servers, and the wait for one to listen. Shared, by
//! `#[path]`, with the core's integration tests (`core/tests/support/mod.rs`), which start
//! servers the same way.

use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// A loopback port nothing listens on now and no deployment of this run was given before,
/// chosen below the kernel's ephemeral range.
///
/// Why not `bind(:0)`: that hands out ports from the ephemeral range, where every client socket
/// (of tests running in parallel, of the actors) also takes its local port, and one of them can
/// take the port between this probe and redis-server's own bind (a CI run failed so). Below the
/// range only explicit binds take ports, so just another probe can race us; the callers start a
/// server that exits at once again on a new port.
///
/// Why reserved ([`reserve`]): a member stopped for an outage leaves its port free, and a probe
/// of another deployment (a test binary beside this one) could hand it to a new server, which
/// the stopped member's clients would then reach instead (a CI run saw a ZooKeeper ensemble's
/// clients granted by another test's fresh server during a 7 s outage).
pub fn free_port() -> std::io::Result<u16> {
    use std::hash::{BuildHasher, Hasher};
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(0);
    for _ in 0..200 {
        if first_ephemeral <= 10000 {
            break;
        }
        let r = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let port = 10000 + (r % u64::from(first_ephemeral - 10000)) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && reserve(port) {
            return Ok(port);
        }
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if reserve(port) {
            return Ok(port);
        }
    }
}

/// Claims `port` for the rest of the run: `false` if this process or, under `$LOCKGATE_TMP` (set
/// by `./run` for every process of a run), any process of the run claimed it before. A claim is
/// never given back: the run's temp dir, and with it every claim, is removed when it ends.
fn reserve(port: u16) -> bool {
    static CLAIMED: std::sync::Mutex<Option<std::collections::HashSet<u16>>> = std::sync::Mutex::new(None);
    let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
    if !claimed.get_or_insert_with(Default::default).insert(port) {
        return false;
    }
    let Some(run) = std::env::var_os("LOCKGATE_TMP") else { return true };
    let dir = std::path::Path::new(&run).join("ports");
    if std::fs::create_dir_all(&dir).is_err() {
        return true; // no shared claims possible: the probe alone, as before
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).open(dir.join(port.to_string())) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
    }
}

/// Waits until `port` accepts connections. If `child` exits first (its port was taken between
/// the probe and its bind) or the port stays closed for 10 s, the child is killed and reaped and
/// the error says which.
pub fn await_listening(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let why = loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            break format!("exited with {status}");
        }
        if Instant::now() >= deadline {
            break "port closed after 10 s".to_string();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    Err(format!("port {port}: {why}"))
}
