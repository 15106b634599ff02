//! The Redlock model: N independent [`SimRedis`] masters, each running the three Redlock
//! scripts of `core/src/backend/redlock/scripts.rs` (PROTOCOL.md §8) statement by statement, addressed
//! by the engine's per-master requests (`Conn::Server(master)`). Masters push nothing and keep
//! no session; each has its own clock (which may run fast: `Store::fast_ppm`), uptime (the
//! delayed-restart rule reads it) and script cache, and restarts on its own.

use std::convert::Infallible;

use lockgate_core::engine::LockEngine;
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redlock::scripts as scripts;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redlock::{NodeRequest, RedlockBackend, RedlockConfig, RedlockEngine, RedlockOutcome};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, Primitive, RequestId};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model};
use super::redis::{SimRedis, PREFIX};
use super::store::Res;

/// SHA-1 digests of the Redlock scripts this file re-implements, in the order of
/// `lockgate_core::backend::redlock::scripts::all()`.
///
/// Version 9's label key (`KEYS[2]`, PROTOCOL.md §12) is not modelled: the simulated clients
/// pass no label, and no script decision reads it; the lock key (`KEYS[1]`) behaves as before.
/// Version 11's REDLOCK_INSPECT writes nothing and simulated clients never send it.
pub const MODELLED: [(&str, &str); 4] = [
    ("REDLOCK_ACQUIRE", "7b7c9fd01510695225b0daa44a079ee0796f79c3"),
    ("REDLOCK_RELEASE", "e96b566a74a6090315e491a0b8e0f0e3a19a074d"),
    ("REDLOCK_EXTEND", "2c965acb1ce8b002fed170094d5caa34bebcf2b8"),
    ("REDLOCK_INSPECT", "3f2fa2315ed829f6cdd7427c21b5636c249b4d90"),
];

/// The simulator over the Redlock model.
pub type RedlockSim = Sim<SimRedlock>;

/// N masters of one Redlock deployment and the configuration every client uses.
pub struct SimRedlock {
    pub config: RedlockConfig,
    pub masters: Vec<SimRedis>,
}

impl SimRedlock {
    /// `config.masters` masters, each up for an hour already (so the delayed-restart rule lets
    /// them grant from the start).
    pub fn new(config: RedlockConfig) -> SimRedlock {
        let masters = (0..config.masters)
            .map(|_| {
                let mut m = SimRedis::default();
                m.uptime_before = Duration::from_secs(3600);
                m
            })
            .collect();
        SimRedlock { config, masters }
    }

    /// The key of Redlock `name` on every master.
    pub fn key(&self, name: &str) -> String {
        scripts::key(&self.config.key_prefix, name)
    }
}

impl Model for SimRedlock {
    type Backend = RedlockBackend;
    type Request = NodeRequest;
    type Answer = Reply;
    /// Masters push nothing.
    type Push = Infallible;
    type Outcome = RedlockOutcome;

    fn engine(&self, rng: SeededRandom) -> RedlockEngine {
        RedlockEngine::new(self.config.clone(), Box::new(rng)).expect("valid Redlock config")
    }

    fn servers(&self) -> usize {
        self.masters.len()
    }

    fn request_id(req: &NodeRequest) -> RequestId {
        req.id
    }

    fn route(&self, req: &NodeRequest) -> Conn {
        Conn::Server(req.master)
    }

    fn serve(&mut self, now: Instant, _client: ClientId, _crashed: bool, req: NodeRequest, _pushes: &mut Vec<(ClientId, Infallible)>) -> Result<Reply, Error> {
        Ok(self.masters[req.master].exec(now, &req.command))
    }

    fn notify(_engine: &mut LockEngine<RedlockBackend>, _now: Instant, push: &Infallible) {
        match *push {}
    }

    fn restart(&mut self, server: usize, now: Instant, _drop_connections: bool, clock_jump: Duration) {
        self.masters[server].restart_without_persistence(now, clock_jump.as_micros() as u64);
    }

    fn belief_key(&self, name: &str, _primitive: &Primitive) -> String {
        self.key(name)
    }

