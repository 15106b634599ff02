//! The project's one test-server launcher (`target/release/test-servers`, conformance/README.md
//! "Test servers") from Rust tests: runs it with a kind, reads its one JSON line, sends it
//! commands (`pause I`, `resume I`, `stop I`, ...) and stops it (closing its stdin stops exactly
//! the servers it started). `LOCKGATE_TEST_SERVERS` names another launcher binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One run of the launcher.
pub struct TestServers {
    /// The launcher's description: `url`, `nodes` (each with `port`, `pid`), `pids`, extras.
    pub info: Value,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

fn launcher() -> PathBuf {
    match std::env::var_os("LOCKGATE_TEST_SERVERS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/test-servers"),
    }
}

impl TestServers {
    /// Starts `test-servers <args...>` and waits for its description. Panics (never skips)
    /// if the launcher is missing or fails: `./run test` builds it first.
    pub fn start(args: &[&str]) -> TestServers {
        let bin = launcher();
        assert!(
            bin.exists(),
            "{} is missing: cargo build --release -p lockgate-conformance (./run test does)",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut s = TestServers { info: Value::Null, child, stdin, stdout };
        s.info = s.read_line().unwrap_or_else(|| panic!("test-servers {} did not start (see its stderr)", args.join(" ")));
        s
    }

    fn read_line(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("test-servers said {line:?}: {e}"))),
        }
    }

    /// The deployment's URL.
    pub fn url(&self) -> String {
        self.info["url"].as_str().expect("a url").to_string()
    }

    /// The client port of node `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.info["nodes"][i]["port"].as_u64().expect("a port") as u16
    }

    /// How many nodes (servers, ensemble members) it runs.
    pub fn node_count(&self) -> usize {
        self.info["nodes"].as_array().map_or(0, Vec::len)
    }

    /// Sends one command and returns its answer; panics unless it says `ok`.
    pub fn command(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("running");
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).expect("launcher stdin");
        let answer = self.read_line().unwrap_or_else(|| panic!("test-servers ended on {line:?}"));
        assert_eq!(answer["ok"], Value::Bool(true), "test-servers {line:?}: {answer}");
        answer
    }
}

impl Drop for TestServers {
    fn drop(&mut self) {
        // Closing stdin makes the launcher stop its servers and exit.
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Our own child, by its pid: its servers die with it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
