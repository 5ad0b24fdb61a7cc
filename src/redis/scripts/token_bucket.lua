-- token_bucket: continuous refill of count per period up to a capacity, every
-- limit of a rule in one decision, all-or-nothing; a port of
-- src/core/token_bucket.cc and rule_eval.cc. One call makes k decisions of
-- one rule, in KEYS order, each on its own key (a key named twice sees the
-- first decision's write).
--
-- KEYS[1..k]  the state keys, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]     definition fingerprint; a state with another one is treated as
--             empty ('' skips the check)
-- ARGV[2]     now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]     n, the number of limits; or 'nAm' (e.g. '2a3') for a rule with
--             m alert thresholds (src/core/alerts.h)
-- ARGV[4..3+3n]  3 fields per limit: count (refilled per period), period_ms,
--             capacity
-- then, with alerts, 1 + m fields per limit: its period_ms, then the usage
--             (burst consumed) that reaches each threshold
-- then the cost of each decision (0 peeks); or one value, the cost of
--             every decision
--
-- Reply: {now_ms, then per key a string of 1 + 5n (+ 3n) little-endian
--        doubles (struct '<d...')}: admitted, then per limit allowed, limit,
--        remaining, retry_after_ms, reset_after_ms; then, with alerts, per
--        limit the thresholds this decision reached first in its window (bit
--        j: threshold j) and that window's start and end (the epoch-aligned
--        period holding now). Packed: Redis turns each integer of a Lua reply
--        into RESP one by one.
-- Error: "ERR floodgate: bad token_bucket arguments", before any decision.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit two little-endian doubles: tokens missing scaled by
-- period_ms (0 = full), time of the last update; then, with alerts, per limit
-- two more: the window start its alert bits belong to, and the bits. Written
-- (SET PX) only when a request with cost > 0 is admitted.
--
-- Exactness: the configuration keeps max(count, capacity) * period_ms <= 2^53;
-- comparisons are arranged so no sum exceeds the full bucket.
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table beyond the decoded state.
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
local n, m = tonumber(ARGV[3]), 0
if not n then
  local ns, ms = string.match(ARGV[3] or '', '^(%d+)a(%d)$')
  n, m = tonumber(ns), tonumber(ms)
end
local k = #KEYS
local na = m > 0 and (1 + m) * n or 0  -- alert fields
if not now or not n or n < 1 or m > 8 or #fp > 255 or k < 1 or
    #ARGV ~= 3 + 3 * n + na + k and #ARGV ~= 4 + 3 * n + na then
  return redis.error_reply('ERR floodgate: bad token_bucket arguments')
end

local rate, period, capacity = {}, {}, {}
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  rate[i] = tonumber(ARGV[a + 1])
  period[i] = tonumber(ARGV[a + 2])
  capacity[i] = tonumber(ARGV[a + 3])
end
-- Alerts (src/core/alerts.cc): per limit its period and threshold usages.
local aperiod, aunits = {}, {}
for i = 1, m > 0 and n or 0 do
  local a = 3 + 3 * n + (1 + m) * (i - 1)
  aperiod[i] = tonumber(ARGV[a + 1])
  for j = 1, m do aunits[(i - 1) * m + j] = tonumber(ARGV[a + 1 + j]) end
end
local band, bor = bit.band, bit.bor

-- Limit i's alert step after a decision: with its usage and its stored
-- (aws, abits), the bits fired, the pair to store and until when the state
-- must live for its bits (0: no bits). The window is the epoch-aligned
-- period holding now.
local function alert(i, admitted, used, aws, abits)
  local p = aperiod[i]
  local r = math.fmod(now, p)
  if r < 0 then r = r + p end
  local ws = now - r
  local we = ws + p
  if abits ~= 0 and ws < aws then
    return 0, aws, abits, aws + p, ws, we  -- the clock stepped back: nothing fires
  end
  local bits = abits
  if ws ~= aws then bits = 0 end
  local fired = 0
  if admitted then
    for j = 1, m do
      local b = 2 ^ (j - 1)
      if band(bits, b) == 0 and used >= aunits[(i - 1) * m + j] then fired = bor(fired, b) end
    end
  end
  if fired ~= 0 then
    bits = bor(bits, fired)
    aws, abits = ws, bits
  end
  return fired, aws, abits, bits ~= 0 and we or 0, ws, we
