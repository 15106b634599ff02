//! The Rust conformance actor: reads one JSON operation per line on stdin, performs it through
//! lockgate's public Rust API only, and writes one JSON result per line on stdout.
//! The protocol is described in conformance/README.md.

use std::collections::HashMap;
use std::time::Duration;

use lockgate_core::native::{Client, ClientOptions, Lease};
use lockgate_core::options::duration_from_millis_f64;
use lockgate_core::{Error, LockOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn err(e: &Error) -> Value {
    json!({"ok": false, "error": e.code(), "retryable": e.retryable()})
}

/// A millisecond field, converted the way every binding converts numbers from its language
/// (negative, NaN and huge values are rejected by the library, not here).
fn ms(v: &Value, key: &str) -> Result<Option<Duration>, Error> {
    match v.get(key).and_then(Value::as_f64) {
        Some(x) => duration_from_millis_f64(key, x).map(Some),
        None => Ok(None),
    }
}

/// Lock options from the operation: `lease_ms` (absent or null → the 30 s renewed default),
/// `renew`, `entry_ttl_ms`. Out-of-range values are left for the library to reject.
fn options(op: &Value) -> Result<LockOptions, Error> {
    let mut o = LockOptions::default();
    if let Some(lease) = ms(op, "lease_ms")? {
        o.lease = lease;
        o.auto_renew = false;
    }
    if let Some(renew) = op.get("renew").and_then(Value::as_bool) {
        o.auto_renew = renew;
    }
    if let Some(ttl) = ms(op, "entry_ttl_ms")? {
        o.entry_ttl = ttl;
    }
    Ok(o)
}

fn wall_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

struct Actor {
    client: Option<Client>,
    leases: HashMap<String, Lease>,
}

impl Actor {
    async fn handle(&mut self, op: &Value) -> Value {
        let name = op.get("lock").and_then(Value::as_str).unwrap_or("").to_string();
        match op.get("op").and_then(Value::as_str).unwrap_or("") {
            "connect" => {
                let mut o = ClientOptions::new(op["url"].as_str().unwrap_or(""));
                if let Some(p) = op.get("prefix").and_then(Value::as_str) {
                    o.key_prefix = p.to_string();
                }
                match o.connect().await {
                    Ok(c) => {
                        self.client = Some(c);
                        json!({"ok": true})
                    }
                    Err(e) => err(&e),
                }
            }
            "lock" => match options(op).and_then(|o| self.client().lock(&name, o)) {
                Ok(_) => json!({"ok": true}),
                Err(e) => err(&e),
            },
            "acquire" | "try_acquire" => {
                let lock = match options(op).and_then(|o| self.client().lock(&name, o)) {
                    Ok(l) => l,
                    Err(e) => return err(&e),
                };
                let result = if op["op"] == "acquire" {
                    match ms(op, "timeout_ms") {
                        Ok(timeout) => lock.acquire(timeout.unwrap_or_default()).await.map(Some),
                        Err(e) => Err(e),
                    }
                } else {
                    lock.try_acquire().await
                };
                match result {
                    Ok(Some(lease)) => {
                        let token = lease.fencing_token().to_string();
                        self.leases.insert(name, lease);
                        json!({"ok": true, "acquired": true, "token": token})
                    }
                    Ok(None) => json!({"ok": true, "acquired": false}),
                    Err(e) => err(&e),
                }
            }
            "release" => match self.leases.remove(&name) {
                Some(lease) => match lease.release().await {
                    Ok(was_held) => json!({"ok": true, "was_held": was_held}),
                    Err(e) => err(&e),
                },
                None => json!({"ok": false, "error": "NOT_HELD", "retryable": false}),
            },
            "extend" => match self.leases.get(&name) {
                Some(lease) => match ms(op, "ms") {
                    Ok(d) => match lease.extend(d.unwrap_or_default()).await {
                        Ok(()) => json!({"ok": true}),
                        Err(e) => err(&e),
                    },
                    Err(e) => err(&e),
                },
                None => json!({"ok": false, "error": "NOT_HELD", "retryable": false}),
            },
            "hammer" => {
                let lock = match options(op).and_then(|o| self.client().lock(&name, o)) {
                    Ok(l) => l,
                    Err(e) => return err(&e),
                };
                let hold = ms(op, "hold_ms").ok().flatten().unwrap_or(Duration::from_millis(2));
                let mut records = Vec::new();
                for _ in 0..op.get("times").and_then(Value::as_u64).unwrap_or(1) {
                    let lease = match lock.acquire(Duration::from_secs(30)).await {
                        Ok(l) => l,
                        Err(e) => return err(&e),
                    };
                    let enter = wall_ns();
                    tokio::time::sleep(hold).await;
                    let exit = wall_ns();
                    if let Err(e) = lease.release().await {
                        return err(&e);
                    }
                    records.push(json!([lease.fencing_token().to_string(), enter.to_string(), exit.to_string()]));
                }
                json!({"ok": true, "records": records})
            }
            "is_held" => json!({"ok": true, "held": self.leases.get(&name).is_some_and(Lease::is_held)}),
            "wait_lost" => match self.leases.get(&name) {
                Some(lease) => {
                    let wait = ms(op, "timeout_ms").ok().flatten().unwrap_or(Duration::from_secs(5));
                    match tokio::time::timeout(wait, lease.lost()).await {
                        Ok(e) => json!({"ok": true, "lost": true, "error": e.code()}),
                        Err(_) => json!({"ok": true, "lost": false}),
                    }
                }
                None => json!({"ok": false, "error": "NOT_HELD", "retryable": false}),
            },
            other => json!({"ok": false, "error": "UNSUPPORTED_OP", "detail": other}),
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("the orchestrator connects before any lock operation")
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let mut actor = Actor { client: None, leases: HashMap::new() };
    while let Ok(Some(line)) = lines.next_line().await {
        let op: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => json!({"op": "invalid", "detail": e.to_string()}),
        };
        if op["op"] == "exit" {
            break;
        }
        let mut reply = actor.handle(&op).await;
        reply["id"] = op.get("id").cloned().unwrap_or(Value::Null);
        let mut text = reply.to_string();
        text.push('\n');
        if out.write_all(text.as_bytes()).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    for (_, lease) in actor.leases.drain() {
        let _ = lease.release().await;
    }
    if let Some(c) = actor.client {
        c.close().await;
    }
}
