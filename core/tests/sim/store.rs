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

/// One stretch of time during which a member belonged to a sorted set with a live score (for
/// the holders sets of the shared primitives: the server-side lease of one holder).
#[derive(Clone, Debug)]
pub struct Membership {
    pub key: String,
    pub member: String,
    pub start: Instant,
    /// `None` while still a member (its end then follows from its score, the holder's lease end
    /// in server ms, and the key's expiry).
    pub end: Option<Instant>,
    pub score: f64,
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
    /// How fast the server's clock runs, in parts per million beyond real (virtual) time: its
    /// keys expire that much early. Set it before the first command.
    pub fast_ppm: u64,
    history: Vec<Interval>,
    open: HashMap<String, usize>,
    memberships: Vec<Membership>,
    open_members: HashMap<(String, String), usize>,
}

impl Store {
    pub fn set_now(&mut self, now: Instant) {
        assert!(now >= self.now, "virtual time went backwards");
        self.now = now;
    }

    /// The server's `TIME` in microseconds.
    pub fn server_us(&self) -> u64 {
        EPOCH_US + self.clock_jump_us + self.fast(self.now.since_origin().as_micros() as u64)
    }

    /// Virtual microseconds as the server's clock counts them.
    fn fast(&self, us: u64) -> u64 {
        us + (us as u128 * self.fast_ppm as u128 / 1_000_000) as u64
    }

    fn server_ms(&self) -> u64 {
        self.server_us() / 1000
    }

    /// The first virtual instant at which a key with expiry `when_ms` no longer exists.
    pub fn expiry_instant(&self, when_ms: u64) -> Instant {
        let target = ((when_ms + 1) * 1000).saturating_sub(EPOCH_US + self.clock_jump_us);
        // The first virtual µs the server's clock counts as `target` or later.
        let mut us = (target as u128 * 1_000_000 / (1_000_000 + self.fast_ppm as u128)) as u64;
        while self.fast(us) < target {
            us += 1;
        }
        while us > 0 && self.fast(us - 1) >= target {
            us -= 1;
        }
        Instant::from_origin(Duration::from_micros(us))
    }

    fn close(&mut self, key: &str, at: Instant) {
        if let Some(i) = self.open.remove(key) {
            self.history[i].end = Some(at);
        }
        self.close_members(key, at);
    }

    /// The first virtual instant at which a member scored `score` (ms) is no longer live.
    fn score_end(&self, score: f64) -> Instant {
        self.expiry_instant(score.max(0.0) as u64)
    }

    fn close_member(&mut self, key: &str, member: &str, at: Instant) {
        if let Some(i) = self
            .open_members
            .remove(&(key.to_string(), member.to_string()))
        {
            let end = at.min(self.score_end(self.memberships[i].score));
            let m = &mut self.memberships[i];
            m.end = Some(end.max(m.start));
        }
    }

    /// Every member of `key` leaves at `at` (the key was deleted, expired or overwritten).
    fn close_members(&mut self, key: &str, at: Instant) {
        let members: Vec<String> = self
            .open_members
            .keys()
            .filter(|(k, _)| k == key)
            .map(|(_, m)| m.clone())
            .collect();
        for m in members {
            self.close_member(key, &m, at);
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
        let now = self.now;
        let id = (key.to_string(), member.to_string());
        match self.open_members.get(&id) {
            Some(&i) if self.score_end(self.memberships[i].score) > now => {
                self.memberships[i].score = score
            }
            _ => {
                self.close_member(key, member, now);
                self.memberships.push(Membership {
                    key: key.into(),
                    member: member.into(),
                    start: now,
                    end: None,
                    score,
                });
                self.open_members.insert(id, self.memberships.len() - 1);
            }
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
        if removed {
            let now = self.now;
            self.close_member(key, member, now);
        }
        Ok(removed)
    }

    pub fn zcard(&mut self, key: &str) -> Res<usize> {
        Ok(self.zset(key)?.map_or(0, |z| z.len()))
    }

    /// `ZRANGE key 0 0 WITHSCORES`.
    pub fn zfirst_scored(&mut self, key: &str) -> Res<Option<(f64, String)>> {
        Ok(self.zset(key)?.and_then(|z| z.first().cloned()))
    }

    /// `ZRANGEBYSCORE key -inf (max`.
    pub fn zbelow(&mut self, key: &str, max: f64) -> Res<Vec<String>> {
        Ok(self.zset(key)?.map_or_else(Vec::new, |z| {
            z.iter()
                .filter(|(s, _)| *s < max)
                .map(|(_, m)| m.clone())
                .collect()
        }))
    }

    /// How many members a sorted set has, without expiring anything (for `run_until` conditions).
    pub fn peek_zcard(&self, key: &str) -> usize {
        match self.data.get(key) {
            Some(Entry {
                value: Value::Zset(z),
                ..
            }) => z.len(),
            _ => 0,
        }
    }

    /// The members of a sorted set, in order (tests).
    pub fn zmembers(&mut self, key: &str) -> Vec<(f64, String)> {
        match self.entry(key) {
            Some(Entry {
                value: Value::Zset(z),
                ..
            }) => z.clone(),
            _ => Vec::new(),
        }
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

    /// The end of an open membership: the member's lease end, or the key's expiry if earlier.
    fn open_member_end(&self, m: &Membership) -> Instant {
        let by_score = self.score_end(m.score);
        match self.data.get(&m.key).and_then(|e| e.expire_ms) {
            Some(w) => by_score.min(self.expiry_instant(w)),
            None => by_score,
        }
    }

    /// Every stretch during which `member` was a live member of sorted set `key`, as
    /// `[start, end)`: from its ZADD until it was removed, its score (lease end) passed or the
    /// key vanished.
    pub fn memberships(&self, key: &str, member: &str) -> Vec<(Instant, Instant)> {
        self.memberships_of(key)
            .into_iter()
            .filter(|(m, _, _)| m == member)
            .map(|(_, s, e)| (s, e))
            .collect()
    }

    /// Every membership of sorted set `key`: `(member, start, end)`.
    pub fn memberships_of(&self, key: &str) -> Vec<(String, Instant, Instant)> {
        self.memberships
            .iter()
            .filter(|m| m.key == key)
            .map(|m| {
                let end = m.end.unwrap_or_else(|| self.open_member_end(m));
                (m.member.clone(), m.start, end.max(m.start))
            })
            .collect()
    }

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
