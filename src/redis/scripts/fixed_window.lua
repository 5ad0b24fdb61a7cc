-- fixed_window: one counter per window, every limit of a rule in one call,
-- all-or-nothing; a port of src/core/fixed_window.cc and rule_eval.cc.
--
-- KEYS[1]   the state key, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]   definition fingerprint; a state with another one is treated as
--           empty ('' skips the check)
-- ARGV[2]   now in ms since the epoch; '' reads the server's TIME
-- ARGV[3]   cost (0 peeks)
-- ARGV[4]   n, the number of limits
-- ARGV[5..] 6 fields per limit: count, period_ms, b0, b1, b2, b3.
--           period_ms > 0: windows aligned to the epoch (the b fields unused).
--           period_ms = 0: calendar windows [b0,b1) [b1,b2) [b2,b3), the
--           previous, current and next windows around the caller's clock.
--
-- Reply: {now_ms, admitted, then per limit 7 integers: allowed, limit,
--         remaining, retry_after_ms, reset_after_ms, window_start_ms,
--         window_end_ms}
-- Error: "ERR floodgate: clock skew ..." when a calendar limit's now falls
--        outside [b0, b3) (and outside the window the state already counts).
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit three little-endian doubles: window start, window end, used.
-- Written (SET PX) only when a request with cost > 0 is admitted; a denial or
-- a peek writes nothing. Every figure is an integer below 2^53, exact in a
-- Lua number.
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
if not now or not cost or not n or n < 1 or #fp > 255 or #ARGV ~= 4 + 6 * n then
  return redis.error_reply('ERR floodgate: bad fixed_window arguments')
end

local count, period, b0, b1, b2, b3 = {}, {}, {}, {}, {}, {}
for i = 1, n do
  local a = 4 + 6 * (i - 1)
  count[i] = tonumber(ARGV[a + 1])
  period[i] = tonumber(ARGV[a + 2])
  b0[i] = tonumber(ARGV[a + 3])
  b1[i] = tonumber(ARGV[a + 4])
  b2[i] = tonumber(ARGV[a + 5])
  b3[i] = tonumber(ARGV[a + 6])
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

-- Limit i for cost c against the stored state; nil when its calendar window
-- cannot be told (clock skew).
local function step(i, c)
  local sws, swe, sused = 0, 0, 0
  if state then sws, swe, sused = state[3 * i - 2], state[3 * i - 1], state[3 * i] end
  local t = now
  if sused > 0 and t < sws then t = sws end  -- a step back stays in the counted window
  local ws, we
  if period[i] > 0 then
    ws = floordiv(t, period[i]) * period[i]
    we = ws + period[i]
  elseif sused > 0 and t >= sws and t < swe then
    ws, we = sws, swe
  elseif t >= b0[i] and t < b1[i] then
    ws, we = b0[i], b1[i]
  elseif t >= b1[i] and t < b2[i] then
    ws, we = b1[i], b2[i]
  elseif t >= b2[i] and t < b3[i] then
    ws, we = b2[i], b3[i]
  else
    return nil
  end
  local used = 0
  if sused > 0 and sws == ws then used = sused end

  local r = {allowed = 0, limit = count[i], retry = 0, reset = 0, ws = ws, we = we, expires = 0}
  local after = used
  if c > count[i] then
    r.retry = -1
  elseif used + c <= count[i] then
    r.allowed = 1
    after = used + c
    if c > 0 then r.new = {ws, we, after} end
  else
    r.retry = we - t
  end
  r.remaining = count[i] - after
  if after > 0 then
    r.reset = we - t
    r.expires = we
  end
  return r
end

local res = {}
local admitted = true
for i = 1, n do
  local r = step(i, cost)
  if not r then
    return redis.error_reply(string.format(
      'ERR floodgate: clock skew: now %d is outside the calendar windows [%d, %d) of limit %d',
      now, b0[i], b3[i], i))
  end
  res[i] = r
  if r.allowed == 0 then admitted = false end
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
