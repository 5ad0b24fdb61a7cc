-- gcra: the generic cell rate algorithm with redis-cell's semantics, in
-- microseconds, every limit of a rule in one call, all-or-nothing; a port of
-- src/core/gcra.cc and rule_eval.cc. Also serves CL.THROTTLE (one limit,
-- parameters per call, empty fingerprint: one state per key whatever the
-- parameters, as in redis-cell).
--
-- KEYS[1]   the state key, fg:{rule:subject}[:tier] or fg:cl:{key}
-- ARGV[1]   definition fingerprint; a state with another one is treated as
--           empty ('' skips the check)
-- ARGV[2]   now in ms since the epoch; '' reads the server's TIME
-- ARGV[3]   cost (0 peeks)
-- ARGV[4]   n, the number of limits
-- ARGV[5..] 2 fields per limit: emission interval in us (period / count),
--           limit (redis-cell's max_burst + 1)
--
-- Reply: {now_ms, admitted, then per limit 5 integers: allowed, limit,
--         remaining, retry_after_us (-1: never), reset_after_us}
-- Durations are in microseconds, unrounded: a rule's decision rounds them up
-- to ms, CL.THROTTLE to redis-cell's seconds (the caller does both).
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit one little-endian double: the theoretical arrival time in us.
-- Written (SET PX) only when a request with cost > 0 is admitted.
--
-- Exactness: the configuration keeps interval * limit <= 2^52 us, and times in
-- us stay below 2^53 until the year 2255.
redis.replicate_commands()

local function floordiv(a, b)  -- exact for integers below 2^53, b > 0
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end
local function ceildiv(a, b) return -floordiv(-a, b) end

local fp = ARGV[1]
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
local cost = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
if not now or not cost or not n or n < 1 or #fp > 255 or #ARGV ~= 4 + 2 * n then
  return redis.error_reply('ERR floodgate: bad gcra arguments')
end

local emission, limit = {}, {}
for i = 1, n do
  emission[i] = tonumber(ARGV[3 + 2 * i])
  limit[i] = tonumber(ARGV[4 + 2 * i])
end

-- The stored state, or nil for a new subject (or another definition's state).
local state = nil
local raw = redis.call('GET', KEYS[1])
if raw then
  local fl = string.byte(raw, 1) or 0
  if #raw == 1 + fl + 8 * n and (fp == '' or string.sub(raw, 2, 1 + fl) == fp) then
    state = {struct.unpack('<' .. string.rep('d', n), raw, 2 + fl)}
  end
end

local now_us = now * 1000

-- Limit i for cost c against the stored state.
local function step(i, c)
  local em = emission[i]
  local tolerance = em * limit[i]
  local tat = now_us
  -- An expired TAT is a fresh subject; one ahead of an earlier now (a clock
  -- step back) only makes the answer stricter.
  if state and state[i] > now_us then tat = state[i] end

  local r = {allowed = 0, limit = limit[i], retry = 0, ttl = tat - now_us}
  if c > limit[i] then
    r.retry = -1
  else
    local new_tat = tat + em * c
    local diff = now_us - (new_tat - tolerance)
    if diff < 0 then
      r.retry = -diff
    else
      r.allowed = 1
      r.ttl = new_tat - now_us
      if c > 0 then r.new = new_tat end
    end
  end
  local room = tolerance - r.ttl
  r.remaining = room > 0 and floordiv(room, em) or 0
  r.expires = r.ttl > 0 and ceildiv(now_us + r.ttl, 1000) or 0
  return r
end

local res = {}
local admitted = true
for i = 1, n do
  res[i] = step(i, cost)
  if res[i].allowed == 0 then admitted = false end
end
if not admitted and cost > 0 then
  -- Nothing is consumed: limits that had room report as of a peek.
  for i = 1, n do
    if res[i].allowed == 1 then res[i] = step(i, 0) end
  end
end

if admitted and cost > 0 then
  local out, expires = {}, 0
  for i = 1, n do
    out[i] = res[i].new
    if res[i].expires > expires then expires = res[i].expires end
  end
  if expires > now then
    redis.call('SET', KEYS[1], string.char(#fp) .. fp .. struct.pack('<' .. string.rep('d', n),
      unpack(out)), 'PX', string.format('%d', expires - now))
  else
    redis.call('DEL', KEYS[1])
  end
end

local reply = {now, admitted and 1 or 0}
for i = 1, n do
  local r = res[i]
  local k = #reply
  reply[k + 1], reply[k + 2], reply[k + 3], reply[k + 4] = r.allowed, r.limit, r.remaining, r.retry
  reply[k + 5] = r.ttl
end
return reply
