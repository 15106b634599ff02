//! `SimRedis`: runs the three lockgate scripts against the simulated key space, re-implementing
//! in Rust exactly what the Lua in `core/src/redis/scripts.rs` does (statement by statement,
//! including Redis's script cache, NOSCRIPT, WRONGTYPE and the removal of empty sets/hashes).
//!
//! The model is tied to the script texts by their digests ([`MODELLED`]): when a script
//! changes, `sim_models_the_current_scripts` fails until this file is brought up to date.

use std::collections::HashSet;

use lockgate_core::engine::Command;
use lockgate_core::redis::reply::Reply;
use lockgate_core::redis::scripts::{self, Script};
use lockgate_core::time::Instant;

use super::store::{Res, Store};

/// SHA-1 digests of the script texts this file re-implements (PROTOCOL.md version 1).
pub const MODELLED: [(&str, &str); 3] = [
    ("acquire", "6da3ae0e0d5c3cdc47f3b1326f788ed583e0ea90"),
    ("release", "d0ddea7b0dbf5f4d66c748a5e3f08f20b013cc25"),
    ("extend", "d4db83fc1c544f47130a76558a5f3fb4fb10c97f"),
];

/// A fencing token handed out by `grant()`.
#[derive(Clone, Debug)]
pub struct Grant {
    pub at: Instant,
    pub key: String,
    pub token: String,
    pub fence: u64,
    /// Whether `promote()` handed it to a queued waiter (and published it).
    pub promoted: bool,
}

/// A message sent with PUBLISH.
#[derive(Clone, Debug)]
pub struct Published {
    pub at: Instant,
    pub channel: String,
    pub payload: String,
}

/// One script execution, for assertions about how the engine talks to the server.
#[derive(Clone, Debug)]
pub struct Executed {
    pub at: Instant,
    pub script: &'static str,
    /// Sent with EVAL (the body) rather than EVALSHA.
    pub full: bool,
    pub reply: Reply,
}

#[derive(Default)]
pub struct SimRedis {
    pub store: Store,
    loaded: HashSet<String>,
    pub grants: Vec<Grant>,
    pub published: Vec<Published>,
    pub executed: Vec<Executed>,
    /// Messages published by the last `exec`, for the network to route.
    outbox: Vec<(String, String)>,
    pub restarts: usize,
    /// EVALSHA calls answered NOSCRIPT.
    pub noscript: usize,
}

impl SimRedis {
    /// Runs one command at `now`; published messages wait in [`take_outbox`](Self::take_outbox).
    pub fn exec(&mut self, now: Instant, cmd: &Command) -> Reply {
        self.store.set_now(now);
        let args: Vec<String> = cmd
            .0
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let name = args
            .first()
            .map(|s| s.to_ascii_uppercase())
            .unwrap_or_default();
        let (script, full) = match (name.as_str(), args.get(1)) {
            ("EVALSHA", Some(sha)) => match scripts::all()
                .into_iter()
                .find(|s| s.sha1() == sha.to_ascii_lowercase())
            {
                Some(s) if self.loaded.contains(s.sha1()) => (s, false),
                _ => {
                    self.noscript += 1;
                    return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
                }
            },
            ("EVAL", Some(body)) => match scripts::all().into_iter().find(|s| s.source == body) {
                Some(s) => {
                    self.loaded.insert(s.sha1().to_string());
                    (s, true)
                }
                None => {
                    return Reply::Error("ERR the simulator only runs lockgate's scripts".into())
                }
            },
            _ => return Reply::Error(format!("ERR unknown command '{name}'")),
        };
        let reply = match parse_keys_args(&args[2..]) {
            Some((keys, argv)) => {
                let mut ctx = Ctx {
                    db: self,
                    keys,
                    argv,
                    now,
                };
                let result = match script.name {
                    "acquire" => ctx.acquire(),
                    "release" => ctx.release(),
                    "extend" => ctx.extend(),
                    other => Err(format!("ERR unknown script {other}")),
                };
                result.unwrap_or_else(|e| script_error(script, &e))
            }
            None => Reply::Error("ERR Number of keys can't be greater than number of args".into()),
        };
        self.executed.push(Executed {
            at: now,
            script: script.name,
            full,
            reply: reply.clone(),
        });
        reply
    }

    pub fn take_outbox(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.outbox)
    }

    /// A restart without persistence (or a failover to an empty replica): every key and the
    /// script cache are gone; the server clock keeps running (`clock_jump` moves it forward).
    pub fn restart_without_persistence(&mut self, now: Instant, clock_jump_us: u64) {
        self.store.set_now(now);
        self.store.wipe();
        self.store.clock_jump_us += clock_jump_us;
        self.loaded.clear();
        self.restarts += 1;
    }

    /// Keys that must not outlive their users: everything but the fence counters.
    pub fn lock_state_keys(&mut self, now: Instant) -> Vec<String> {
        self.store.set_now(now);
        self.store
            .keys()
            .into_iter()
            .filter(|k| !k.ends_with(":fence"))
            .collect()
    }
}

