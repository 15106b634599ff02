//! The Lua scripts of the shared-holder primitives: counting semaphore, read-write lock and
//! leader election. They share one model: a set of holders, each with its own lease (a sorted set
//! scored by server-time expiry), in one of two modes (`r`: shared, up to a limit; `w`:
//! exclusive), and the same FIFO queue with heartbeat entries and targeted wake-ups as the
//! mutex. Their text is part of PROTOCOL.md.
//!
//! Keys (see [`SharedKeys`](super::keys::SharedKeys)): holders, fence, queue, waiters, info.
//! A holder's or waiter's label (PROTOCOL.md §12) is the info hash's `l:<token>`.

use super::script::Script;

macro_rules! shared_prelude {
    () => {
        concat!(super::script::lua_clock!(), r#"-- Raise a key's expiry to at least ms; never shorten it (other holders' leases live there too).
local function keep(i, ms)
  local p = redis.call('PTTL', KEYS[i])
  if p == -1 or (p >= 0 and p < ms) then redis.call('PEXPIRE', KEYS[i], ms) end
end
-- Holders whose lease ran out (server clock) leave by themselves: a dead holder frees its share.
local function purge(now_ms)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now_ms))
  for _, t in ipairs(dead) do
    redis.call('ZREM', KEYS[1], t)
    redis.call('HDEL', KEYS[5], 'f:' .. t, 'v:' .. t, 'l:' .. t)
  end
end
-- Whether a holder of `kind` ('r' shares up to `limit` holders, 0 = no limit; 'w' is alone)
-- fits beside the current holders.
local function fits(kind, limit)
  local n = redis.call('ZCARD', KEYS[1])
  if n == 0 then return true end
  if kind == 'w' or redis.call('HGET', KEYS[5], 'mode') ~= 'r' then return false end
  return limit == 0 or n < limit
end
-- Adds token as a holder until server time + lease; the fencing token is max(last + 1, server
-- time in us), as for the mutex.
local function grant(token, kind, lease_ms, t_us, retention_ms)
  if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('HSET', KEYS[5], 'mode', kind) end
  redis.call('ZADD', KEYS[1], fmt(math.floor(t_us / 1000) + lease_ms), token)
  local last = tonumber(redis.call('GET', KEYS[2])) or 0
  local fence = last + 1
  if t_us > fence then fence = t_us end
  local f = fmt(fence)
  redis.call('SET', KEYS[2], f, 'PX', lease_ms + tonumber(retention_ms))
  redis.call('HSET', KEYS[5], 'f:' .. token, f)
  keep(1, lease_ms)
  keep(5, lease_ms)
  return f
end
-- Grants the queue head while it fits, waking each granted waiter (and only it) on its channel.
-- Dead entries (deadline passed) are dropped on the way.
local function promote(t_us, retention_ms)
  local now_ms = math.floor(t_us / 1000)
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then return end
    local entry = redis.call('HGET', KEYS[4], head)
    local deadline, lease, kind, limit, channel
    if entry then
      deadline, lease, kind, limit, channel = string.match(entry, '^(%d+)|(%d+)|([rw])|(%d+)|(.+)$')
    end
    if deadline and tonumber(deadline) >= now_ms then
      if not fits(kind, tonumber(limit)) then return end
      redis.call('ZREM', KEYS[3], head)
      redis.call('HDEL', KEYS[4], head)
      local f = grant(head, kind, tonumber(lease), t_us, retention_ms)
      redis.call('PUBLISH', channel, 'granted ' .. head .. ' ' .. f)
    else
      redis.call('ZREM', KEYS[3], head)
      redis.call('HDEL', KEYS[4], head)
      redis.call('HDEL', KEYS[5], 'v:' .. head, 'l:' .. head)
    end
  end
end
"#)
    };
}

/// SHARED_ACQUIRE — take a share (or the exclusive hold), or join/refresh the FIFO queue.
///
/// KEYS: holders, fence, queue, waiters, info. ARGV: token, lease_ms, mode (`try`|`wait`),
/// entry_ttl_ms, channel, retention_ms, kind (`r`|`w`), limit (0 = none), barge (`1` lets a
/// reader join current readers past queued waiters), value (published with the hold, may be
/// empty), setting (the name of the one parameter every participant must agree on, e.g.
/// `permits`; empty: none), its value, and the caller's label (empty or absent: none). Replies as the mutex's ACQUIRE: `{1, fence, pttl_ms}` /
/// `{0, current_fence, earliest_holder_pttl_ms}` (`-2` with no holder), or `{-1, setting,
/// recorded_value}` (and nothing changed) when the primitive is in use with another value.
pub static ACQUIRE: Script = Script::new(
    "shared_acquire",
    concat!(
        shared_prelude!(),
        r#"
local token, lease = ARGV[1], tonumber(ARGV[2])
local kind, limit = ARGV[7], tonumber(ARGV[8])
local t_us = now_us()
local now_ms = math.floor(t_us / 1000)
purge(now_ms)
promote(t_us, ARGV[6])
-- A setting every participant must agree on (a semaphore's permits, a read-write lock's
-- writers_first) is recorded while the primitive is in use and may change only once it is idle
-- (no holder, no waiter): a client with another value is refused before anything changes.
local setting = ARGV[11] or ''
if setting ~= '' then
  local field = 's:' .. setting
  local idle = redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[3]) == 0
  local recorded = false
  if not idle then recorded = redis.call('HGET', KEYS[5], field) end
  if recorded and recorded ~= ARGV[12] then return {-1, setting, recorded} end
  -- Idle: the caller is granted below, which gives the info hash its expiry.
  if recorded ~= ARGV[12] then redis.call('HSET', KEYS[5], field, ARGV[12]) end
end
local mine = redis.call('ZSCORE', KEYS[1], token)
if mine then
  -- Granted to us earlier (a notification may have been lost) or just now as the queue head.
  return {1, redis.call('HGET', KEYS[5], 'f:' .. token) or '0', tonumber(mine) - now_ms}
end
local queued = redis.call('ZSCORE', KEYS[3], token)
local barge = ARGV[9] == '1' and kind == 'r' and redis.call('ZCARD', KEYS[1]) > 0
if (barge or (not queued and redis.call('ZCARD', KEYS[3]) == 0)) and fits(kind, limit) then
  if queued then
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token)
  end
  if ARGV[10] ~= '' then redis.call('HSET', KEYS[5], 'v:' .. token, ARGV[10]) end
  if (ARGV[13] or '') ~= '' then redis.call('HSET', KEYS[5], 'l:' .. token, ARGV[13]) end
  return {1, grant(token, kind, lease, t_us, ARGV[6]), lease}
