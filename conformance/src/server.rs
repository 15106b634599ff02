//! A throwaway redis-server for one conformance run: free loopback port, temp dir, killed by pid.

use crate::ports::{await_listening, free_port};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

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
            match Self::try_start(free_port().map_err(|e| e.to_string())?) {
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
        if let Err(e) = await_listening(&mut child, port) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
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

