//! The Rust conformance actor: reads one JSON operation per line on stdin, performs it through
//! lockgate's public Rust API only, and writes one JSON result per line on stdout.
//! The protocol is described in conformance/README.md.

use std::collections::HashMap;
use std::time::Duration;

use lockgate_core::connect::{redlock_url, OptionValue, Spelling};
use lockgate_core::native::{Client, ClientOptions, Election, Lease, Lock};
use lockgate_core::options::duration_from_millis_f64;
use lockgate_core::inspect::{Kind, Snapshot};
use lockgate_core::{Error, LockOptions, Primitive};
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

/// Lock options from the operation: `lease_ms` (absent or null → the client's default lease,
/// renewed), `renew`, `entry_ttl_ms`, `min_hold_ms`, `max_hold_ms`, through the library's one
/// rule for every backend (`Client::lock_options`, `Client::lock_holds`). Out-of-range values
/// are left for the library to reject.
fn options(client: &Client, op: &Value) -> Result<LockOptions, Error> {
    let lease = ms(op, "lease_ms")?;
    let renew = op.get("renew").and_then(Value::as_bool).unwrap_or(lease.is_none());
    let lock = client.lock_options(lease, Some(renew), None, ms(op, "entry_ttl_ms")?, &Spelling::RUST)?;
    client.lock_holds(lock, ms(op, "min_hold_ms")?, ms(op, "max_hold_ms")?, &Spelling::RUST)
}

fn wall_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn not_held() -> Value {
    json!({"ok": false, "error": "NOT_HELD", "retryable": false})
}

/// A grant's reply: a grant without a fencing token (a Redlock's) carries no `token`.
fn granted(lease: &Lease) -> Value {
    match lease.fencing_token() {
        Some(token) => json!({"ok": true, "acquired": true, "token": token.to_string()}),
        None => json!({"ok": true, "acquired": true}),
    }
}

/// An `inspect` reply (conformance/README.md): the holders' and waiters' labels in order, the
/// readers and writer, the first holder's fencing token, this client's holds, the permits.
fn inspected(s: &Snapshot) -> Value {
    json!({
        "ok": true,
        "locked": s.is_locked(),
        "holders": s.holders.iter().map(|h| h.label.clone()).collect::<Vec<_>>(),
        "waiters": s.waiters.iter().map(|w| w.label.clone()).collect::<Vec<_>>(),
        "readers": s.readers().count(),
        "writer": s.writer().is_some(),
        "token": s.holders.first().and_then(|h| h.fencing_token).map(|t| t.to_string()),
        "holds": s.holders.iter().map(|h| h.holds).collect::<Vec<_>>(),
        "permits": s.permits,
        "leader": s.writer().and_then(|h| h.value.clone()),
    })
}

/// One library handle of the actor (named by the step's `handle`, default the lock name) and
/// the stack of leases acquired through it, most recent last.
struct Handle {
    lock: Lock,
    /// For `kind: leader`: the election and the value to campaign with (`acquire` campaigns).
    election: Option<(Election, String)>,
    leases: Vec<Lease>,
}

/// Builds the handle a step describes on `client`: `kind` (mutex, semaphore, read, write,
/// leader), `permits`, `value`, `reentrant`, `writers_first`, plus the lock options. (`kind:
/// redlock`, protocol 1, is a mutex of the actor's `connect_redlock` client: the caller passes
/// that client.)
fn make_handle(client: &Client, name: &str, op: &Value) -> Result<Handle, Error> {
    let o = options(client, op)?;
    let reentrant = op.get("reentrant").and_then(Value::as_bool).unwrap_or(false);
    let mut election = None;
    let lock = match op.get("kind").and_then(Value::as_str).unwrap_or("mutex") {
        "mutex" | "redlock" if reentrant => client.reentrant_lock(name, o)?,
        "mutex" | "redlock" => client.lock(name, o)?,
        "semaphore" => {
            // Passed through untouched; only values a u32 cannot represent (which Rust's type
            // system would refuse at compile time) are turned away here.
            let permits = op.get("permits").and_then(Value::as_i64).unwrap_or(1);
            let permits = u32::try_from(permits).map_err(|_| Error::invalid(format!("permits out of range: {permits}")))?;
            client.semaphore(name, permits, o)?
        }
        kind @ ("read" | "write") => {
            let mut rw = client.read_write_lock(name, o)?;
            if let Some(wf) = op.get("writers_first").and_then(Value::as_bool) {
                rw = rw.with_writers_first(wf);
            }
            if reentrant {
                rw = rw.reentrant();
            }
            if kind == "read" { rw.read().clone() } else { rw.write().clone() }
        }
        "leader" => {
            let value = op.get("value").and_then(Value::as_str).unwrap_or("").to_string();
            let e = client.election(name, o.clone())?;
            let lock = client.primitive(name, Primitive::Leader { value: value.clone() }, o, reentrant)?;
            election = Some((e, value));
            lock
        }
        other => return Err(Error::invalid(format!("unknown kind {other:?}"))),
    };
    Ok(Handle { lock, election, leases: Vec::new() })
}

