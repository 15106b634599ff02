//! A BUSY spell on a test server, for the Redis fixture's `transient_errors` steps: a Lua
//! script that spins for N ms on its own connection, with `busy-reply-threshold` lowered so every
//! other client is answered `-BUSY` meanwhile (as a long script or a `SCRIPT KILL`-able stall
//! does in production).

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Spins until `ARGV[1]` ms of server time have passed (TIME is real time inside a script).
const SPIN: &str = r#"local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local stop = now_ms() + tonumber(ARGV[1])
while now_ms() < stop do end
return 1
"#;

/// How long the server may run a script before it answers others `-BUSY` during a spell.
const THRESHOLD_MS: u64 = 50;

/// A spell in progress; [`finish`](Self::finish) waits for its end and restores the config.
pub struct BusySpell {
    url: String,
    old_threshold: String,
    spinner: Option<JoinHandle<Result<(), String>>>,
}

fn connect(url: &str) -> Result<redis::Connection, String> {
    redis::Client::open(url).and_then(|c| c.get_connection()).map_err(|e| format!("busy spell: {e}"))
}

impl BusySpell {
    /// Starts a spell of `ms` and returns once the server answers `-BUSY` (so the steps after it
    /// run inside the spell).
    pub fn start(url: &str, ms: u64) -> Result<BusySpell, String> {
        let mut conn = connect(url)?;
        let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("busy-reply-threshold").query(&mut conn).map_err(|e| format!("busy spell: {e}"))?;
        let old_threshold = got.get(1).cloned().ok_or("busy spell: CONFIG GET busy-reply-threshold returned nothing")?;
        redis::cmd("CONFIG").arg("SET").arg("busy-reply-threshold").arg(THRESHOLD_MS).query::<()>(&mut conn).map_err(|e| format!("busy spell: {e}"))?;
        let mut spin_conn = connect(url)?;
        let spinner = thread::spawn(move || {
            redis::cmd("EVAL").arg(SPIN).arg(0).arg(ms).query::<i64>(&mut spin_conn).map(|_| ()).map_err(|e| format!("busy spell script: {e}"))
        });
        let mut spell = BusySpell { url: url.to_string(), old_threshold, spinner: Some(spinner) };
        let give_up = Instant::now() + Duration::from_secs(5);
        loop {
            match redis::cmd("PING").query::<String>(&mut conn) {
                Err(e) if e.code() == Some("BUSY") => return Ok(spell),
                _ if Instant::now() > give_up => {
                    let _ = spell.finish();
                    return Err("busy spell: the server never answered BUSY".into());
                }
                _ => thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Waits for the script to end, then restores `busy-reply-threshold`.
    pub fn finish(&mut self) -> Result<(), String> {
        let spun = match self.spinner.take() {
            Some(t) => t.join().unwrap_or_else(|_| Err("busy spell thread panicked".into())),
            None => return Ok(()),
        };
        let mut conn = connect(&self.url)?;
        redis::cmd("CONFIG").arg("SET").arg("busy-reply-threshold").arg(&self.old_threshold).query::<()>(&mut conn).map_err(|e| format!("busy spell: {e}"))?;
        spun
    }
}

impl Drop for BusySpell {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
