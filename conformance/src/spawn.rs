//! Starting a test server's process: every server of every kind is spawned here (so each dies
//! with the launcher when it asked) and gets its own fresh temp dir.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};

/// Set by the launcher binary and the orchestrator: servers they start die with them even if
/// they are SIGKILLed (`PR_SET_PDEATHSIG`), so a run ended from outside (Ctrl-C, SIGPIPE through
/// `| head`, `kill -9`) leaves no server behind.
static DIE_WITH_PARENT: AtomicBool = AtomicBool::new(false);

/// Makes every server started afterwards (through [`spawn_server`]) die when this process ends,
/// however it ends.
pub fn die_with_parent() {
    DIE_WITH_PARENT.store(true, Ordering::SeqCst);
}

/// One request to the spawner thread: the command and where its child goes.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Starts a server process. After [`die_with_parent`] the process gets `PR_SET_PDEATHSIG`
/// (SIGKILL). Linux sends that signal when the *thread* that forked the child ends, not the
/// process, and the orchestrator starts servers from tokio's blocking threads, which end when
/// idle; so every such spawn happens on one thread that lives as long as the process.
pub fn spawn_server(mut cmd: Command) -> std::io::Result<Child> {
    if !DIE_WITH_PARENT.load(Ordering::SeqCst) {
        return cmd.spawn();
    }
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("server-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_dying_with_us(&mut cmd));
                }
            })
            .expect("a thread for starting servers");
        Mutex::new(tx)
    });
    let (reply, child) = mpsc::channel();
    let sent = spawner.lock().unwrap_or_else(|e| e.into_inner()).send((cmd, reply));
    if sent.is_err() {
        return Err(std::io::Error::other("the server-spawner thread is gone"));
    }
    child.recv().map_err(|_| std::io::Error::other("the server-spawner thread is gone"))?
}

/// Spawns `cmd` with `PR_SET_PDEATHSIG` (SIGKILL) on the calling thread. A parent that died
/// between fork and prctl would leave the child unwatched, so the child checks its parent.
fn spawn_dying_with_us(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is always safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: prctl and getppid are async-signal-safe and touch nothing of the parent's state.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the launcher died while starting the server"));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// A fresh directory under `$LOCKGATE_TMP` (or the system temp dir): a counter, not just the
/// port, names it, because a port can come back within one process and two live servers in one
/// dir collide (a cluster node refuses a `nodes.conf` another node holds).
pub fn fresh_dir(tag: &str) -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::var_os("LOCKGATE_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("lockgate-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}
