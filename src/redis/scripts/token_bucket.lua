-- token_bucket: continuous refill of count per period up to a capacity, every
-- limit of a rule in one call, all-or-nothing; a port of
-- src/core/token_bucket.cc and rule_eval.cc.
--
-- KEYS[1]   the state key, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]   definition fingerprint; a state with another one is treated as
--           empty ('' skips the check)
-- ARGV[2]   now in ms since the epoch; '' reads the server's TIME
-- ARGV[3]   cost (0 peeks)
-- ARGV[4]   n, the number of limits
-- ARGV[5..] 3 fields per limit: count (refilled per period), period_ms, capacity
--
-- Reply: {now_ms, admitted, then per limit 5 integers: allowed, limit,
--         remaining, retry_after_ms, reset_after_ms}
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit two little-endian doubles: tokens missing scaled by
-- period_ms (0 = full), time of the last update. Written (SET PX) only when a
-- request with cost > 0 is admitted.
--
-- Exactness: the configuration keeps max(count, capacity) * period_ms <= 2^53;
-- comparisons are arranged so no sum exceeds the full bucket.
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
if not now or not cost or not n or n < 1 or #fp > 255 or #ARGV ~= 4 + 3 * n then
  return redis.error_reply('ERR floodgate: bad token_bucket arguments')
end

local rate, period, capacity = {}, {}, {}
for i = 1, n do
  local a = 4 + 3 * (i - 1)
  rate[i] = tonumber(ARGV[a + 1])
  period[i] = tonumber(ARGV[a + 2])
  capacity[i] = tonumber(ARGV[a + 3])
end

-- The stored state, or nil for a new subject (or another definition's state).
local words = 2 * n
local state = nil
local raw = redis.call('GET', KEYS[1])
if raw then
  local fl = string.byte(raw, 1) or 0
  if #raw == 1 + fl + 8 * words and (fp == '' or string.sub(raw, 2, 1 + fl) == fp) then
    state = {struct.unpack('<' .. string.rep('d', words), raw, 2 + fl)}
  end
end

-- Limit i for cost c against the stored state.
local function step(i, c)
  local p = period[i]
  local full = capacity[i] * p
  local missing, updated = 0, 0
  if state then missing, updated = state[2 * i - 1], state[2 * i] end
  local t = now
  if missing > 0 then
    if t < updated then t = updated end  -- a step back refills nothing
    local elapsed = t - updated
    if elapsed >= ceildiv(missing, rate[i]) then
      missing = 0
    else
      missing = missing - elapsed * rate[i]
    end
  end

  local r = {allowed = 0, limit = capacity[i], retry = 0, expires = 0}
  if c > capacity[i] then
    r.retry = -1
  elseif c * p <= full - missing then
    r.allowed = 1
    missing = missing + c * p
    if c > 0 then r.new = {missing, t} end
  else
    r.retry = ceildiv(c * p - (full - missing), rate[i])
  end
  r.remaining = floordiv(full - missing, p)
  r.reset = ceildiv(missing, rate[i])
  if missing > 0 then r.expires = t + r.reset end
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
    local r = res[i]
    out[2 * i - 1], out[2 * i] = r.new[1], r.new[2]
    if r.expires > expires then expires = r.expires end
  end
  if expires > now then
    redis.call('SET', KEYS[1], string.char(#fp) .. fp .. struct.pack('<' .. string.rep('d', words),
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
  reply[k + 5] = r.reset
end
return reply
