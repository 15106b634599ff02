//! `lockgate inspect NAME`: who holds a lock, since when, for how much longer, and who waits
//! behind it in queue order — the core's snapshot (one read of the server; PROTOCOL.md §14),
//! as a table for people or `--json` for scripts. Racy by nature: it is for operators and
//! dashboards; to decide whether to write, use the fencing token.

use std::fmt::Write as _;
use std::time::Duration;

use lockgate_core::data::Data;
use lockgate_core::inspect::{Kind, Mode, Snapshot};
use lockgate_core::native::ClientOptions;

use crate::exit_code;
use crate::run::fail;

/// What `inspect` was given.
pub struct Ask {
    /// The lock service's URL (never printed: the core redacts it).
    pub url: String,
    /// The lock's name.
    pub name: String,
    /// Which primitive the name is inspected as.
    pub kind: Kind,
    /// ZooKeeper/etcd: the session timeout of this short-lived client.
    pub session_timeout: Option<Duration>,
    /// Print JSON instead of the table.
    pub json: bool,
}

/// Reads the lock and prints it; the exit code (0, or the connect/usage failure's).
pub async fn run(ask: Ask) -> i32 {
    let mut options = ClientOptions::new(ask.url.clone());
    options.session_timeout = ask.session_timeout;
    let client = match options.connect().await {
        Ok(c) => c,
        Err(e) => return fail(exit_code::of(&e, exit_code::BUSY), &e.to_string()),
    };
    let read = client.inspect(&ask.name, ask.kind).await;
    client.close().await;
    match read {
        Ok(snapshot) => {
            if ask.json {
                println!("{}", json(&snapshot.to_data(false), &ask.name));
            } else {
                print!("{}", table(&ask.name, &snapshot));
            }
            0
        }
        Err(e) => fail(exit_code::of(&e, exit_code::BUSY), &e.to_string()),
    }
}

/// The snapshot's data and the name as one JSON object.
fn json(d: &Data, name: &str) -> String {
    let mut object = serde_json::Map::new();
    object.insert("name".into(), name.into());
    if let serde_json::Value::Object(fields) = d.to_json() {
        object.extend(fields);
    }
    serde_json::Value::Object(object).to_string()
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1}s", d.as_secs_f64()))
}

/// The table people read.
fn table(name: &str, s: &Snapshot) -> String {
    let mut out = String::new();
    let state = if s.is_locked() { "held" } else { "free" };
    let _ = write!(out, "{name:?} ({}): {state}", s.kind.as_str());
    if let Some(p) = s.permits {
        let _ = write!(out, ", {} of {p} permits taken", s.holders.len());
    }
    out.push('\n');
    if !s.holders.is_empty() {
        let _ = writeln!(out, "  {:<10} {:<32} {:>20} {:>10} {:>10}", "HOLDER", "LABEL", "FENCING TOKEN", "HELD FOR", "REMAINING");
        for h in &s.holders {
            let mode = match (h.mode, &h.value) {
                (_, Some(v)) => format!("leader={v}"),
                (Mode::Exclusive, None) => "exclusive".into(),
                (Mode::Shared, None) => "shared".into(),
            };
            let token = h.fencing_token.map_or("-".into(), |t| t.to_string());
            let _ = writeln!(
                out,
                "  {:<10} {:<32} {:>20} {:>10} {:>10}",
                mode,
                h.label.as_deref().unwrap_or("-"),
                token,
                secs(h.held_for),
                secs(h.remaining)
            );
        }
    }
    if !s.waiters.is_empty() {
        let _ = writeln!(out, "  {} waiting, in queue order:", s.waiters.len());
        for (i, w) in s.waiters.iter().enumerate() {
            let mode = if w.mode == Mode::Shared { " (shared)" } else { "" };
            let _ = writeln!(out, "  {:>3}. {}{mode}, waiting {}", i + 1, w.label.as_deref().unwrap_or("-"), secs(w.waiting_for));
        }
    }
    out
}