end
if ARGV[3] == 'wait' then
  local ttl = tonumber(ARGV[4])
  if not queued then
    local tail = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local seq = t_us
    if tail[2] and tonumber(tail[2]) >= seq then seq = tonumber(tail[2]) + 1 end
    redis.call('ZADD', KEYS[3], fmt(seq), token)
  end
  local handoff = math.min(lease, ttl)
  redis.call('HSET', KEYS[4], token,
    fmt(now_ms + ttl) .. '|' .. fmt(handoff) .. '|' .. kind .. '|' .. fmt(limit) .. '|' .. ARGV[5])
  if ARGV[10] ~= '' then redis.call('HSET', KEYS[5], 'v:' .. token, ARGV[10]) end
  if (ARGV[13] or '') ~= '' then redis.call('HSET', KEYS[5], 'l:' .. token, ARGV[13]) end
  keep(3, ttl)
  keep(4, ttl)
  keep(5, ttl)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local pttl = -2
if first[2] then pttl = tonumber(first[2]) - now_ms end
return {0, redis.call('GET', KEYS[2]) or '0', pttl}
"#
    ),
);

/// SHARED_RELEASE — give up a hold (owner-only) or cancel a wait; passes freed room on in queue
/// order. KEYS: holders, fence, queue, waiters, info. ARGV: token, retention_ms.
/// Returns 1 if `token` held a live share, else 0.
pub static RELEASE: Script = Script::new(
    "shared_release",
    concat!(
        shared_prelude!(),
        r#"
local token = ARGV[1]
local t_us = now_us()
purge(math.floor(t_us / 1000))
local held = redis.call('ZREM', KEYS[1], token)
redis.call('HDEL', KEYS[5], 'f:' .. token, 'v:' .. token, 'l:' .. token)
if held == 0 then
  redis.call('ZREM', KEYS[3], token)
  redis.call('HDEL', KEYS[4], token)
end
promote(t_us, ARGV[2])
if redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[4], KEYS[5])
end
return held
"#
    ),
);

/// SHARED_EXTEND — owner-only: sets a live hold's remaining lease; never re-creates one.
/// KEYS: holders, fence, queue, waiters, info. ARGV: token, lease_ms. Returns 1 or 0.
pub static EXTEND: Script = Script::new(
    "shared_extend",
    concat!(
        shared_prelude!(),
        r#"
local now_ms = math.floor(now_us() / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) >= now_ms then
  local lease = tonumber(ARGV[2])
  redis.call('ZADD', KEYS[1], 'XX', fmt(now_ms + lease), ARGV[1])
  keep(1, lease)
  keep(5, lease)
  return 1
end
return 0
"#
    ),
);

/// SHARED_OBSERVE — the holder whose lease ends first (for an election, the leader):
/// `{value, fence, pttl_ms}`, or an empty array when nobody holds it.
/// KEYS: holders, fence, queue, waiters, info. No ARGV.
pub static OBSERVE: Script = Script::new(
    "shared_observe",
    concat!(
        shared_prelude!(),
        r#"
local now_ms = math.floor(now_us() / 1000)
purge(now_ms)
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if not first[1] then return {} end
return {redis.call('HGET', KEYS[5], 'v:' .. first[1]) or '',
        redis.call('HGET', KEYS[5], 'f:' .. first[1]) or '0',
        tonumber(first[2]) - now_ms}
"#
    ),
);

/// SHARED_INSPECT (since version 11): reads a semaphore, read-write lock or election, changing
/// nothing (dead holders are left for the next script that purges; the reader skips them).
///
/// KEYS: holders, fence, queue, waiters, info. No ARGV. Returns `{now_us, holders, queue,
/// waiters, info}`: the server time in µs, the holders and the queue as `ZRANGE ...
/// WITHSCORES`, the waiters and info hashes as `HGETALL`.
pub static INSPECT: Script = Script::new(
    "shared_inspect",
    concat!(
        super::script::lua_clock!(),
        r#"
return {fmt(now_us()), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'),
        redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[4]),
        redis.call('HGETALL', KEYS[5])}
"#
    ),
);