/// Client options from a `connect` step: `options.{prefix, replica_acks, max_lease_ms,
/// session_timeout_ms, label}` (and the top-level `prefix` of protocol 1), each handed to the
/// library's one setter under the Rust name; the library rejects bad values.
fn client_options(url: &str, op: &Value) -> Result<ClientOptions, Error> {
    let mut o = ClientOptions::new(url);
    let given = op.get("options").cloned().unwrap_or_else(|| json!({}));
    let prefix = given.get("prefix").or_else(|| op.get("prefix"));
    if let Some(p) = prefix.and_then(Value::as_str) {
        o.set("key_prefix", OptionValue::Str(p.to_string()), &Spelling::RUST)?;
    }
    if let Some(n) = given.get("replica_acks").and_then(Value::as_i64) {
        o.set("replica_acks", OptionValue::Int(n), &Spelling::RUST)?;
    }
    if let Some(ms) = given.get("max_lease_ms").or_else(|| op.get("max_lease_ms")).and_then(Value::as_f64) {
        o.set("max_lease", OptionValue::Number(ms / 1000.0), &Spelling::RUST)?;
    }
    if let Some(ms) = given.get("session_timeout_ms").and_then(Value::as_f64) {
        o.set("session_timeout", OptionValue::Number(ms / 1000.0), &Spelling::RUST)?;
    }
    match given.get("label") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => o.set("label", OptionValue::Str(s.clone()), &Spelling::RUST)?,
        // Anything else goes through as it came, for the library to refuse.
        Some(other) => o.set("label", OptionValue::Number(other.as_f64().unwrap_or(f64::NAN)), &Spelling::RUST)?,
    }
    Ok(o)
}

struct Actor {
    client: Option<Client>,
    /// The client of protocol 1's `connect_redlock`, used by `kind: redlock` steps.
    redlock: Option<Client>,
    handles: HashMap<String, Handle>,
}

impl Actor {
    /// The handle named by the step (`handle`, default the lock name), created on first use
    /// with this step's options.
    fn handle_for(&mut self, name: &str, op: &Value) -> Result<&mut Handle, Error> {
        let key = op.get("handle").and_then(Value::as_str).unwrap_or(name).to_string();
        if !self.handles.contains_key(&key) {
            let client = if op.get("kind").and_then(Value::as_str) == Some("redlock") {
                self.redlock.as_ref().ok_or_else(|| Error::invalid("connect_redlock was not sent"))?
            } else {
                self.client()
            };
            let h = make_handle(client, name, op)?;
            self.handles.insert(key.clone(), h);
        }
        Ok(self.handles.get_mut(&key).expect("inserted above"))
    }

    /// The most recent lease of the step's handle, if any.
    fn top(&mut self, name: &str, op: &Value) -> Option<&mut Lease> {
        let key = op.get("handle").and_then(Value::as_str).unwrap_or(name);
        self.handles.get_mut(key).and_then(|h| h.leases.last_mut())
    }

