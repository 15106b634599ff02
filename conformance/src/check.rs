//! Per-run state: lock-name mapping, saved fencing tokens, and the checks of expectations.
//! (What the servers hold is checked by the variant's fixture, `fixture/`.)

use std::collections::HashMap;

use serde_json::Value;

use crate::actor::Timed;

/// Starts the failure of a reply that was right in every expectation but came later than its
/// `within_ms` bound: the one failure a loaded machine can cause on its own (the orchestrator
/// runs such a run once more, [`only_late`]).
pub const LATE: &str = "late reply: ";

/// Whether a run's failure is a [`LATE`] reply and nothing else.
pub fn only_late(error: &str) -> bool {
    error.contains(LATE)
}

pub struct Context {
    run: String,
    fencing: bool,
    /// The variant's capabilities: a bound given per capability (`within_ms: {...}`) picks
    /// by them.
    capabilities: Vec<&'static str>,
    tokens: HashMap<String, u128>,
    /// Lease identities an `export` saved (a later `adopt` passes one by `identity_from`).
    identities: HashMap<String, String>,
    /// Hammer records: (token, if the grant had one; enter ns; exit ns).
    hammers: HashMap<String, Vec<(Option<u128>, u128, u128)>>,
}

impl Context {
    /// `capabilities`: the variant's. Without `fencing` every grant must come without a
    /// token, and `token_gt`/`token_eq` expect exactly that.
    pub fn new(run: &str, capabilities: &[&'static str]) -> Self {
        Context {
            run: run.into(),
            fencing: capabilities.contains(&"fencing"),
            capabilities: capabilities.to_vec(),
            tokens: HashMap::new(),
            identities: HashMap::new(),
            hammers: HashMap::new(),
        }
    }

    /// A bound in ms: a number, or per capability (`{"etcd": 1800, "any": 1500}`: the first
    /// key the variant has, else `any`), for a bound a backend documents differently (README
    /// "What a crash costs").
    pub fn bound_ms(&self, v: &Value) -> Result<u128, String> {
        if let Some(n) = v.as_u64() {
            return Ok(n.into());
        }
        let map = v.as_object().ok_or(format!("a bound must be a number of ms or an object of them by capability: {v}"))?;
        let pick = map.iter().find(|(k, _)| self.capabilities.contains(&k.as_str())).or_else(|| map.iter().find(|(k, _)| *k == "any"));
        let (_, n) = pick.ok_or(format!("no bound in {v} for this variant (add \"any\")"))?;
        n.as_u64().map(u128::from).ok_or(format!("a bound must be a number of ms: {n}"))
    }

    /// Scenario lock names are local; each run gets its own real names so runs never interfere.
    pub fn lock_name(&self, local: &str) -> String {
        if local.is_empty() || local.starts_with('!') {
            // `""` and `!…` are literal (bad-input scenarios pass them through untouched).
            return local.trim_start_matches('!').to_string();
        }
        format!("{}.{local}", self.run)
    }

    /// The operation to send: the step minus orchestration fields, with the lock name mapped.
    pub fn operation(&self, step: &Value) -> Value {
        let mut op = step.clone();
        if let Some(map) = op.as_object_mut() {
            for k in ["actor", "expect", "async", "save"] {
                map.remove(k);
            }
            if let Some(l) = map.get("lock").and_then(Value::as_str).map(str::to_string) {
                let name = if let Some(n) = map.get("repeat_name").and_then(Value::as_u64) {
                    "n".repeat(n as usize)
                } else {
                    self.lock_name(&l)
                };
                map.insert("lock".into(), Value::from(name));
            }
            map.remove("repeat_name");
            // A lease identity another actor exported (an `adopt` of it).
            if let Some(n) = map.remove("identity_from").and_then(|n| n.as_str().map(str::to_string)) {
                if let Some(id) = self.identities.get(&n) {
                    map.insert("identity".into(), Value::from(id.clone()));
                }
            }
            // A saved fencing token as an argument (a break naming a holder by it); a
            // backend without tokens saved none: the step goes without.
            if let Some(n) = map.remove("token_from").and_then(|n| n.as_str().map(str::to_string)) {
                if let Some(t) = self.tokens.get(&n) {
                    map.insert("token".into(), Value::from(t.to_string()));
                }
            }
        }
        op
    }

    /// Checks a reply against the step's `expect` and records tokens / hammer records.
    pub fn expect(&mut self, step: &Value, reply: &Timed, label: &str) -> Result<(), String> {
        let r = &reply.value;
        if let Some(records) = r.get("records").and_then(Value::as_array) {
            let parsed = records
                .iter()
                .map(|rec| {
                    let f = |i: usize| rec.get(i).and_then(|v| v.as_str().map(str::to_string).or_else(|| v.as_u64().map(|n| n.to_string())));
                    // A Redlock grant has no token: null.
                    let token = match rec.get(0) {
                        Some(Value::Null) => None,
                        _ => Some(f(0)?.parse().ok()?),
                    };
                    Some((token, f(1)?.parse().ok()?, f(2)?.parse().ok()?))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("malformed hammer records: {r}"))?;
            self.hammers.insert(label.to_string(), parsed);
        }
        if let Some(t) = r.get("token").and_then(Value::as_str).and_then(|t| t.parse::<u128>().ok()) {
            self.tokens.insert(label.to_string(), t);
        }
        if let Some(id) = r.get("identity").and_then(Value::as_str) {
            self.identities.insert(label.to_string(), id.to_string());
        }
        let tokenless = r.get("token").is_none_or(Value::is_null)
            && r.get("records").and_then(Value::as_array).is_none_or(|rs| rs.iter().all(|rec| rec.get(0).is_some_and(Value::is_null)));
        if !self.fencing && !tokenless {
            return Err(format!("a backend without fencing gave a token: {r}"));
        }
        let Some(want) = step.get("expect").and_then(Value::as_object) else {
            return if r["ok"] == true { Ok(()) } else { Err(format!("unexpected failure: {r}")) };
        };
        let failure = |k: &str, v: &Value| format!("expected {k} = {v}, got {r} after {} ms", reply.elapsed.as_millis());
        let mut late = None;
        for (k, v) in want {
            let ok = match k.as_str() {
                "within_ms" => {
                    // Checked after every other expectation: a reply that is only late says
                    // so (LATE), one that is also wrong fails as wrong.
                    if reply.elapsed.as_millis() > self.bound_ms(v)? {
                        late = Some(v);
                    }
                    true
                }
                "token_absent" => r.get("token").is_none_or(Value::is_null) == (v == &Value::Bool(true)),
                "at_least_ms" => reply.elapsed.as_millis() >= self.bound_ms(v)?,
                // Without fencing the grant carries no token (checked above for every reply).
                "token_gt" | "token_eq" if !self.fencing => true,
                "token_gt" | "token_eq" => {
                    let other = v.as_str().and_then(|n| self.tokens.get(n)).ok_or(format!("no token saved as {v}"))?;
                    let mine = r.get("token").and_then(Value::as_str).and_then(|t| t.parse::<u128>().ok());
                    mine.is_some_and(|m| if k == "token_gt" { m > *other } else { m == *other })
                }
                key => r.get(key) == Some(v),
            };
            if !ok {
                return Err(failure(k, v));
            }
        }
        match late {
            Some(v) => Err(format!("{LATE}{}", failure("within_ms", v))),
            None => Ok(()),
        }
    }

    /// Merges the records of several `hammer` replies. With `permits == 1` (an exclusive lock:
    /// mutex, write half, leadership) no two holdings overlap in time and fencing tokens increase
    /// in the order the holdings began; with more (a semaphore) at most `permits` holdings
    /// overlap at any instant and every grant has its own token. Holdings without tokens (Redlock)
    /// are checked for overlap only.
    pub fn check_hammer(&self, labels: &[Value], permits: u64) -> Result<(), String> {
        let mut all: Vec<(Option<u128>, u128, u128)> = Vec::new();
        for l in labels {
            let l = l.as_str().unwrap_or_default();
            all.extend(self.hammers.get(l).ok_or(format!("no hammer records saved as {l}"))?);
        }
        if permits > 1 {
            let mut tokens: Vec<u128> = all.iter().filter_map(|r| r.0).collect();
            tokens.sort_unstable();
            if let Some(w) = tokens.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!("fencing token {} granted twice", w[0]));
            }
            // Sweep: at equal times an exit comes before an enter (sort key 0 before 1).
            let mut events: Vec<(u128, u8)> = all.iter().flat_map(|r| [(r.1, 1), (r.2, 0)]).collect();
            events.sort_unstable();
            let mut inside = 0u64;
            for (at, kind) in events {
                if kind == 1 {
                    inside += 1;
                    if inside > permits {
                        return Err(format!("{inside} holdings at once (at {at} ns), more than {permits} permits"));
                    }
                } else {
                    inside = inside.saturating_sub(1);
                }
            }
            return Ok(());
        }
        all.sort_by_key(|r| r.1);
        for w in all.windows(2) {
            if w[1].1 < w[0].2 {
                return Err(format!("holdings overlap: {:?} (token) entered at {} ns before {:?} left at {} ns", w[1].0, w[1].1, w[0].0, w[0].2));
            }
            if let (Some(a), Some(b)) = (w[0].0, w[1].0) {
                if b <= a {
                    return Err(format!("fencing tokens not increasing: {a} then {b}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{only_late, Context};
    use crate::actor::Timed;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn only_a_reply_right_in_everything_but_its_time_is_late() {
        let mut c = Context::new("r", &["fencing"]);
        let step = json!({"expect": {"ok": false, "error": "TIMEOUT", "at_least_ms": 200, "within_ms": 600}});
        let reply = |error: &str, ms: u64| Timed { value: json!({"ok": false, "error": error}), elapsed: Duration::from_millis(ms) };
        assert_eq!(c.expect(&step, &reply("TIMEOUT", 650), "x").map_err(|e| only_late(&e)), Err(true));
        // Wrong and late, or early: a failure of its own, never run twice.
        assert_eq!(c.expect(&step, &reply("CONNECTION", 650), "x").map_err(|e| only_late(&e)), Err(false));
        assert_eq!(c.expect(&step, &reply("TIMEOUT", 150), "x").map_err(|e| only_late(&e)), Err(false));
        assert_eq!(c.expect(&step, &reply("TIMEOUT", 400), "x"), Ok(()));
    }

    #[test]
    fn a_bound_by_capability_picks_the_variants_or_any() {
        let etcd = Context::new("r", &["fencing", "etcd"]);
        let redis = Context::new("r", &["fencing", "redis"]);
        let bound = json!({"etcd": 1800, "any": 1500});
        assert_eq!(etcd.bound_ms(&bound), Ok(1800));
        assert_eq!(redis.bound_ms(&bound), Ok(1500));
        assert_eq!(redis.bound_ms(&json!(700)), Ok(700));
        assert!(redis.bound_ms(&json!({"etcd": 1800})).unwrap_err().contains("any"));
        assert!(redis.bound_ms(&json!("soon")).is_err());
    }
}
