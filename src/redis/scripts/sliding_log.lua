-- sliding_log: the exact algorithm, one log of admitted requests shared by
-- every limit of a rule, all-or-nothing; a port of src/core/sliding_log.cc.
-- A unit admitted at t counts against a limit of period P for requests
-- strictly before t + P.
--
-- KEYS[1]   the state key, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]   definition fingerprint; a state with another one is treated as
--           empty ('' skips the check)
-- ARGV[2]   now in ms since the epoch; '' reads the server's TIME
-- ARGV[3]   cost (0 peeks)
-- ARGV[4]   n, the number of limits
-- ARGV[5..] 2 fields per limit: count, period_ms
--
-- Reply: {now_ms, admitted, then per limit 5 integers: allowed, limit,
--         remaining, retry_after_ms, reset_after_ms}
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- a byte with n, per limit a header '<I4I4' (the 0-based index of its first
-- event still inside its window, the units it counts from there), then the
-- logged events in time order, 9 bytes each, '<i6I3': time in ms (signed 48
-- bits) and units. Fixed-width events are read by position (GETRANGE), so
-- a decision reads only the events that age out (or that a retry walks
-- past); a write copies the log as one string, never decoding it. It holds
-- only events inside the longest window, so never more than that limit's
-- count (configuration caps it at 100000): at most 900 KB.
--
-- Writes: SET PX when a request with cost > 0 is admitted. As in the C++ log,
-- a cursor that moves past an aged-out event never moves back, even when a
-- later request arrives with an earlier time; so a denial or a peek that ages
-- events out writes the state too (with the same expiry: the newest event's
-- time plus the longest period), or DELs it when nothing is left. Each event
-- ages out once per limit, so such writes are bounded by the admissions.
redis.replicate_commands()

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
  return redis.error_reply('ERR floodgate: bad sliding_log arguments')
end

local count, period = {}, {}
local longest = 0
for i = 1, n do
  count[i] = tonumber(ARGV[3 + 2 * i])
  period[i] = tonumber(ARGV[4 + 2 * i])
  if period[i] > longest then longest = period[i] end
end

local EVENT = 9  -- bytes per event

-- The log: E events from byte offset `base` of the value, and per limit its
-- cursor C[i] (index of its first counted event; E when none) and sum S[i].
-- Only the header and the events a decision touches are read (GETRANGE), so
-- a denial or a peek costs the same whatever the log's length.
local size = redis.call('STRLEN', KEYS[1])
local base, E = 0, 0
local C, S = {}, {}
for i = 1, n do C[i], S[i] = 0, 0 end
if size > 0 then
  local head = redis.call('GETRANGE', KEYS[1], 0, 1 + 255 + 1 + 8 * n - 1)
  local fl = string.byte(head, 1)
  local start = 2 + fl + 8 * n  -- header bytes
  if (fp == '' or string.sub(head, 2, 1 + fl) == fp) and string.byte(head, 2 + fl) == n and
      size >= start and (size - start) % EVENT == 0 then
    local e = (size - start) / EVENT
    local valid = true
    for i = 1, n do
      C[i], S[i] = struct.unpack('<I4I4', head, 3 + fl + 8 * (i - 1))
      if C[i] > e then valid = false end
    end
    if valid then
      base, E = start, e
    else
      for i = 1, n do C[i], S[i] = 0, 0 end
    end
  end
end

local cache = {}
local function event(k)  -- time, units of event k
  local ev = cache[k]
  if not ev then
    local at = base + EVENT * k
    ev = {struct.unpack('<i6I3', redis.call('GETRANGE', KEYS[1], at, at + EVENT - 1))}
    cache[k] = ev
  end
  return ev[1], ev[2]
end

-- A clock step back refunds nothing: decide at the newest event at least.
local t = now
local newest = nil
if E > 0 then
  newest = event(E - 1)
  if t < newest then t = newest end
end

-- Move each limit's cursor past the events its window no longer covers.
local moved = false
for i = 1, n do
  while C[i] < E do
    local et, eu = event(C[i])
    if et + period[i] > t then break end
    S[i] = S[i] - eu
    C[i] = C[i] + 1
    moved = true
  end
end
-- Events before every cursor are dropped: the log is lo..E-1.
local lo = E
for i = 1, n do
  if C[i] < lo then lo = C[i] end
end

local res = {}
local admitted = true
for i = 1, n do
  local r = {allowed = 0, limit = count[i], retry = 0}
  if cost > count[i] then
    r.retry = -1
  elseif S[i] + cost <= count[i] then
    r.allowed = 1
  else
    -- Walk from the oldest counted event until enough units have aged out.
    local still = S[i]
    for k = C[i], E - 1 do
      local et, eu = event(k)
      still = still - eu
      if still + cost <= count[i] then
        r.retry = et + period[i] - t
        break
      end
    end
  end
  if r.allowed == 0 then admitted = false end
  res[i] = r
end

local kept = nil  -- the new log's events, when it is written
if (admitted and cost > 0) or moved then
  kept = ''
  if lo < E then kept = redis.call('GETRANGE', KEYS[1], base + EVENT * lo, size - 1) end
end
if admitted and cost > 0 then
  for i = 1, n do S[i] = S[i] + cost end
  -- Same instant: one event, so the log stays small; but not when a cursor
  -- has already passed that event (a step back after a later request): the
  -- units would be summed by a limit whose cursor never subtracts them.
  local merge = lo < E and newest == t
  for i = 1, n do
    if C[i] >= E then merge = false end
  end
  if merge then
    local et, eu = event(E - 1)
    kept = string.sub(kept, 1, #kept - EVENT) .. struct.pack('<i6I3', et, eu + cost)
  else
    kept = kept .. struct.pack('<i6I3', t, cost)
    -- Cursors past every event now point at the new one.
  end
  newest = t
elseif lo >= E then
  newest = nil  -- every event aged out
end

for i = 1, n do
  local r = res[i]
  r.remaining = count[i] > S[i] and count[i] - S[i] or 0
  r.reset = (S[i] > 0 and newest) and newest + period[i] - t or 0
end

if kept then
  if #kept == 0 then
    redis.call('DEL', KEYS[1])
  else
    local head = {string.char(#fp), fp, string.char(n)}
    for i = 1, n do head[#head + 1] = struct.pack('<I4I4', C[i] - lo, S[i]) end
    local ttl = newest + longest - now
    if ttl < 1 then ttl = 1 end
    redis.call('SET', KEYS[1], table.concat(head) .. kept, 'PX', string.format('%d', ttl))
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