    /// Every key left on any master, as `m<i>:<key>`.
    fn lock_state_left(&mut self, now: Instant) -> Vec<String> {
        let mut left = Vec::new();
        for (i, m) in self.masters.iter_mut().enumerate() {
            m.store.set_now(now);
            left.extend(m.store.keys().into_iter().map(|k| format!("m{i}:{k}")));
        }
        left
    }
}

impl Sim<SimRedlock> {
    /// A Redlock simulation with `config`'s masters.
    pub fn redlock(config: RedlockConfig, seed: u64, net: super::NetConfig) -> RedlockSim {
        assert_eq!(config.key_prefix, PREFIX);
        Sim::with_model(SimRedlock::new(config), seed, net)
    }
}

/// Runs Redlock script `name` on master `db` (called by `SimRedis::exec` with the script's
/// `KEYS` and `ARGV`; errors raised by `redis.call` are `Err`).
pub fn run_script(db: &mut SimRedis, now: Instant, name: &str, keys: &[String], argv: &[String]) -> Res<Reply> {
    let missing = || "ERR Lua redis lib command arguments must be strings or integers".to_string();
    let key = keys.first().ok_or_else(missing)?;
    let value = argv.first().ok_or_else(missing)?;
    match name {
        "REDLOCK_ACQUIRE" => {
            let num = |i: usize| argv.get(i).and_then(|s| s.trim().parse::<f64>().ok()).filter(|n| n.is_finite());
            let max_lease = match (num(1), num(2)) {
                (Some(lease), Some(max)) if lease >= 1.0 && lease <= max => max,
                _ => return Ok(Reply::Error("ERR lockgate: lease must be between 1 ms and the maximum lease".into())),
            };
            if (db.uptime_secs(now) as f64) * 1000.0 < max_lease + 1000.0 {
                return Ok(Reply::Int(-1));
            }
            // SET NX PX: only if the key does not exist (whatever its type).
            if db.store.value(key).is_none() {
                db.store.set_px(key, value, &argv[1])?;
                return Ok(Reply::Int(1));
            }
            let held = db.store.get(key)?.unwrap_or_default();
            match (master_count(&held), master_count(value)) {
                (Some(theirs), Some(ours)) if theirs != ours => {
                    Ok(Reply::Array(vec![Reply::Int(-2), Reply::Data(theirs.as_bytes().to_vec())]))
                }
                _ => Ok(Reply::Int(0)),
            }
        }
        "REDLOCK_RELEASE" => {
            if db.store.get(key)?.as_deref() == Some(value.as_str()) {
                db.store.del(key);
                return Ok(Reply::Int(1));
            }
            Ok(Reply::Int(0))
        }
        "REDLOCK_EXTEND" => {
            if db.store.get(key)?.as_deref() == Some(value.as_str()) {
                let ms: i64 = argv
                    .get(1)
                    .ok_or_else(missing)?
                    .parse()
                    .map_err(|_| "ERR value is not an integer or out of range".to_string())?;
                db.store.pexpire(key, ms);
                return Ok(Reply::Int(1));
            }
            Ok(Reply::Int(0))
        }
        other => Err(format!("ERR unknown script {other}")),
    }
}

/// `string.match(v, ':(%d+)$')`: the digits after the first `:` that only digits follow.
fn master_count(v: &str) -> Option<&str> {
    v.match_indices(':')
        .map(|(i, _)| &v[i + 1..])
        .find(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::{master_count, MODELLED};

    #[test]
    fn sim_models_the_current_redlock_scripts() {
        let all = lockgate_core::backend::redlock::scripts::all();
        assert_eq!(all.len(), MODELLED.len(), "a Redlock script was added or removed: model it in tests/sim/redlock.rs");
        for (script, (name, digest)) in all.into_iter().zip(MODELLED) {
            assert_eq!(script.name, name);
            assert_eq!(script.sha1(), digest, "the {name} script changed: update tests/sim/redlock.rs to match it");
        }
    }

    #[test]
    fn master_counts_parse_like_the_lua_pattern() {
        assert_eq!(master_count("abc:3"), Some("3"));
        assert_eq!(master_count("a:b:12"), Some("12"));
        assert_eq!(master_count("abc:"), None);
        assert_eq!(master_count("abc:3x"), None);
        assert_eq!(master_count("abc"), None);
    }
}
