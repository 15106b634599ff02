//! The Lua scripts of the Redis mutex (the shared-holder family is in [`super::holders`]). Their text is part of PROTOCOL.md: every binding runs
//! these exact bytes, so their SHA-1 digests match across languages.
//!
//! All expiry decisions use the server clock (`TIME`), never a client's.

use super::script::{lua_clock, Script};

/// Helpers shared by ACQUIRE and RELEASE (prepended to both, so each script is self-contained).
macro_rules! prelude {
    () => {
        concat!(lua_clock!(), r#"-- Grant KEYS[1] to token; the fencing token is max(last + 1, server time in us), so it keeps
-- increasing even after the fence key expired or the server restarted empty.
local function grant(token, lease_ms, t_us, retention_ms)
  redis.call('SET', KEYS[1], token, 'PX', lease_ms)
  local last = tonumber(redis.call('GET', KEYS[2])) or 0
  local fence = last + 1
  if t_us > fence then fence = t_us end
  local f = fmt(fence)
  redis.call('SET', KEYS[2], f, 'PX', tonumber(lease_ms) + tonumber(retention_ms))
  return f
end
-- Raise the waiters hash's expiry to at least ms; never shorten it.
local function keep_waiters(ms)
  local p = redis.call('PTTL', KEYS[4])
  if p == -1 or (p >= 0 and p < tonumber(ms)) then redis.call('PEXPIRE', KEYS[4], ms) end
end
-- A holder's or waiter's label (PROTOCOL.md §12) lives in the waiters hash as `l:<token>`,
-- kept at least as long as its entry.
local function label(token, text, ms)
  if text and text ~= '' then
    redis.call('HSET', KEYS[4], 'l:' .. token, text)
    keep_waiters(ms)
  end
end
-- While nobody holds the lock, every label of a token no longer queued is stale (a holder whose
-- key expired, a waiter skipped dead or by an older client): removed before the turn passes on.
local function prune()
  for _, field in ipairs(redis.call('HKEYS', KEYS[4])) do
    if string.sub(field, 1, 2) == 'l:' and not redis.call('ZSCORE', KEYS[3], string.sub(field, 3)) then
      redis.call('HDEL', KEYS[4], field)
    end
  end
end
-- Hand a free lock to the oldest live waiter and wake only that waiter. Returns the waiter's
-- token, or false if nobody live was waiting. Reads the clock only when someone is queued.
local function promote(t_us, retention_ms)
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then return false end
    t_us = t_us or now_us()
    local entry = redis.call('HGET', KEYS[4], head)
    redis.call('ZREM', KEYS[3], head)
    redis.call('HDEL', KEYS[4], head)
    if entry then
      local deadline, lease, channel = string.match(entry, '^(%d+)|(%d+)|(.+)$')
      if deadline and tonumber(deadline) >= math.floor(t_us / 1000) then
        if redis.call('HEXISTS', KEYS[4], 'l:' .. head) == 1 then keep_waiters(lease) end
        local f = grant(head, lease, t_us, retention_ms)
        redis.call('PUBLISH', channel, 'granted ' .. head .. ' ' .. f)
        return head
      end
    end
    redis.call('HDEL', KEYS[4], 'l:' .. head)
  end
end
"#)
    };
}

/// ACQUIRE — try to take the lock, or join/refresh the wait queue.
///
/// KEYS: lock, fence, queue, waiters. ARGV: token, lease_ms, mode (`try`|`wait`),
/// entry_ttl_ms, channel, retention_ms, label (PROTOCOL.md §12; empty or absent: none).
/// Returns `{1, fence, pttl_ms}` when `token` holds the lock, `{0, current_fence, holder_pttl_ms}`
/// otherwise (`current_fence` is `0` when no fence key exists).
pub static ACQUIRE: Script = Script::new(
    "acquire",
    concat!(
        prelude!(),
        r#"
local token = ARGV[1]
local holder = redis.call('GET', KEYS[1])
local t_us
if not holder then
  t_us = now_us()
  prune()
  holder = promote(t_us, ARGV[6])
  if not holder then
    label(token, ARGV[7], ARGV[2])
    local f = grant(token, ARGV[2], t_us, ARGV[6])
    return {1, f, tonumber(ARGV[2])}
  end
end
if holder == token then
  -- Granted to us earlier (or just now, as the head of the queue).
  return {1, redis.call('GET', KEYS[2]) or '0', redis.call('PTTL', KEYS[1])}
end
if ARGV[3] == 'wait' then
  t_us = t_us or now_us()
  local ttl = tonumber(ARGV[4])
  if not redis.call('ZSCORE', KEYS[3], token) then
    local tail = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local seq = t_us
    if tail[2] and tonumber(tail[2]) >= seq then seq = tonumber(tail[2]) + 1 end
    redis.call('ZADD', KEYS[3], fmt(seq), token)
  end
  -- A handoff grants at most one entry lease: a waiter that died while queued frees the lock
  -- that soon; a live one extends to its full lease as soon as it learns of the grant.
  local handoff = math.min(tonumber(ARGV[2]), ttl)
  redis.call('HSET', KEYS[4], token, fmt(math.floor(t_us / 1000) + ttl) .. '|' .. fmt(handoff) .. '|' .. ARGV[5])
  label(token, ARGV[7], ttl)
  for i = 3, 4 do
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
return {0, redis.call('GET', KEYS[2]) or '0', redis.call('PTTL', KEYS[1])}
"#
    ),
);

/// RELEASE — owner-only delete, also used to cancel a wait; passes the lock to the next waiter.
///
/// KEYS: lock, fence, queue, waiters. ARGV: token, retention_ms.
/// Returns 1 if `token` held the lock, 0 otherwise.
pub static RELEASE: Script = Script::new(
    "release",
    concat!(
        prelude!(),
        r#"
local token = ARGV[1]
local holder = redis.call('GET', KEYS[1])
redis.call('HDEL', KEYS[4], 'l:' .. token)
if holder == token then
  -- Handing over overwrites the key, so it is deleted only when nobody is waiting.
  if not promote(nil, ARGV[2]) then redis.call('DEL', KEYS[1]) end
  return 1
end
redis.call('ZREM', KEYS[3], token)
redis.call('HDEL', KEYS[4], token)
if not holder then
  prune()
  promote(nil, ARGV[2])
end
return 0
"#
    ),
);

/// EXTEND — owner-only PEXPIRE; never re-creates a vanished key. The holder's label (in the
/// waiters hash) is kept at least as long.
///
/// KEYS: lock, fence, queue, waiters. ARGV: token, lease_ms. Returns 1 if extended, 0 if
/// `token` no longer holds it.
pub static EXTEND: Script = Script::new(
    "extend",
    r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('HEXISTS', KEYS[4], 'l:' .. ARGV[1]) == 1 then
    local p = redis.call('PTTL', KEYS[4])
    if p == -1 or (p >= 0 and p < tonumber(ARGV[2])) then redis.call('PEXPIRE', KEYS[4], ARGV[2]) end
  end
  return 1
end
return 0
"#,
);

/// INSPECT (since version 11): reads the mutex, changing nothing (an operator's or a
/// dashboard's view, PROTOCOL.md §14).
///
/// KEYS: lock, fence, queue, waiters. No ARGV. Returns `{now_us, holder_token, pttl_ms, fence,
/// queue, waiters}`: the server time in µs, the holder's token (`''` for none) and PTTL, the
/// fence key (`'0'` for none), the queue as `ZRANGE ... WITHSCORES` and the waiters hash as
/// `HGETALL` (entries and `l:` labels).
pub static INSPECT: Script = Script::new(
    "inspect",
    concat!(
        lua_clock!(),
        r#"
return {fmt(now_us()), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        redis.call('GET', KEYS[2]) or '0', redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'),
        redis.call('HGETALL', KEYS[4])}
"#
    ),
);