/// Which lockgate script a command runs (by digest or body), if any.
pub fn script_of(cmd: &Command) -> Option<&'static str> {
    let arg = cmd.0.get(1)?;
    scripts::all()
        .into_iter()
        .find(|s| s.sha1().as_bytes() == arg.as_slice() || s.source.as_bytes() == arg.as_slice())
        .map(|s| s.name)
}

fn parse_keys_args(rest: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let n: usize = rest.first()?.parse().ok()?;
    if rest.len() < 1 + n {
        return None;
    }
    Some((rest[1..1 + n].to_vec(), rest[1 + n..].to_vec()))
}

/// How Redis 7 reports an error raised by `redis.call` inside a script.
fn script_error(script: &Script, e: &str) -> Reply {
    Reply::Error(format!("{e} script: {}, on @user_script:1.", script.sha1()))
}

/// Lua's `tonumber` on a string (decimal only; enough for every value the scripts read).
fn tonumber(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The scripts' `fmt(n)`: `string.format('%.0f', n)`.
fn fmt(n: f64) -> String {
    format!("{n:.0}")
}

fn array(items: Vec<Reply>) -> Reply {
    Reply::Array(items)
}

fn data(s: &str) -> Reply {
    Reply::Data(s.as_bytes().to_vec())
}

/// One script run: `KEYS`, `ARGV` and the database.
struct Ctx<'a> {
    db: &'a mut SimRedis,
    keys: Vec<String>,
    argv: Vec<String>,
    now: Instant,
}

