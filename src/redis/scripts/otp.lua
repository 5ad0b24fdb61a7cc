-- otp: one subject's one-time-password state, the three steps of
-- src/store/otp_policy.h; a port of src/engine/otp_store.cc. Three sorted
-- sets scored by expiry in ms (expiring sets, as in expiring_set.lua): the
-- HMACs of the live codes (never the codes), the issue events of the last
-- issue period and the verification attempts of the last verify period.
-- Counting the live events is the sliding log of seed 001. Every call drops
-- expired members first, and gives each key it adds to the expiry of its
-- last member in the same call (dropping members never moves that), so no
-- key lives without a TTL.
--
-- KEYS[1]  codes     fg:otp:{subject}:codes
-- KEYS[2]  issues    fg:otp:{subject}:issues
-- KEYS[3]  attempts  fg:otp:{subject}:attempts   (one hash tag: one slot)
-- ARGV[1]  the step: issue, attempt or consume
-- ARGV[2]  now in ms since the epoch; '' reads the server's TIME (once)
-- issue:   ARGV[3] code HMAC, ARGV[4] event id, ARGV[5] code TTL ms,
--          ARGV[6] max live codes, ARGV[7] issue count, ARGV[8] issue period ms
-- attempt: ARGV[3] event id, ARGV[4] verify count, ARGV[5] verify period ms
-- consume: ARGV[3] code HMAC
--
-- Reply: {now_ms, ok, ...}
--   issue:   ok 1: {now, 1, code_expires_at_ms}; ok 0 (limit): {now, 0, retry_after_ms}
--   attempt: ok 1: {now, 1, hmac...} (the live codes); ok 0 (limit): {now, 0, retry_after_ms}
--   consume: {now, 1} (the code was live: every code and attempt is gone) or {now, 0}
-- Error: "ERR floodgate: bad otp arguments", before any write;
--        "WRONGTYPE floodgate: KEYS[i] holds a <type>, not a zset" when
--        key i of the three exists and is not a sorted set (written by
--        someone else), before anything is read or written: no step leaves
--        one key changed and another not.
--! include prelude.lua
local codes, issues, attempts = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
local now = now_ms(ARGV[2])
--! include expiring_prelude.lua
local function positive(i)
  local v = tonumber(ARGV[i])
  return v and v >= 1
end
local bad = not now or #KEYS ~= 3
if op == 'issue' then
  bad = bad or #ARGV ~= 8 or not (positive(5) and positive(6) and positive(7) and positive(8))
elseif op == 'attempt' then
  bad = bad or #ARGV ~= 5 or not (positive(4) and positive(5))
elseif op == 'consume' then
  bad = bad or #ARGV ~= 3
else
  bad = true
end
if bad then
  return redis.error_reply('ERR floodgate: bad otp arguments')
end
for i, key in ipairs(KEYS) do
  local wrong = type_error(key, 'zset', 'KEYS[' .. i .. ']')
  if wrong then return wrong end
end

-- Drops the expired events of `key`; then, with `count` per window, nil
-- when one more fits, or how long until it does: the (live - count)-th
-- earliest event must age out first.
local function wait_for_room(key, count)
  prune(key)
  local live = redis.call('ZCARD', key)
  if live < count then return nil end
  local at = redis.call('ZRANGE', key, live - count, live - count, 'WITHSCORES')
  local wait = at[2] and tonumber(at[2]) - now or 1
  if wait < 1 then wait = 1 end
  return wait
end

if op == 'issue' then
  local wait = wait_for_room(issues, tonumber(ARGV[7]))
  if wait then return {now, 0, wait} end
  prune(codes)
  -- Room for the new code: the oldest go first (codes share one TTL, so the
  -- earliest expiry is the oldest issue).
  local excess = redis.call('ZCARD', codes) - tonumber(ARGV[6]) + 1
  if excess > 0 then redis.call('ZPOPMIN', codes, excess) end
  -- Codes share one TTL, so expiry order is issue order, except for codes
  -- issued in the same millisecond: a later one expires 1 ms later, so that
  -- "the oldest goes first" stays exact.
  local expires = now + tonumber(ARGV[5])
  local last = redis.call('ZRANGE', codes, -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) >= expires then expires = tonumber(last[2]) + 1 end
  redis.call('ZADD', codes, string.format('%d', expires), ARGV[3])
  add(issues, tonumber(ARGV[8]), ARGV[4])
  reexpire(codes)
  reexpire(issues)
  return {now, 1, expires}
elseif op == 'attempt' then
  local wait = wait_for_room(attempts, tonumber(ARGV[4]))
  if wait then return {now, 0, wait} end
  -- Recorded even when the subject has no code: probing costs attempts too.
  add(attempts, tonumber(ARGV[5]), ARGV[3])
  reexpire(attempts)
  prune(codes)
  local reply = {now, 1}
  local live = redis.call('ZRANGE', codes, 0, -1)
  for i = 1, #live do reply[2 + i] = live[i] end
  return reply
else
  prune(codes)
  if not redis.call('ZSCORE', codes, ARGV[3]) then
    return {now, 0}
  end
  redis.call('DEL', codes, attempts)
  return {now, 1}
end
