//! `lockgate run` on one lock name together with library holders in other languages and with
//! Apache Curator (issue 26): FIFO with them, no overlap, fencing tokens increasing in the
//! command's environment.
//!
//! The library holders are the conformance actors every binding ships (`conformance/actors.json`,
//! the actor protocol of conformance/README.md), so no harness is written twice; Curator's
//! `InterProcessMutex` runs from `CuratorHolder.java` beside this file on the JVM suite's test
//! class path. Those need the bindings built, which `cargo test` alone does not do: the tests
//! are `#[ignore]`d there and `./run test` runs them after the binding suites
//! (`cargo test -p lockgate-cli --test beside_libraries -- --ignored`), with
//! `LOCKGATE_BESIDE` naming the bindings whose suites passed. A binding named there whose actor
//! cannot start fails the test; none is skipped silently.

#[path = "../../core/tests/support/test_servers.rs"]
mod test_servers;

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use serde_json::{json, Value};
use test_servers::TestServers;

const LOCKGATE: &str = env!("CARGO_BIN_EXE_lockgate");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The bindings to run beside (`LOCKGATE_BESIDE`, default python,node,jvm).
fn bindings() -> Vec<String> {
    std::env::var("LOCKGATE_BESIDE")
        .unwrap_or_else(|_| "python,node,jvm".into())
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty() && *b != "rust")
        .map(String::from)
        .collect()
}

