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
-- then one MessagePack array {n, cursor_1 .. cursor_n, t_1, u_1, dt_2, u_2,
-- ...}: the logged events (time, units) in time order, the first time
-- absolute and the others as deltas (small integers pack in 1 to 3 bytes),
-- and per limit the 0-based index of its first event still inside its window.
-- The log holds only events inside the longest window, so never more events
-- than that limit's count (configuration caps it at 100000): decoding and
-- re-encoding are O(events in the window).
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

-- The log: events T[k], U[k] for k in 1..E, and each limit's cursor C[i]
-- (the index of its first counted event; E + 1 when none is counted).
local T, U, C = {}, {}, {}
local E = 0
for i = 1, n do C[i] = 1 end
local raw = redis.call('GET', KEYS[1])
if raw then
  local fl = string.byte(raw, 1) or 0
  if fp == '' or string.sub(raw, 2, 1 + fl) == fp then
    local ok, arr = pcall(cmsgpack.unpack, string.sub(raw, 2 + fl))
    if ok and type(arr) == 'table' and arr[1] == n and (#arr - 1 - n) >= 0 and
        (#arr - 1 - n) % 2 == 0 then
      local e = (#arr - 1 - n) / 2
      local valid = true
      local t = 0
      for k = 1, e do
        local d, u = arr[n + 2 * k], arr[n + 2 * k + 1]
        if type(d) ~= 'number' or type(u) ~= 'number' or u < 1 or (k > 1 and d < 0) then
          valid = false
          break
        end
        if k == 1 then t = d else t = t + d end
        T[k], U[k] = t, u
      end
      for i = 1, n do
        local c = arr[1 + i]
        if type(c) == 'number' and c >= 0 and c <= e and math.floor(c) == c then
          C[i] = c + 1
        else
          valid = false
        end
      end
      if valid then
        E = e
      else
        T, U, C = {}, {}, {}
        for i = 1, n do C[i] = 1 end
      end
    end
  end
end

-- A clock step back refunds nothing: decide at the newest event at least.
local t = now
if E > 0 and t < T[E] then t = T[E] end

-- Move each limit's cursor past the events its window no longer covers.
local moved = false
for i = 1, n do
  local c = C[i]
  while c <= E and T[c] + period[i] <= t do c = c + 1 end
  if c ~= C[i] then
    moved = true
    C[i] = c
  end
end
-- Events before every cursor are dropped: the log is lo..E.
local lo = E + 1
for i = 1, n do
  if C[i] < lo then lo = C[i] end
end

-- Units each limit counts: suffix sums from its cursor.
local suffix = {}
suffix[E + 1] = 0
for k = E, lo, -1 do suffix[k] = suffix[k + 1] + U[k] end
local sum = {}
for i = 1, n do sum[i] = suffix[C[i]] end

local res = {}
local admitted = true
for i = 1, n do
  local r = {allowed = 0, limit = count[i], retry = 0}
  if cost > count[i] then
    r.retry = -1
  elseif sum[i] + cost <= count[i] then
    r.allowed = 1
  else
    -- Walk from the oldest counted event until enough units have aged out.
    local still = sum[i]
    for k = C[i], E do
      still = still - U[k]
      if still + cost <= count[i] then
        r.retry = T[k] + period[i] - t
        break
      end
    end
  end
  if r.allowed == 0 then admitted = false end
  res[i] = r
end

if admitted and cost > 0 then
  for i = 1, n do sum[i] = sum[i] + cost end
  -- Same instant: one event, so the log stays small; but not when a cursor
  -- has already passed that event (a step back after a later request): the
  -- units would be summed by a limit whose cursor never subtracts them.
  local merge = lo <= E and T[E] == t
  for i = 1, n do
    if C[i] > E then merge = false end
  end
  if merge then
    U[E] = U[E] + cost
  else
    E = E + 1
    T[E], U[E] = t, cost
  end
end

local newest = 0
if lo <= E then newest = T[E] end
for i = 1, n do
  local r = res[i]
  r.remaining = count[i] > sum[i] and count[i] - sum[i] or 0
  r.reset = sum[i] > 0 and newest + period[i] - t or 0
end

if (admitted and cost > 0) or moved then
  if lo > E then
    redis.call('DEL', KEYS[1])
  else
    local arr = {n}
    for i = 1, n do arr[1 + i] = C[i] - lo end
    local k = n + 1
    arr[k + 1], arr[k + 2] = T[lo], U[lo]
    for j = lo + 1, E do
      k = k + 2
      arr[k + 1], arr[k + 2] = T[j] - T[j - 1], U[j]
    end
    local ttl = newest + longest - now
    if ttl < 1 then ttl = 1 end
    redis.call('SET', KEYS[1], string.char(#fp) .. fp .. cmsgpack.pack(arr), 'PX',
      string.format('%d', ttl))
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
