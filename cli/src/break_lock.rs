//! `lockgate break NAME [--token T]`: removes the current holder's entry of a lock whose holder
//! is known to be dead, and wakes the next waiter as a release would (PROTOCOL.md §15). With
//! `--token`, only the holder whose grant has that fencing token (as `lockgate inspect` shows
//! it): a stale break breaks nothing. On a terminal it asks first unless `--yes`.
//!
//! Safe only with fencing: the broken holder learns of its loss at its next renewal and may
//! write until then; fenced storage refuses its late writes because the next grant's token is
//! larger. Breaking a Redlock (no tokens) or an unfenced use can let two holders work.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use lockgate_core::break_lock::Broken;
use lockgate_core::inspect::Kind;
use lockgate_core::native::ClientOptions;

use crate::exit_code;
use crate::run::fail;

/// The exit code when nothing was broken: the lock was free, no holder had the token given, or
/// the operator declined at the prompt.
pub const NOTHING_BROKEN: i32 = 1;

/// What `break` was given.
pub struct Ask {
    /// The lock service's URL (never printed: the core redacts it).
    pub url: String,
    /// The lock's name.
    pub name: String,
    /// Which primitive the name is read as.
    pub kind: Kind,
    /// Only the holder with this fencing token.
    pub token: Option<u64>,
    /// ZooKeeper/etcd: the session timeout of this short-lived client.
    pub session_timeout: Option<Duration>,
    /// Do not ask on a terminal.
    pub yes: bool,
    /// Print JSON instead of a sentence.
    pub json: bool,
}

/// Breaks the lock and says what was removed; the exit code (0 broken, [`NOTHING_BROKEN`], or
/// the connect/usage failure's).
pub async fn run(ask: Ask) -> i32 {
    if let Err(e) = lockgate_core::options::validate_name(&ask.name) {
        return fail(exit_code::USAGE, &e.to_string());
    }
    if !ask.yes && std::io::stdin().is_terminal() && !confirm(&ask) {
        eprintln!("lockgate: not broken");
        return NOTHING_BROKEN;
    }
    let mut options = ClientOptions::new(ask.url.clone());
    options.session_timeout = ask.session_timeout;
    let client = match options.connect().await {
        Ok(c) => c,
        Err(e) => return fail(exit_code::of(&e, exit_code::BUSY), &e.to_string()),
    };
    let broken = client.break_lock(&ask.name, ask.kind, ask.token).await;
    client.close().await;
    match broken {
        Ok(b) => {
            if ask.json {
                println!("{}", json(&ask, b.as_ref()));
            } else {
                println!("{}", sentence(&ask, b.as_ref()));
            }
            if b.is_some() {
                0
            } else {
                NOTHING_BROKEN
            }
        }
        Err(e) => fail(exit_code::of(&e, exit_code::BUSY), &e.to_string()),
    }
}

/// Asks on the terminal; true for yes.
fn confirm(ask: &Ask) -> bool {
    let which = ask.token.map_or("its current holder".to_string(), |t| format!("the holder with fencing token {t}"));
    eprint!("Break {:?} ({}), removing {which}? [y/N] ", ask.name, ask.kind.as_str());
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "y" | "Y" | "yes" | "YES")
}

/// One JSON object: `name`, `kind`, `broken`, and what was removed (`label`, `fencing_token`).
fn json(ask: &Ask, b: Option<&Broken>) -> String {
    let mut object = serde_json::Map::new();
    object.insert("name".into(), ask.name.as_str().into());
    object.insert("kind".into(), ask.kind.as_str().into());
    object.insert("broken".into(), b.is_some().into());
    if let Some(serde_json::Value::Object(fields)) = b.map(|b| b.to_data(false).to_json()) {
        object.extend(fields);
    }
    serde_json::Value::Object(object).to_string()
}

/// The sentence people read.
fn sentence(ask: &Ask, b: Option<&Broken>) -> String {
    match (b, ask.token) {
        (Some(b), _) => format!(
            "broke {:?} ({}): removed holder {} with fencing token {}",
            ask.name,
            ask.kind.as_str(),
            b.label.as_deref().unwrap_or("-"),
            b.fencing_token.map_or("-".into(), |t| t.to_string())
        ),
        (None, Some(t)) => format!("nothing broken: no holder of {:?} ({}) has fencing token {t}", ask.name, ask.kind.as_str()),
        (None, None) => format!("nothing broken: {:?} ({}) is free", ask.name, ask.kind.as_str()),
    }
}