/// A scratch directory of one test, removed when it ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("lockgate-beside-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Appends a line to the shared log (O_APPEND: whole lines from every process).
fn append(path: &Path, line: &str) {
    let mut f = OpenOptions::new().create(true).append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// One binding's conformance actor, spoken to line by line.
struct Actor {
    name: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Actor {
    /// Starts `binding`'s actor as `conformance/actors.json` says, from the repository root.
    fn start(binding: &str) -> Actor {
        let actors: Value = serde_json::from_str(&fs::read_to_string(root().join("conformance/actors.json")).unwrap()).unwrap();
        let spec = actors.as_array().unwrap().iter().find(|a| a["binding"] == binding).unwrap_or_else(|| panic!("no actor for {binding}"));
        let argv: Vec<&str> = spec["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .current_dir(root())
            // cargo test puts target/debug on the library path, where a stale debug build of
            // the JVM binding's native library would shadow the one in its jar.
            .env_remove("LD_LIBRARY_PATH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("the {binding} actor cannot start ({e}): build the binding first (./run test does)"));
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        Actor { name: binding.to_string(), child, stdin, stdout, next_id: 0 }
    }

    /// Sends `op` and waits for its reply.
    fn call(&mut self, mut op: Value) -> Value {
        self.next_id += 1;
        op["id"] = json!(self.next_id);
        writeln!(self.stdin, "{op}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the {} actor exited", self.name);
        let reply: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: {e}: {line}", self.name));
        assert_eq!(reply["id"], json!(self.next_id), "{}: {reply}", self.name);
        reply
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"id": 0, "op": "exit"}));
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lockgate run NAME --url URL -- sh -c '<log start/end with the token>'`, started in `dir`.
fn lockgate(dir: &Path, name: &str, url: &str, who: &str) -> Child {
    let script = format!("echo \"start $LOCKGATE_FENCING_TOKEN {who}\" >> log; sleep 0.2; echo \"end $LOCKGATE_FENCING_TOKEN {who}\" >> log");
    Command::new(LOCKGATE)
        .args(["run", name, "--url", url, "--wait", "60s", "--", "sh", "-c", &script])
        .current_dir(dir)
        .env_remove("LOCKGATE_URL")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (bounded) for lockgate's exit; its code and stderr.
fn finish(child: Child) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned());
        }
        assert!(Instant::now() < deadline, "lockgate still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks the shared log: pairs `start T WHO` / `end T WHO` one after the other (no overlap),
/// tokens strictly increasing from `first`, in the order `expected` of holders.
fn check_log(log: &Path, first: u64, expected: &[String]) {
    let lines: Vec<String> = fs::read_to_string(log).unwrap().lines().map(String::from).collect();
    assert_eq!(lines.len(), 2 * expected.len(), "{lines:?}");
    let mut last = first;
    let mut order = Vec::new();
    for pair in lines.chunks(2) {
        let s: Vec<&str> = pair[0].split(' ').collect();
        let e: Vec<&str> = pair[1].split(' ').collect();
        assert_eq!((s[0], e[0]), ("start", "end"), "overlap: {lines:?}");
        assert_eq!((s[1], s[2]), (e[1], e[2]), "overlap: {lines:?}");
        let t: u64 = s[1].parse().unwrap_or_else(|_| panic!("no token: {lines:?}"));
        assert!(t > last, "tokens not increasing: {lines:?}");
        last = t;
        order.push(s[2].to_string());
    }
    assert_eq!(order, expected, "not first-come-first-served: {lines:?}");
}

/// Time for one waiter to be queued on the server before the next one comes.
const QUEUE_GAP: Duration = Duration::from_millis(700);

/// Held first by a Rust library client; then, queued one after the other: each binding's actor,
/// each followed by a `lockgate run`. When the first holder releases, every one holds in arrival
/// order, alone, each with a larger token (the commands see theirs in LOCKGATE_FENCING_TOKEN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Python, Node and JVM bindings built: ./run test runs it after their suites"]
async fn run_queues_fifo_with_python_node_and_jvm_holders() {
    let servers = TestServers::start(&["single"]);
    let url = servers.url();
    let dir = Scratch::new("fifo");
    let log = dir.0.join("log");
    let mut actors = Vec::new();
    for b in bindings() {
        let mut a = Actor::start(&b);
        let r = a.call(json!({"op": "connect", "url": url, "options": {}}));
        assert_eq!(r["ok"], json!(true), "{b}: {r}");
        actors.push(a);
    }
    let client = Client::connect(&url).await.unwrap();
    let first = client.lock("beside", LockOptions::default()).unwrap().acquire(Duration::from_secs(5)).await.unwrap();
    let t0 = first.fencing_token().unwrap();
    let mut expected = Vec::new();
    let mut runs = Vec::new();
    let mut waiters = Vec::new();
    for (i, mut actor) in actors.into_iter().enumerate() {
        let (sent_tx, sent_rx) = mpsc::channel();
        let (who, log) = (actor.name.clone(), log.clone());
        expected.push(who.clone());
        waiters.push(std::thread::spawn(move || {
            actor.next_id += 1;
            let id = actor.next_id;
            writeln!(actor.stdin, "{}", json!({"id": id, "op": "acquire", "lock": "beside", "timeout_ms": 60000})).unwrap();
            actor.stdin.flush().unwrap();
            sent_tx.send(()).unwrap();
            let mut line = String::new();
            actor.stdout.read_line(&mut line).unwrap();
            let reply: Value = serde_json::from_str(&line).unwrap();
            assert_eq!((reply["ok"].clone(), reply["acquired"].clone()), (json!(true), json!(true)), "{who}: {reply}");
            let token = reply["token"].as_str().unwrap().to_string();
            append(&log, &format!("start {token} {who}"));
            std::thread::sleep(Duration::from_millis(200));
            append(&log, &format!("end {token} {who}"));
            let r = actor.call(json!({"op": "release", "lock": "beside"}));
            assert_eq!(r["was_held"], json!(true), "{who}: {r}");
            actor
        }));
        sent_rx.recv().unwrap();
        tokio::time::sleep(QUEUE_GAP).await;
        let who = format!("lockgate{i}");
        runs.push(lockgate(&dir.0, "beside", &url, &who));
        expected.push(who);
        tokio::time::sleep(QUEUE_GAP).await;
    }
    first.release().await.unwrap();
    for run in runs {
        let (code, err) = finish(run);
        assert_eq!(code, 0, "{err}");
    }
    for w in waiters {
        drop(w.join().unwrap());
    }
    check_log(&log, t0, &expected);
    client.close().await;
}

/// Apache Curator's `InterProcessMutex` on one path (`CuratorHolder.java`, on the JVM suite's
/// test class path) holds first; a `lockgate run` on the same path queues behind it, then a
/// second Curator holder behind that: served in that order on ZooKeeper, no overlap, the
/// holder nodes' creation zxids (lockgate's fencing token, Curator's node's czxid) increasing.
#[test]
#[ignore = "needs the JVM binding built (its test class path holds Curator): ./run test runs it after the JVM suite"]
fn run_queues_fifo_with_a_curator_mutex() {
    assert!(bindings().iter().any(|b| b == "jvm"), "LOCKGATE_BESIDE has no jvm: this test needs it");
    let cp_file = root().join("bindings-jvm/target/test-classpath.txt");
    let classpath = fs::read_to_string(&cp_file).unwrap_or_else(|e| panic!("{}: {e}: build the JVM binding first", cp_file.display()));
    let servers = TestServers::start(&["zookeeper"]);
    let url = servers.url();
    let connect = url.trim_start_matches("zookeeper://").to_string();
    let dir = Scratch::new("curator");
    let log = dir.0.join("log");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/CuratorHolder.java");
    let curator = |who: &str, ready: &Path| {
        Command::new("java")
            .args(["-cp", classpath.trim(), source.to_str().unwrap(), &connect, "/locks/beside", "200", who])
            .arg(log.to_str().unwrap())
            .arg(ready.to_str().unwrap())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    };
    let wait_for = |p: &Path| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !p.exists() {
            assert!(Instant::now() < deadline, "{} never appeared", p.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The first Curator holder takes the lock and holds until `go` exists.
    let go = dir.0.join("go");
    let c1 = curator("curator1", &dir.0.join("c1-ready"));
    wait_for(&dir.0.join("c1-ready"));
    let lg = lockgate(&dir.0, "/locks/beside", &url, "lockgate");
    std::thread::sleep(QUEUE_GAP * 2);
    let c2 = curator("curator2", &dir.0.join("c2-ready"));
    wait_for(&dir.0.join("c2-ready"));
    std::thread::sleep(QUEUE_GAP * 2);
    fs::write(&go, "").unwrap();
    for (mut c, who) in [(c1, "curator1"), (c2, "curator2")] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert!(status.success(), "{who}: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "{who} still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (code, err) = finish(lg);
    assert_eq!(code, 0, "{err}");
    check_log(&log, 0, &["curator1".to_string(), "lockgate".to_string(), "curator2".to_string()]);
}
