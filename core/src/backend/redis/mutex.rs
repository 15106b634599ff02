//! The Lua scripts of the Redis mutex (the shared-holder family is in [`super::holders`]). Their text is part of PROTOCOL.md: every binding runs
//! these exact bytes, so their SHA-1 digests match across languages.
//!
//! All expiry decisions use the server clock (`TIME`), never a client's.

use super::script::{lua_clock, Script};

/// Helpers shared by ACQUIRE and RELEASE (prepended to both, so each script is self-contained).
/// Since version 19 they are written for as few commands inside Redis as the same keys and
/// guarantees allow (issue 30): every one is counted by `core/tests/redis_commands.rs`.
macro_rules! prelude {
    () => {
        concat!(lua_clock!(), r#"-- The next fencing token, max(last + 1, server time in us), so it keeps increasing even after
-- the fence key expired or the server restarted empty. SET ... GET writes it and reads the last
-- one in one command; only when the clock has not passed the last token is it written again.
local function fence_next(t_us, lease_ms, retention_ms)
  local px = tonumber(lease_ms) + tonumber(retention_ms)
  local f = fmt(t_us)
  local last = tonumber(redis.call('SET', KEYS[2], f, 'PX', px, 'GET'))
  if last and last >= t_us then
    f = fmt(last + 1)
    redis.call('SET', KEYS[2], f, 'PX', px)
  end
  return f
end
-- Raise the waiters hash's expiry to at least ms; never shorten it.
local function keep_waiters(ms)
  local p = redis.call('PTTL', KEYS[4])
  if p == -1 or (p >= 0 and p < tonumber(ms)) then redis.call('PEXPIRE', KEYS[4], ms) end
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
-- token, or false if nobody live was waiting (the queue is then empty). `mine` (or nil) is one
-- more waiters-hash field to delete, the releasing holder's label: it goes with the head's
-- entry in the same HDEL. Reads the clock only when someone is queued.
local function promote(t_us, retention_ms, mine)
  while true do
    local head = redis.call('ZPOPMIN', KEYS[3])[1]
    if not head then return false end
    t_us = t_us or now_us()
    local got = redis.call('HMGET', KEYS[4], head, 'l:' .. head)
    local entry, labelled = got[1], got[2]
    local deadline, lease, channel
    if entry then deadline, lease, channel = string.match(entry, '^(%d+)|(%d+)|(.+)$') end
    if deadline and tonumber(deadline) >= math.floor(t_us / 1000) then
      if mine then redis.call('HDEL', KEYS[4], head, mine) else redis.call('HDEL', KEYS[4], head) end
      if labelled then keep_waiters(lease) end
      redis.call('SET', KEYS[1], head, 'PX', lease)
      local f = fence_next(t_us, lease, retention_ms)
      redis.call('PUBLISH', channel, 'granted ' .. head .. ' ' .. f)
      return head
    end
    if mine then
      redis.call('HDEL', KEYS[4], head, 'l:' .. head, mine)
      mine = nil
    else
      redis.call('HDEL', KEYS[4], head, 'l:' .. head)
    end
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
local token, lease, label = ARGV[1], ARGV[2], ARGV[7]
if label == '' then label = nil end
-- Reading the holder and taking a free lock are one command: NX sets the key only if it is
-- absent, GET returns what was there (nil: it is ours now, unless a live waiter comes first).
local holder = redis.call('SET', KEYS[1], token, 'NX', 'PX', lease, 'GET')
local t_us
if not holder then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    t_us = now_us()
    prune()
    -- A live head is granted over the key we just set; with none, the queue is now empty.
    holder = promote(t_us, ARGV[6])
  end
  if not holder then
    if label then
      -- Free and nobody queued: whatever else the hash holds is stale, so its expiry may be
      -- set outright to this lease.
      redis.call('HSET', KEYS[4], 'l:' .. token, label)
      redis.call('PEXPIRE', KEYS[4], lease)
    end
    local f = fence_next(t_us or now_us(), lease, ARGV[6])
    return {1, f, tonumber(lease)}
  end
end
if holder == token then
  -- Granted to us earlier (or just now, as the head of the queue).
  return {1, redis.call('GET', KEYS[2]) or '0', redis.call('PTTL', KEYS[1])}
end
if ARGV[3] == 'wait' then
  t_us = t_us or now_us()
  local ttl = tonumber(ARGV[4])
  -- A handoff grants at most one entry lease: a waiter that died while queued frees the lock
  -- that soon; a live one extends to its full lease as soon as it learns of the grant.
  local handoff = math.min(tonumber(lease), ttl)
  local entry = fmt(math.floor(t_us / 1000) + ttl) .. '|' .. fmt(handoff) .. '|' .. ARGV[5]
  local added
  if label then
    added = redis.call('HSET', KEYS[4], token, entry, 'l:' .. token, label)
  else
    added = redis.call('HSET', KEYS[4], token, entry)
  end
  -- A queued waiter has its entry, so a new field means a new waiter; an existing one (a
  -- heartbeat) is looked up in the queue, which it may have left by missing its entry lease.
  if added == 0 and redis.call('ZSCORE', KEYS[3], token) then
    redis.call('PEXPIRE', KEYS[3], ttl, 'GT')
  else
    local tail = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local seq = t_us
    if tail[2] and tonumber(tail[2]) >= seq then seq = tonumber(tail[2]) + 1 end
    redis.call('ZADD', KEYS[3], 'NX', fmt(seq), token)
    -- Every script that creates the queue gives it an expiry, so an existing queue has one and
    -- GT only raises it; a queue just created has none yet.
    if tail[1] then redis.call('PEXPIRE', KEYS[3], ttl, 'GT') else redis.call('PEXPIRE', KEYS[3], ttl) end
  end
  keep_waiters(ttl)
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
if holder == token then
  -- Handing over overwrites the key, and takes our label with the new holder's entry. With
  -- nobody waiting the queue is empty and everything left in the hash is stale (our label,
  -- labels of holders gone before), so the hash goes with the key.
  if not promote(nil, ARGV[2], 'l:' .. token) then redis.call('DEL', KEYS[1], KEYS[4]) end
  return 1
end
redis.call('ZREM', KEYS[3], token)
redis.call('HDEL', KEYS[4], token, 'l:' .. token)
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
