-- sliding_window: the two-bucket weighted counter, exact in integers, every
-- limit of a rule in one call, all-or-nothing; a port of
-- src/core/sliding_window.cc and rule_eval.cc.
--
-- KEYS[1]   the state key, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]   definition fingerprint; a state with another one is treated as
--           empty ('' skips the check)
-- ARGV[2]   now in ms since the epoch; '' reads the server's TIME
-- ARGV[3]   cost (0 peeks)
-- ARGV[4]   n, the number of limits
-- ARGV[5..] 2 fields per limit: count, period_ms
--
-- Reply: {now_ms, admitted, then per limit 7 integers: allowed, limit,
--         remaining, retry_after_ms, reset_after_ms, window_start_ms,
--         window_end_ms}
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit three little-endian doubles: current bucket start, current,
-- previous. Written (SET PX) only when a request with cost > 0 is admitted.
--
-- Exactness: the configuration keeps count * period_ms <= 2^53, and every
-- comparison below is arranged so that no product or sum exceeds that (the
-- C++ compares previous * weight + (current + cost) * period <= count *
-- period, which can reach 2^54; here both sides are split first).
redis.replicate_commands()

local function floordiv(a, b)  -- exact for integers below 2^53, b > 0
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end

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
  return redis.error_reply('ERR floodgate: bad sliding_window arguments')
end

local count, period = {}, {}
for i = 1, n do
  count[i] = tonumber(ARGV[3 + 2 * i])
  period[i] = tonumber(ARGV[4 + 2 * i])
end

-- The stored state, or nil for a new subject (or another definition's state).
local words = 3 * n
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
  local p, lim = period[i], count[i]
  local sws, scur, sprev = 0, 0, 0
  if state then sws, scur, sprev = state[3 * i - 2], state[3 * i - 1], state[3 * i] end
  local empty = scur == 0 and sprev == 0
  local t = now
  if not empty and t < sws then t = sws end  -- no refund

  local start = floordiv(t, p) * p
  local cur, prev = 0, 0
  if not empty and start == sws then
    cur, prev = scur, sprev
  elseif not empty and start == sws + p then
    prev = scur
  end
  local weight = p - (t - start)  -- 1..p

  local r = {allowed = 0, limit = lim, retry = 0, reset = 0, ws = start, we = start + p,
             expires = 0}
  if c > lim then
    r.retry = -1
  elseif cur + c <= lim and prev * weight <= (lim - cur - c) * p then
    r.allowed = 1
    cur = cur + c
    if c > 0 then r.new = {start, cur, prev} end
  elseif cur + c <= lim then
    -- Room comes back within this bucket as the previous one slides out.
    local max_weight = floordiv((lim - cur - c) * p, prev)
    r.retry = (start + p - max_weight) - t
  else
    -- This bucket alone is too full: wait into the next one.
    local max_weight = floordiv((lim - c) * p, cur)
    r.retry = (start + 2 * p - max_weight) - t
  end

  -- remaining = floor(lim - cur - prev * weight / p)
  local room = lim * p - prev * weight - cur * p
  r.remaining = room > 0 and floordiv(room, p) or 0
  if cur > 0 then
    r.expires = start + 2 * p
  elseif prev > 0 then
    r.expires = start + p
  end
  if r.expires > 0 then r.reset = r.expires - t end
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
    out[3 * i - 2], out[3 * i - 1], out[3 * i] = r.new[1], r.new[2], r.new[3]
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
  reply[k + 5], reply[k + 6], reply[k + 7] = r.reset, r.ws, r.we
end
return reply
