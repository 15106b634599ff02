//! `lockgate list [PREFIX]`: the locks whose names start with PREFIX, each with its kind, how
//! many hold it and wait on it and its holder's label — the core's listing (one bounded request
//! per page, never blocking the server; PROTOCOL.md §16), as a table or `--json`. Racy by
//! nature, like `inspect`.

use std::fmt::Write as _;
use std::time::Duration;

use lockgate_core::listing::{Entry, MAX_PAGE};
use lockgate_core::native::ClientOptions;

use crate::exit_code;
use crate::run::fail;

/// What `list` was given.
pub struct Ask {
    /// The lock service's URL (never printed: the core redacts it).
    pub url: String,
    /// Only names starting with this.
    pub prefix: String,
    /// The most entries to print (pages of up to the core's cap are read until then).
    pub limit: u64,
    /// Where to start: a cursor a previous `list` printed.
    pub cursor: Option<String>,
    /// ZooKeeper/etcd: the session timeout of this short-lived client.
    pub session_timeout: Option<Duration>,
    /// Print JSON instead of the table.
    pub json: bool,
}

/// Lists the locks and prints them; the exit code (0, or the connect/usage failure's).
pub async fn run(ask: Ask) -> i32 {
    if ask.limit == 0 {
        return fail(exit_code::USAGE, "--limit must be at least 1");
    }
    let mut options = ClientOptions::new(ask.url.clone());
    options.session_timeout = ask.session_timeout;
    let client = match options.connect().await {
        Ok(c) => c,
        Err(e) => return fail(exit_code::of(&e, exit_code::BUSY), &e.to_string()),
    };
    let (mut entries, mut cursor) = (Vec::new(), ask.cursor.clone());
    let read = loop {
        let left = ask.limit - entries.len() as u64;
        match client.list(&ask.prefix, Some(left.min(u64::from(MAX_PAGE))), cursor.as_deref()).await {
            Ok(page) => {
                entries.extend(page.entries);
                cursor = page.cursor;
                if cursor.is_none() || entries.len() as u64 >= ask.limit {
                    break Ok(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    client.close().await;
    if let Err(e) = read {
        return fail(exit_code::of(&e, exit_code::BUSY), &e.to_string());
    }
    if ask.json {
        println!("{}", json(&ask.prefix, &entries, cursor.as_deref()));
    } else {
        print!("{}", table(&entries));
        if let Some(c) = &cursor {
            eprintln!("lockgate: more locks follow: --cursor '{c}'");
        }
    }
    0
}

/// One JSON object: `prefix`, `entries` (each `name`, `kind`, `holders`, `waiters`, `label`)
/// and `cursor` (`null` when nothing follows).
fn json(prefix: &str, entries: &[Entry], cursor: Option<&str>) -> String {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            serde_json::json!({"name": e.name, "kind": e.kind.as_str(), "holders": e.holders, "waiters": e.waiters, "label": e.label})
        })
        .collect();
    serde_json::json!({"prefix": prefix, "entries": entries, "cursor": cursor}).to_string()
}

/// The table people read (nothing but the header's absence when no lock is listed).
fn table(entries: &[Entry]) -> String {
    let mut out = String::new();
    if entries.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{:<40} {:<9} {:>7} {:>7}  LABEL", "NAME", "KIND", "HOLDERS", "WAITERS");
    for e in entries {
        let _ = writeln!(out, "{:<40} {:<9} {:>7} {:>7}  {}", e.name, e.kind.as_str(), e.holders, e.waiters, e.label.as_deref().unwrap_or("-"));
    }
    out
}