end

local cost_at = 3 + 3 * n + na
local costs = #ARGV - cost_at  -- k, or 1: one cost for every decision
for j = 1, costs do
  if not tonumber(ARGV[cost_at + j]) then
    return redis.error_reply('ERR floodgate: bad token_bucket arguments')
  end
end
local same_cost = costs == 1 and tonumber(ARGV[cost_at + 1])

local words = m > 0 and 4 or 2  -- doubles per limit in the state
local fmt = '<' .. string.rep('d', words * n)
local rlen = 1 + 5 * n + (m > 0 and 3 * n or 0)
local rfmt = '<' .. string.rep('d', rlen)
local fl = #fp
local head = string.char(fl) .. fp
local rget, unpack_state, pack_state = redis.call, struct.unpack, struct.pack

-- Limit i for cost c against its stored (missing, updated): allowed (0/1),
-- remaining, retry, reset, missing and time afterwards, expiry (0: none).
local function step(i, c, missing, updated)
  local p = period[i]
  local cap = capacity[i]
  local full = cap * p
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
  local allowed, retry = 0, 0
  if c > cap then
    retry = -1
  elseif c * p <= full - missing then
    allowed = 1
    missing = missing + c * p
  else
    retry = ceildiv(c * p - (full - missing), rate[i])
  end
  local reset = ceildiv(missing, rate[i])
  return allowed, floordiv(full - missing, p), retry, reset, missing, t,
    missing > 0 and t + reset or 0
end

local reply = {now}
local out = {}  -- the state to write, 2 per limit
local vals = {}  -- the decision's reply fields
for j = 1, k do
  local key = KEYS[j]
  local cost = same_cost or tonumber(ARGV[cost_at + j])
  local state = nil
  local raw = rget('GET', key)
  if raw then
    local sfl = fl
    if fl == 0 then sfl = string.byte(raw, 1) or 0 end  -- '' skips the check
    if #raw == 1 + sfl + 8 * words * n and (fl == 0 or string.find(raw, head, 1, true) == 1) then
      state = {unpack_state(fmt, raw, 2 + sfl)}
    end
  end
  local admitted = 1
  local expires = 0
  local pos = 1
  for i = 1, n do
    local missing, updated = 0, 0
    if state then missing, updated = state[2 * i - 1], state[2 * i] end
    local allowed, remaining, retry, reset, m, t, e = step(i, cost, missing, updated)
    if allowed == 0 then admitted = 0 end
    vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, capacity[i], remaining,
      retry
    vals[pos + 5] = reset
    out[2 * i - 1], out[2 * i] = m, t
    if e > expires then expires = e end
    pos = pos + 5
  end
  vals[1] = admitted
  if m > 0 then
    local ok = cost > 0 and admitted == 1
    for i = 1, n do
      local aws, abits = 0, 0
      if state then aws, abits = state[2 * n + 2 * i - 1], state[2 * n + 2 * i] end
      local p = 1 + 5 * (i - 1)
      local fired, keep, ws, we
      fired, aws, abits, keep, ws, we = alert(i, ok, vals[p + 2] - vals[p + 3], aws, abits)
      out[2 * n + 2 * i - 1], out[2 * n + 2 * i] = aws, abits
      if keep > expires then expires = keep end
      local r = 1 + 5 * n + 3 * (i - 1)
      vals[r + 1], vals[r + 2], vals[r + 3] = fired, ws, we
    end
  end
  if cost > 0 and admitted == 1 then
    if expires > now then
      rget('SET', key, head .. pack_state(fmt, unpack(out, 1, words * n)), 'PX',
        string.format('%d', expires - now))
    else
      rget('DEL', key)
    end
  elseif cost > 0 then
    -- Nothing is consumed: limits that had room report as of a peek.
    pos = 1
    for i = 1, n do
      if vals[pos + 1] == 1 then
        local missing, updated = 0, 0
        if state then missing, updated = state[2 * i - 1], state[2 * i] end
        local _, remaining, retry, reset = step(i, 0, missing, updated)
        vals[pos + 3], vals[pos + 4], vals[pos + 5] = remaining, retry, reset
      end
      pos = pos + 5
    end
  end
  reply[j + 1] = pack_state(rfmt, unpack(vals, 1, rlen))
end
return reply
