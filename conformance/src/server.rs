//! A throwaway redis-server for one conformance run: free loopback port, temp dir, killed by pid.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free port; one that exits at once (its port was taken between the
    /// probe and its bind) is started again on a new port.
    pub fn start() -> Result<Self, String> {
        let mut failures = Vec::new();
        for _ in 0..5 {
            match Self::try_start(free_port()?) {
                Ok(server) => return Ok(server),
                Err(e) => failures.push(e),
            }
        }
        Err(format!("redis-server did not start: {}", failures.join("; ")))
    }

    fn try_start(port: u16) -> Result<Self, String> {
        let base = std::env::var_os("LOCKGATE_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("lockgate-conformance-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut child = Command::new(std::env::var("LOCKGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into()))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("port {port}: {}", if exited { "exited at once" } else { "closed after 10 s" }));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(RedisServer { port, child, dir })
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nothing listens on now, chosen below the kernel's ephemeral range: ports
/// from `bind(:0)` are ephemeral, and the actors' client sockets take their local ports from
/// that range, so one of them could take the port before redis-server binds it.
fn free_port() -> Result<u16, String> {
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
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| e.to_string())
}