    async fn handle(&mut self, op: &Value) -> Value {
        let name = op.get("lock").and_then(Value::as_str).unwrap_or("").to_string();
        match op.get("op").and_then(Value::as_str).unwrap_or("") {
            "connect" => {
                let connected = match client_options(op["url"].as_str().unwrap_or(""), op) {
                    Ok(o) => o.connect().await,
                    Err(e) => Err(e),
                };
                match connected {
                    Ok(c) => {
                        let capabilities: Vec<&str> =
                            c.capabilities().pairs().into_iter().filter(|(_, on)| *on).map(|(name, _)| name).collect();
                        self.client = Some(c);
                        json!({"ok": true, "capabilities": capabilities})
                    }
                    Err(e) => err(&e),
                }
            }
            "connect_redlock" => {
                // Protocol 1: a Redlock over `urls` is a `connect` with their redlock:// URL.
                let urls: Vec<String> = op["urls"].as_array().into_iter().flatten().filter_map(|u| u.as_str().map(String::from)).collect();
                let connected = match redlock_url(&urls).and_then(|url| client_options(&url, op)) {
                    Ok(o) => o.connect().await,
                    Err(e) => Err(e),
                };
                match connected {
                    Ok(r) => {
                        self.redlock = Some(r);
                        json!({"ok": true})
                    }
                    Err(e) => err(&e),
                }
            }
            "lock" => match self.handle_for(&name, op) {
                Ok(_) => json!({"ok": true}),
                Err(e) => err(&e),
            },
            "acquire" | "try_acquire" => {
                let h = match self.handle_for(&name, op) {
                    Ok(h) => h,
                    Err(e) => return err(&e),
                };
                let result = if op["op"] == "acquire" {
                    match ms(op, "timeout_ms") {
                        Ok(timeout) => {
                            let timeout = timeout.unwrap_or_default();
                            match &h.election {
                                Some((e, value)) => e.campaign(value, Some(timeout)).await.map(Some),
                                None => h.lock.acquire(timeout).await.map(Some),
                            }
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    h.lock.try_acquire().await
                };
                match result {
                    Ok(Some(lease)) => {
                        let reply = granted(&lease);
                        h.leases.push(lease);
                        reply
                    }
                    Ok(None) => json!({"ok": true, "acquired": false}),
                    Err(e) => err(&e),
                }
            }
            "release" => {
                let key = op.get("handle").and_then(Value::as_str).unwrap_or(&name).to_string();
                let Some(h) = self.handles.get_mut(&key) else { return not_held() };
                match h.leases.pop() {
                    Some(lease) => match lease.release().await {
                        Ok(was_held) => json!({"ok": true, "was_held": was_held}),
                        Err(e) => {
                            // An error reply leaves the stack unchanged (conformance/README.md).
                            h.leases.push(lease);
                            err(&e)
                        }
                    },
                    None => not_held(),
                }
            }
            "extend" => match self.top(&name, op) {
                Some(lease) => match ms(op, "ms") {
                    Ok(d) => match lease.extend(d.unwrap_or_default()).await {
                        Ok(()) => json!({"ok": true}),
                        Err(e) => err(&e),
                    },
                    Err(e) => err(&e),
                },
                None => not_held(),
            },
            "export" => match self.top(&name, op) {
                // The top lease's identity, for another actor to adopt (`identity_from`).
                Some(lease) => match lease.identity().await {
                    Ok(identity) => json!({"ok": true, "identity": identity}),
                    Err(e) => err(&e),
                },
                None => not_held(),
            },
            "adopt" => {
                // Adopts `identity` with the step's lock options; the lease joins the stack of
                // the step's handle (made, sending nothing, if new), as an acquire's would.
                let identity = op.get("identity").and_then(Value::as_str).unwrap_or("").to_string();
                let adopted = match options(self.client(), op) {
                    Ok(o) => self.client().adopt(&identity, o).await,
                    Err(e) => Err(e),
                };
                let lease = match adopted {
                    Ok(l) => l,
                    Err(e) => return err(&e),
                };
                match self.handle_for(&name, op) {
                    Ok(h) => {
                        let reply = granted(&lease);
                        h.leases.push(lease);
                        reply
                    }
                    Err(e) => err(&e),
                }
            }
            "hammer" => {
                let lock = match self.handle_for(&name, op) {
                    Ok(h) => h.lock.clone(),
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
                    records.push(json!([lease.fencing_token().map(|t| t.to_string()), enter.to_string(), exit.to_string()]));
                }
                json!({"ok": true, "records": records})
            }
            "is_held" => {
                let held = self.top(&name, op).is_some_and(|l| l.is_held());
                json!({"ok": true, "held": held})
            }
            "wait_lost" => match self.top(&name, op) {
                Some(lease) => {
                    let wait = ms(op, "timeout_ms").ok().flatten().unwrap_or(Duration::from_secs(5));
                    match tokio::time::timeout(wait, lease.lost()).await {
                        Ok(e) => json!({"ok": true, "lost": true, "error": e.code()}),
                        Err(_) => json!({"ok": true, "lost": false}),
                    }
                }
                None => not_held(),
            },
            "observe" => {
                let observed = match self.client().election(&name, LockOptions::default()) {
                    Ok(e) => e.observe().await,
                    Err(e) => Err(e),
                };
                match observed {
                    Ok(Some(info)) => json!({"ok": true, "leader": true, "value": info.value, "token": info.term.to_string()}),
                    Ok(None) => json!({"ok": true, "leader": false}),
                    Err(e) => err(&e),
                }
            }
            "inspect" => {
                // With `permits`, through a semaphore handle (which knows its count); else by name.
                let snapshot = if op.get("permits").is_some() {
                    match make_handle(self.client(), &name, &json!({"kind": "semaphore", "permits": op["permits"]})) {
                        Ok(h) => h.lock.inspect().await,
                        Err(e) => Err(e),
                    }
                } else {
                    match Kind::parse(op.get("kind").and_then(Value::as_str).unwrap_or("mutex")) {
                        Ok(kind) => self.client().inspect(&name, kind).await,
                        Err(e) => Err(e),
                    }
                };
                match snapshot {
                    Ok(s) => inspected(&s),
                    Err(e) => err(&e),
                }
            }
            "break" => {
                // `token`: the fencing token as a decimal string (the harness's saved tokens).
                let token = match op.get("token").and_then(Value::as_str).map(str::parse::<u64>) {
                    Some(Ok(t)) => Some(t),
                    Some(Err(_)) => return json!({"ok": false, "error": "INVALID_ARGUMENT", "detail": "token"}),
                    None => None,
                };
                let broken = match Kind::parse(op.get("kind").and_then(Value::as_str).unwrap_or("mutex")) {
                    Ok(kind) => self.client().break_lock(&name, kind, token).await,
                    Err(e) => Err(e),
                };
                match broken {
                    Ok(Some(b)) => json!({"ok": true, "broken": true, "label": b.label, "token": b.fencing_token.map(|t| t.to_string())}),
                    Ok(None) => json!({"ok": true, "broken": false}),
                    Err(e) => err(&e),
                }
            }
            "list" => {
                // Pages through every lock under the prefix `lock` (`limit` per page) and
                // answers each as "<name after the prefix> <kind> <holders> <waiters>", sorted,
                // with the number of pages read.
                let limit = op.get("limit").and_then(Value::as_u64);
                let (mut entries, mut labels, mut pages, mut cursor) = (Vec::new(), Vec::new(), 0u32, None::<String>);
                loop {
                    match self.client().list(&name, limit, cursor.as_deref()).await {
                        Ok(page) => {
                            pages += 1;
                            for e in &page.entries {
                                let rest = e.name.strip_prefix(name.as_str()).unwrap_or(&e.name);
                                entries.push(format!("{rest} {} {} {}", e.kind.as_str(), e.holders, e.waiters));
                                labels.push(e.label.clone());
                            }
                            match page.cursor {
                                Some(c) if pages < 10_000 => cursor = Some(c),
                                _ => break,
                            }
                        }
                        Err(e) => return err(&e),
                    }
                }
                entries.sort();
                labels.sort();
                json!({"ok": true, "entries": entries, "labels": labels, "pages": pages})
            }
            other => json!({"ok": false, "error": "UNSUPPORTED_OP", "detail": other}),
        }
    }

    /// Releases every handle's leases, most recent first, then closes the clients.
    async fn close(mut self) {
        for (_, mut h) in self.handles.drain() {
            while let Some(lease) = h.leases.pop() {
                let _ = lease.release().await;
            }
        }
        if let Some(c) = self.client {
            c.close().await;
        }
        if let Some(r) = self.redlock {
            r.close().await;
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
    let fresh = || Actor { client: None, redlock: None, handles: HashMap::new() };
    let mut actor = fresh();
    while let Ok(Some(line)) = lines.next_line().await {
        let op: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => json!({"op": "invalid", "detail": e.to_string()}),
        };
        if op["op"] == "exit" {
            break;
        }
        let mut reply = if op["op"] == "reset" {
            // The orchestrator reuses this process for its next run: as a fresh actor.
            std::mem::replace(&mut actor, fresh()).close().await;
            json!({"ok": true})
        } else {
            actor.handle(&op).await
        };
        reply["id"] = op.get("id").cloned().unwrap_or(Value::Null);
        let mut text = reply.to_string();
        text.push('\n');
        if out.write_all(text.as_bytes()).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    actor.close().await;
}
