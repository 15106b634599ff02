//! The key space of the simulated Redis: strings, sorted sets and hashes with millisecond
//! expiry on a server clock derived from virtual time, plus a history of every string value
//! (who held a lock key from when to when) for the safety checks.

use std::collections::{BTreeMap, HashMap};

use lockgate_core::time::{Duration, Instant};

/// Server time at virtual instant zero, in microseconds (a realistic Unix time).
pub const EPOCH_US: u64 = 1_700_000_000_000_000;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A value of one key.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    /// Members sorted by (score, member), as Redis orders them.
    Zset(Vec<(f64, String)>),
    Hash(BTreeMap<String, String>),
}

#[derive(Clone, Debug)]
struct Entry {
    value: Value,
    /// Absolute server time in ms; the key exists while `server_ms <= expire_ms` (as in Redis).
    expire_ms: Option<u64>,
}

/// One stretch of time during which a string key held one value.
#[derive(Clone, Debug)]
pub struct Interval {
    pub key: String,
    pub value: String,
    pub start: Instant,
    /// `None` while the value is still current (its end then follows from the key's expiry).
    pub end: Option<Instant>,
}

pub type Res<T> = Result<T, String>;

/// The far end of the virtual timeline.
pub fn far_future() -> Instant {
    Instant::from_origin(Duration::from_secs(1 << 40))
}

#[derive(Default)]
pub struct Store {
    data: HashMap<String, Entry>,
    now: Instant,
    /// Extra server-clock offset (a forward jump, e.g. at a restart).
    pub clock_jump_us: u64,
    history: Vec<Interval>,
    open: HashMap<String, usize>,
}

impl Store {
    pub fn set_now(&mut self, now: Instant) {
        assert!(now >= self.now, "virtual time went backwards");
        self.now = now;
    }

    /// The server's `TIME` in microseconds.
    pub fn server_us(&self) -> u64 {
        EPOCH_US + self.clock_jump_us + self.now.since_origin().as_micros() as u64
    }

    fn server_ms(&self) -> u64 {
        self.server_us() / 1000
    }

    /// The first virtual instant at which a key with expiry `when_ms` no longer exists.
    pub fn expiry_instant(&self, when_ms: u64) -> Instant {
        let us = ((when_ms + 1) * 1000).saturating_sub(EPOCH_US + self.clock_jump_us);
        Instant::from_origin(Duration::from_micros(us))
    }

    fn close(&mut self, key: &str, at: Instant) {
        if let Some(i) = self.open.remove(key) {
            self.history[i].end = Some(at);
        }
    }

    /// Lazy expiry, as Redis does on access.
    fn purge(&mut self, key: &str) {
        let when = match self.data.get(key) {
            Some(Entry {
                expire_ms: Some(w), ..
            }) if self.server_ms() > *w => *w,
            _ => return,
        };
        self.data.remove(key);
        let at = self.expiry_instant(when);
        self.close(key, at);
    }

    fn entry(&mut self, key: &str) -> Option<&mut Entry> {
        self.purge(key);
        self.data.get_mut(key)
    }

    pub fn value(&mut self, key: &str) -> Option<Value> {
        self.entry(key).map(|e| e.value.clone())
    }

    /// Live keys, sorted.
    pub fn keys(&mut self) -> Vec<String> {
        let all: Vec<String> = self.data.keys().cloned().collect();
        all.iter().for_each(|k| self.purge(k));
        let mut live: Vec<String> = self.data.keys().cloned().collect();
        live.sort();
        live
    }

    pub fn wipe(&mut self) {
        let keys: Vec<String> = self.data.keys().cloned().collect();
        for k in keys {
            self.purge(&k);
            let now = self.now;
            self.close(&k, now);
        }
        self.data.clear();
    }

    // ---- strings ----

    pub fn get(&mut self, key: &str) -> Res<Option<String>> {
        match self.entry(key) {
            None => Ok(None),
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Ok(Some(s.clone())),
            Some(_) => Err(WRONGTYPE.into()),
        }
    }

    /// `SET key value PX ms` (overwrites any type, as Redis does).
    pub fn set_px(&mut self, key: &str, value: &str, px: &str) -> Res<()> {
        let ms: i64 = px
            .parse()
            .map_err(|_| "ERR value is not an integer or out of range".to_string())?;
        if ms <= 0 {
            return Err("ERR invalid expire time in 'set' command".into());
        }
        self.set_raw(key, Value::Str(value.into()), Some(ms as u64));
        Ok(())
    }

    /// Writes a key directly (tests use this to plant wrong types or keys without expiry).
    pub fn set_raw(&mut self, key: &str, value: Value, px_ms: Option<u64>) {
        self.purge(key);
        let now = self.now;
        self.close(key, now);
        if let Value::Str(s) = &value {
            self.history.push(Interval {
                key: key.into(),
                value: s.clone(),
                start: now,
                end: None,
            });
            self.open.insert(key.into(), self.history.len() - 1);
        }
        let expire_ms = px_ms.map(|ms| self.server_ms() + ms);
        self.data.insert(key.into(), Entry { value, expire_ms });
    }

