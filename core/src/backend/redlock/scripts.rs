//! The scripts each master of a Redlock runs (PROTOCOL.md §8). Every master is an independent
//! Redis with no knowledge of the others: the quorum is counted by the client.

use crate::backend::redis::script::Script;

/// Takes the lock on one master if it is free, unless the master started too recently to be
/// trusted (the delayed-restart rule).
///
/// `KEYS[1]` lock key, `KEYS[2]` its label key ([`label_key`]); `ARGV[1]` owner value
/// (`<token>:<masters>`, see [`owner_value`]), `ARGV[2]` lease (ms), `ARGV[3]` the deployment's
/// maximum lease (ms), `ARGV[4]` the client's label (PROTOCOL.md §12; empty or absent: none),
/// stored beside the lock key with the same expiry. Returns `1` granted, `0`
/// held by someone, `-1` the master has been up for less than the maximum lease (plus one second
/// of `uptime_in_seconds` rounding) and grants nothing yet: after a restart without persistence
/// it may have forgotten a lock that is still valid on the masters that granted it. Returns
/// `{-2, their_masters}` when the holder there counts another number of masters (its quorum
/// differs from the caller's).
pub static ACQUIRE: Script = Script::new(
    "REDLOCK_ACQUIRE",
    r#"local lease = tonumber(ARGV[2])
local max_lease = tonumber(ARGV[3])
if lease == nil or max_lease == nil or lease < 1 or lease > max_lease then
  return redis.error_reply('ERR lockgate: lease must be between 1 ms and the maximum lease')
end
local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
if up == nil or up * 1000 < max_lease + 1000 then
  return -1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if (ARGV[4] or '') ~= '' then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[2])
  end
  return 1
end
local theirs = string.match(redis.call('GET', KEYS[1]) or '', ':(%d+)$')
local ours = string.match(ARGV[1], ':(%d+)$')
if theirs and ours and theirs ~= ours then
  return {-2, theirs}
end
return 0
"#,
);

/// What a client stores as the key's value on every master: its owner token and the number of
/// masters it counts, so a client of another deployment size meeting the key learns of the
/// disagreement (REDLOCK_RELEASE and REDLOCK_EXTEND compare the whole value).
pub fn owner_value(token: &str, masters: usize) -> String {
    format!("{token}:{masters}")
}

/// Deletes the lock (and its label) on one master if `ARGV[1]` owns it. Returns `1` if it did,
/// else `0`. A label whose lock key is gone there (deleted behind its holder's back) is deleted
/// too: it labels nobody. `KEYS` as for [`ACQUIRE`].
pub static RELEASE: Script = Script::new(
    "REDLOCK_RELEASE",
    r#"local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
if not holder then redis.call('DEL', KEYS[2]) end
return 0
"#,
);

/// Sets the remaining lease to `ARGV[2]` ms on one master if `ARGV[1]` still owns it there;
/// never re-creates a lock that vanished; its label lives as long. A label whose lock key is gone
/// there is deleted (as by [`RELEASE`]): it labels nobody. Returns `1` if extended, else `0`.
/// `KEYS` as for [`ACQUIRE`].
pub static EXTEND: Script = Script::new(
    "REDLOCK_EXTEND",
    r#"local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
if not holder then redis.call('DEL', KEYS[2]) end
return 0
"#,
);

/// REDLOCK_INSPECT (since version 11): reads one master's key, changing nothing.
/// `KEYS[1]` lock key, `KEYS[2]` its label key; no ARGV. Returns `{owner value or '', pttl_ms,
/// label or ''}`.
pub static INSPECT: Script = Script::new(
    "REDLOCK_INSPECT",
    r#"
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
"#,
);

/// The Redlock scripts, for documentation and preloading.
pub fn all() -> [&'static Script; 4] {
    [&ACQUIRE, &RELEASE, &EXTEND, &INSPECT]
}

/// The key of Redlock `name` on every master: `<prefix>{<name>}:redlock` (apart from the
/// single-instance mutex of the same name, whose scripts it must never meet).
pub fn key(prefix: &str, name: &str) -> String {
    format!("{prefix}{{{name}}}:redlock")
}

/// The key of the holder's label beside Redlock key `key` (`<key>:label`, PROTOCOL.md §12), the
/// scripts' `KEYS[2]`.
pub fn label_key(key: &str) -> String {
    format!("{key}:label")
}

#[cfg(test)]
mod tests {
    #[test]
    fn protocol_md_lists_every_digest() {
        let doc = include_str!("../../../../PROTOCOL.md");
        for s in super::all() {
            assert!(doc.contains(s.sha1()), "PROTOCOL.md lacks {} {}", s.name, s.sha1());
        }
    }

    #[test]
    fn key_is_apart_from_the_mutex() {
        let k = super::key("lockgate:", "orders");
        assert_eq!(k, "lockgate:{orders}:redlock");
        assert!(!crate::backend::redis::keys::MutexKeys::new("lockgate:", "orders").all().contains(&k.as_str()));
    }
}