impl Ctx<'_> {
    fn key(&self, i: usize) -> Res<String> {
        // KEYS[i] is nil → redis.call rejects the argument.
        self.keys
            .get(i - 1)
            .cloned()
            .ok_or_else(|| "ERR Lua redis lib command arguments must be strings or integers".into())
    }

    fn arg(&self, i: usize) -> Res<String> {
        self.argv
            .get(i - 1)
            .cloned()
            .ok_or_else(|| "ERR Lua redis lib command arguments must be strings or integers".into())
    }

    fn st(&mut self) -> &mut Store {
        &mut self.db.store
    }

    fn now_us(&self) -> u64 {
        self.db.store.server_us()
    }

    /// prelude `grant(token, lease_ms, t_us, retention_ms)`.
    fn grant(
        &mut self,
        token: &str,
        lease_ms: &str,
        t_us: u64,
        retention_ms: &str,
        promoted: bool,
    ) -> Res<String> {
        let (k1, k2) = (self.key(1)?, self.key(2)?);
        self.st().set_px(&k1, token, lease_ms)?;
        let last = self
            .st()
            .get(&k2)?
            .and_then(|s| tonumber(&s))
            .unwrap_or(0.0);
        let mut fence = last + 1.0;
        let t = t_us as f64;
        if t > fence {
            fence = t;
        }
        let f = fmt(fence);
        let bad = || "ERR attempt to perform arithmetic on a nil value".to_string();
        let px = tonumber(lease_ms).ok_or_else(bad)? + tonumber(retention_ms).ok_or_else(bad)?;
        self.st().set_px(&k2, &f, &fmt(px))?;
        let fence_u64 = f.parse().expect("fence is an integer");
        self.db.grants.push(Grant {
            at: self.now,
            key: k1,
            token: token.into(),
            fence: fence_u64,
            promoted,
        });
        Ok(f)
    }

    /// prelude `promote(t_us, retention_ms)`: hand a free lock to the oldest live waiter.
    /// `t_us = None` reads the clock only once someone is queued.
    fn promote(&mut self, t_us: Option<u64>, retention_ms: &str) -> Res<Option<String>> {
        let (k3, k4) = (self.key(3)?, self.key(4)?);
        let mut t_us = t_us;
        loop {
            let Some(head) = self.st().zfirst(&k3)? else {
                return Ok(None);
            };
            let t = *t_us.get_or_insert_with(|| self.now_us());
            let entry = self.st().hget(&k4, &head)?;
            self.st().zrem(&k3, &head)?;
            self.st().hdel(&k4, &head)?;
            if let Some((deadline, lease, channel)) = entry.as_deref().and_then(parse_entry) {
                if tonumber(deadline).is_some_and(|d| d >= (t / 1000) as f64) {
                    let f = self.grant(&head, lease, t, retention_ms, true)?;
                    let payload = format!("granted {head} {f}");
                    self.db.published.push(Published {
                        at: self.now,
                        channel: channel.into(),
                        payload: payload.clone(),
                    });
                    self.db.outbox.push((channel.into(), payload));
                    return Ok(Some(head));
                }
            }
        }
    }

    /// ACQUIRE. KEYS: lock, fence, queue, waiters. ARGV: token, lease_ms, mode, entry_ttl_ms,
    /// channel, retention_ms.
    fn acquire(&mut self) -> Res<Reply> {
        let (k1, k2, k3, k4) = (self.key(1)?, self.key(2)?, self.key(3)?, self.key(4)?);
        let token = self.arg(1)?;
        let mut holder = self.st().get(&k1)?;
        let mut t_us = None;
        if holder.is_none() {
            let t = self.now_us();
            t_us = Some(t);
            holder = self.promote(Some(t), &self.arg(6)?)?;
            if holder.is_none() {
                let f = self.grant(&token, &self.arg(2)?, t, &self.arg(6)?, false)?;
                let lease = tonumber(&self.arg(2)?).unwrap_or(0.0) as i64;
                return Ok(array(vec![Reply::Int(1), data(&f), Reply::Int(lease)]));
            }
        }
        if holder.as_deref() == Some(token.as_str()) {
            // Granted to us earlier (or just now, as the head of the queue).
            let f = self.st().get(&k2)?.unwrap_or_else(|| "0".into());
            let pttl = self.st().pttl(&k1);
            return Ok(array(vec![Reply::Int(1), data(&f), Reply::Int(pttl)]));
        }
        if self.arg(3)? == "wait" {
            let t = t_us.unwrap_or_else(|| self.now_us());
            let ttl = tonumber(&self.arg(4)?).ok_or("ERR attempt to compare nil with number")?;
            if self.st().zscore(&k3, &token)?.is_none() {
                let tail = self.st().zlast(&k3)?;
                let mut seq = t as f64;
                if let Some((score, _)) = tail {
                    if score >= seq {
                        seq = score + 1.0;
                    }
                }
                // ZADD parses the formatted score back.
                let score: f64 = fmt(seq).parse().expect("formatted number");
                self.st().zadd(&k3, score, &token)?;
            }
            let lease = tonumber(&self.arg(2)?)
                .ok_or("ERR bad argument #1 to 'min' (number expected, got nil)")?;
            let handoff = lease.min(ttl);
            let entry = format!(
                "{}|{}|{}",
                fmt((t / 1000) as f64 + ttl),
                fmt(handoff),
                self.arg(5)?
            );
            self.st().hset(&k4, &token, &entry)?;
            for k in [&k3, &k4] {
                if (self.st().pttl(k) as f64) < ttl {
                    self.st().pexpire(k, ttl as i64);
                }
            }
        }
        let f = self.st().get(&k2)?.unwrap_or_else(|| "0".into());
        let pttl = self.st().pttl(&k1);
        Ok(array(vec![Reply::Int(0), data(&f), Reply::Int(pttl)]))
    }

    /// RELEASE. KEYS: lock, fence, queue, waiters. ARGV: token, retention_ms.
    fn release(&mut self) -> Res<Reply> {
        let (k1, k3, k4) = (self.key(1)?, self.key(3)?, self.key(4)?);
        let token = self.arg(1)?;
        let holder = self.st().get(&k1)?;
        if holder.as_deref() == Some(token.as_str()) {
            // Handing over overwrites the key, so it is deleted only when nobody is waiting.
            if self.promote(None, &self.arg(2)?)?.is_none() {
                self.st().del(&k1);
            }
            return Ok(Reply::Int(1));
        }
        self.st().zrem(&k3, &token)?;
        self.st().hdel(&k4, &token)?;
        if holder.is_none() {
            self.promote(None, &self.arg(2)?)?;
        }
        Ok(Reply::Int(0))
    }

    /// EXTEND. KEYS: lock. ARGV: token, lease_ms.
    fn extend(&mut self) -> Res<Reply> {
        let k1 = self.key(1)?;
        if self.st().get(&k1)? == Some(self.arg(1)?) {
            let ms: i64 = self
                .arg(2)?
                .parse()
                .map_err(|_| "ERR value is not an integer or out of range".to_string())?;
            self.st().pexpire(&k1, ms);
            return Ok(Reply::Int(1));
        }
        Ok(Reply::Int(0))
    }
}

/// `string.match(entry, '^(%d+)|(%d+)|(.+)$')`.
fn parse_entry(entry: &str) -> Option<(&str, &str, &str)> {
    let (deadline, rest) = entry.split_once('|')?;
    let (lease, channel) = rest.split_once('|')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(deadline) && digits(lease) && !channel.is_empty()).then_some((deadline, lease, channel))
}

#[cfg(test)]
mod tests {
    use super::{parse_entry, MODELLED};

    #[test]
    fn sim_models_the_current_scripts() {
        for (script, (name, digest)) in lockgate_core::redis::scripts::all()
            .into_iter()
            .zip(MODELLED)
        {
            assert_eq!(script.name, name);
            assert_eq!(
                script.sha1(),
                digest,
                "the {name} script changed: update tests/sim/redis.rs to match it"
            );
        }
    }

    #[test]
    fn waiter_entries_parse_like_the_lua_pattern() {
        assert_eq!(parse_entry("12|30|a|b"), Some(("12", "30", "a|b")));
        assert_eq!(parse_entry("12|30|"), None);
        assert_eq!(parse_entry("x|30|c"), None);
    }
}