    pub fn del(&mut self, key: &str) -> bool {
        self.purge(key);
        let now = self.now;
        self.close(key, now);
        self.data.remove(key).is_some()
    }

    /// `PTTL`: -2 if missing, -1 if no expiry.
    pub fn pttl(&mut self, key: &str) -> i64 {
        let now_ms = self.server_ms();
        match self.entry(key) {
            None => -2,
            Some(Entry {
                expire_ms: None, ..
            }) => -1,
            Some(Entry {
                expire_ms: Some(w), ..
            }) => (*w - now_ms) as i64,
        }
    }

    /// `PEXPIRE`; a non-positive time deletes the key.
    pub fn pexpire(&mut self, key: &str, ms: i64) -> bool {
        let now_ms = self.server_ms();
        if self.entry(key).is_none() {
            return false;
        }
        if ms <= 0 {
            self.del(key);
        } else if let Some(e) = self.entry(key) {
            e.expire_ms = Some(now_ms + ms as u64);
        }
        true
    }

    // ---- sorted sets ----

    fn zset(&mut self, key: &str) -> Res<Option<&mut Vec<(f64, String)>>> {
        match self.entry(key) {
            None => Ok(None),
            Some(Entry {
                value: Value::Zset(z),
                ..
            }) => Ok(Some(z)),
            Some(_) => Err(WRONGTYPE.into()),
        }
    }

    pub fn zfirst(&mut self, key: &str) -> Res<Option<String>> {
        Ok(self
            .zset(key)?
            .and_then(|z| z.first().map(|(_, m)| m.clone())))
    }

    pub fn zlast(&mut self, key: &str) -> Res<Option<(f64, String)>> {
        Ok(self.zset(key)?.and_then(|z| z.last().cloned()))
    }

    pub fn zscore(&mut self, key: &str, member: &str) -> Res<Option<f64>> {
        Ok(self
            .zset(key)?
            .and_then(|z| z.iter().find(|(_, m)| m == member).map(|(s, _)| *s)))
    }

    pub fn zadd(&mut self, key: &str, score: f64, member: &str) -> Res<()> {
        if self.zset(key)?.is_none() {
            self.data.insert(
                key.into(),
                Entry {
                    value: Value::Zset(Vec::new()),
                    expire_ms: None,
                },
            );
        }
        let z = self.zset(key)?.expect("just created");
        z.retain(|(_, m)| m != member);
        z.push((score, member.into()));
        z.sort_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .expect("finite scores")
                .then_with(|| a.1.cmp(&b.1))
        });
        Ok(())
    }

    pub fn zrem(&mut self, key: &str, member: &str) -> Res<bool> {
        let Some(z) = self.zset(key)? else {
            return Ok(false);
        };
        let before = z.len();
        z.retain(|(_, m)| m != member);
        let (removed, empty) = (z.len() < before, z.is_empty());
        if empty {
            self.data.remove(key);
        }
        Ok(removed)
    }

    // ---- hashes ----

    fn hash(&mut self, key: &str) -> Res<Option<&mut BTreeMap<String, String>>> {
        match self.entry(key) {
            None => Ok(None),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(Some(h)),
            Some(_) => Err(WRONGTYPE.into()),
        }
    }

    pub fn hget(&mut self, key: &str, field: &str) -> Res<Option<String>> {
        Ok(self.hash(key)?.and_then(|h| h.get(field).cloned()))
    }

    pub fn hset(&mut self, key: &str, field: &str, value: &str) -> Res<()> {
        if self.hash(key)?.is_none() {
            self.data.insert(
                key.into(),
                Entry {
                    value: Value::Hash(BTreeMap::new()),
                    expire_ms: None,
                },
            );
        }
        self.hash(key)?
            .expect("just created")
            .insert(field.into(), value.into());
        Ok(())
    }

    pub fn hdel(&mut self, key: &str, field: &str) -> Res<bool> {
        let Some(h) = self.hash(key)? else {
            return Ok(false);
        };
        let removed = h.remove(field).is_some();
        if h.is_empty() {
            self.data.remove(key);
        }
        Ok(removed)
    }

    // ---- history ----

    /// Every stretch during which string `key` held `value`, as `[start, end)`; a current value
    /// ends when the key expires (or never, without expiry).
    pub fn holdings(&self, key: &str, value: &str) -> Vec<(Instant, Instant)> {
        let mut out = Vec::new();
        for (i, iv) in self.history.iter().enumerate() {
            if iv.key != key || iv.value != value {
                continue;
            }
            let end = match iv.end {
                Some(e) => e,
                None => {
                    debug_assert_eq!(self.open.get(key), Some(&i));
                    match self.data.get(key).and_then(|e| e.expire_ms) {
                        Some(w) => self.expiry_instant(w),
                        None => far_future(),
                    }
                }
            };
            out.push((iv.start, end));
        }
        out
    }
}
