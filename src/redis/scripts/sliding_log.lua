-- sliding_log: the exact algorithm, one log of admitted requests shared by
-- every limit of a rule, all-or-nothing; a port of src/core/sliding_log.cc.
-- A unit admitted at t counts against a limit of period P for requests
-- strictly before t + P. One call makes k decisions of one rule, in KEYS
-- order, each on its own key (a key named twice sees the first decision's
-- write).
--
-- KEYS[1..k]  the state keys, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]     definition fingerprint; a state with another one is treated as
--             empty ('' skips the check)
-- ARGV[2]     now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]     n, the number of limits; or 'nAm' (e.g. '2a3') for a rule with
--             m alert thresholds (src/core/alerts.h)
-- ARGV[4..3+2n]  2 fields per limit: count, period_ms
-- then, with alerts, 1 + m fields per limit: its period_ms, then the usage
--             that reaches each threshold
-- then the cost of each decision (0 peeks; -u refunds u units, see
--             Refund below); or one value, the cost of every decision
--
-- Reply: {now_ms, then per key a string of 1 + 5n (+ 3n) little-endian
--        doubles (struct '<d...')}: admitted, then per limit allowed, limit,
--        remaining, retry_after_ms, reset_after_ms; then, with alerts, per
--        limit the thresholds this decision reached first in its window (bit
--        j: threshold j) and that window's start and end (the epoch-aligned
--        period holding now). Packed: Redis turns each integer of a Lua reply
--        into RESP one by one.
-- Error: "ERR floodgate: bad sliding_log arguments", before any decision.
--
-- Refund (a cost -u): after the events no window covers are dropped, the u
-- most recent units logged are removed, from the newest event back; each
-- limit's sum loses those inside its own window, and a cursor past a
-- dropped event points past the new newest one. The reply element is a
-- cost-0 peek at the log as refunded, which is written back (SET PX, the
-- newest event left plus the longest period, or the alert bits' window), or
-- deleted when it holds nothing any more (DEL). No state (or another
-- fingerprint): nothing is written. Alert bits are left as they are. The
-- element then has n more doubles: the units each limit's sum lost. A
-- refund is a call of one key.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- a byte with n, per limit a header '<I4I4' (the 0-based index of its first
-- event still inside its window, the units it counts from there), with
-- alerts per limit '<dd' (the window start its alert bits belong to, the
-- bits), then the
-- logged events in time order, 9 bytes each, '<i6I3': time in ms (signed 48
-- bits) and units. Fixed-width events are read by position (GETRANGE), so
-- a decision reads only the events that age out (or that a retry walks
-- past); a write copies the log as one string, never decoding it. It holds
-- only events inside the longest window, so never more than that limit's
-- count (configuration caps it at 100000): at most 900 KB.
--
-- Writes: SET PX when a request with cost > 0 is admitted, or by a refund
-- (above). As in the C++ log, a cursor that moves past an aged-out event
-- never moves back, even when a later request arrives with an earlier time;
-- so a denial or a peek that ages events out writes the state too (with the
-- same expiry: the newest event's time plus the longest period), or DELs it
-- when nothing is left. Each event ages out once per limit, so such writes
-- are bounded by the admissions.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit, its header's
-- words per limit (a cursor and a sum).
local SCRIPT, FIELDS, REPLY, WORDS = 'sliding_log', 2, 5, 1
--! include prelude.lua
--! include rule_prelude.lua

local count, period = field[1], field[2]
local longest = 0
for i = 1, n do
  if period[i] > longest then longest = period[i] end
end

local EVENT = 9  -- bytes per event
local HEAD = 8 * words  -- header bytes per limit

-- Event k of the log of `key` (its events start at byte `base`): time,
-- units. `cache` holds the events this decision has read.
local function event(key, base, cache, k)
  local ev = cache[k]
  if not ev then
    local at = base + EVENT * k
    ev = {struct.unpack('<i6I3', rget('GETRANGE', key, at, at + EVENT - 1))}
    cache[k] = ev
  end
  return ev[1], ev[2]
end

-- One decision on `key` for `cost`: its reply element.
local function decide(key, cost)
  -- The log: E events from byte offset `base` of the value, and per limit its
  -- cursor C[i] (index of its first counted event; E when none) and sum S[i].
  -- Only the header and the events a decision touches are read (GETRANGE), so
  -- a denial or a peek costs the same whatever the log's length.
  local size = rpget('STRLEN', key)
  if type(size) == 'table' then return type_error(key, 'string', 'the key') end
  local base, E = 0, 0
  local C, S = {}, {}
  for i = 1, n do C[i], S[i] = 0, 0 end
  -- The header as read, and where its limits start: their cursors and sums,
  -- then with alerts their pairs (nil: no valid state).
  local stored, at = nil, nil
  if size > 0 then
    stored = rget('GETRANGE', key, 0, 1 + 255 + 1 + HEAD * n - 1)
    local sfl = string.byte(stored, 1)
    local start = 2 + sfl + HEAD * n  -- header bytes
    if (fp == '' or string.sub(stored, 2, 1 + sfl) == fp) and string.byte(stored, 2 + sfl) == n and
        size >= start and (size - start) % EVENT == 0 then
      local e = (size - start) / EVENT
      local valid = true
      for i = 1, n do
        C[i], S[i] = struct.unpack('<I4I4', stored, 3 + sfl + 8 * (i - 1))
        if C[i] > e then valid = false end
      end
      if valid then
        base, E, at = start, e, 3 + sfl
      else
        for i = 1, n do C[i], S[i] = 0, 0 end
      end
    end
  end

  local cache = {}

  -- A clock step back refunds nothing: decide at the newest event at least.
  local t = now
  local newest = nil
  if E > 0 then
    newest = event(key, base, cache, E - 1)
    if t < newest then t = newest end
  end

  -- Move each limit's cursor past the events its window no longer covers.
  local moved = false
  for i = 1, n do
    while C[i] < E do
      local et, eu = event(key, base, cache, C[i])
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

  -- A refund (cost < 0) takes the -cost newest units off the log, from the
  -- newest event back: each limit's sum loses what it counted of them
  -- (vals[rlen + i], which follow the peek's fields in the reply element:
  -- rlen and rfmt grow by n, for the rest of the call, a refund being a
  -- call of one key), and a cursor past a dropped event points past the
  -- new newest one. The log is then lo..E-1 again, its last event holding
  -- `last` units; the decision goes on as a peek (cost 0), which writes a
  -- state of this rule back as refunded (refunded), or deletes it when it
  -- holds nothing.
  local refunded, last = false, nil
  if cost < 0 then
    refunded = at ~= nil
    for i = 1, n do vals[rlen + i] = 0 end
    local left = -cost
    while left > 0 and E > lo do
      local _, eu = event(key, base, cache, E - 1)
      local take = eu < left and eu or left
      for i = 1, n do
        if C[i] <= E - 1 then
          S[i] = S[i] - take
          vals[rlen + i] = vals[rlen + i] + take
        end
      end
      left = left - take
      if take < eu then
        last = eu - take
        break
      end
      E = E - 1
    end
    for i = 1, n do
      if C[i] > E then C[i] = E end
    end
    rlen = rlen + n
    rfmt = '<' .. string.rep('d', rlen)
    newest = lo < E and event(key, base, cache, E - 1) or nil
    -- The peek's instant, as the engine's peek after its refund: not before
    -- the newest event left (the cursors stay where they moved).
    t = now
    if newest and t < newest then t = newest end
    cost = 0
  end

  local admitted = 1
  local pos = 1
  for i = 1, n do
    local allowed, retry = 0, 0
    if cost > count[i] then
      retry = -1
    elseif S[i] + cost <= count[i] then
      allowed = 1
    else
      -- Walk from the oldest counted event until enough units have aged out.
      local still = S[i]
      for ev = C[i], E - 1 do
        local et, eu = event(key, base, cache, ev)
        still = still - eu
        if still + cost <= count[i] then
          retry = et + period[i] - t
          break
        end
      end
    end
    if allowed == 0 then admitted = 0 end
    vals[pos + 1], vals[pos + 2], vals[pos + 4] = allowed, count[i], retry
    pos = pos + 5
  end
  vals[1] = admitted
  local ok = cost > 0 and admitted == 1

  local kept = nil  -- the new log's events, when it is written
  if refunded then
    kept = ''
    if lo < E then
      kept = rget('GETRANGE', key, base + EVENT * lo, base + EVENT * E - 1)
      if last then
        kept = string.sub(kept, 1, #kept - EVENT) .. struct.pack('<i6I3', newest, last)
      end
    end
  elseif ok or moved then
    kept = ''
    if lo < E then kept = rget('GETRANGE', key, base + EVENT * lo, size - 1) end
  end
  if ok then
    for i = 1, n do S[i] = S[i] + cost end
    -- Same instant: one event, so the log stays small; but not when a cursor
    -- has already passed that event (a step back after a later request): the
    -- units would be summed by a limit whose cursor never subtracts them.
    local merge = lo < E and newest == t
    for i = 1, n do
      if C[i] >= E then merge = false end
    end
    if merge then
      local et, eu = event(key, base, cache, E - 1)
      kept = string.sub(kept, 1, #kept - EVENT) .. struct.pack('<i6I3', et, eu + cost)
    else
      kept = kept .. struct.pack('<i6I3', t, cost)
      -- Cursors past every event now point at the new one.
    end
    newest = t
  elseif lo >= E then
    newest = nil  -- every event aged out
  end

  pos = 1
  for i = 1, n do
    vals[pos + 3] = count[i] > S[i] and count[i] - S[i] or 0  -- remaining
    vals[pos + 5] = (S[i] > 0 and newest) and newest + period[i] - t or 0  -- reset
    pos = pos + 5
  end

  -- The state's life for its alert bits, whose pairs to store alerts() puts
  -- in out after n (unused) values.
  local keep = 0
  if m > 0 then keep = alerts(ok, stored, at, WORDS * n, 0) end

  if kept then
    -- Alert bits outlive an emptied log, as in the C++ state (which the
    -- engine frees only once its expiry, their window's end, has passed):
    -- a clock step back into their window must still find them.
    local bits_left = false
    for i = 1, m > 0 and n or 0 do
      if out[n + 2 * i] ~= 0 then bits_left = true end
    end
    local life = newest and newest + longest or 0
    if keep > life then life = keep end
    -- A refund's state that holds nothing any more goes, bits and all, as
    -- the engine frees it then.
    if (#kept == 0 and not bits_left) or (refunded and life <= now) then
      rget('DEL', key)
    else
      local parts = {head, string.char(n)}
      for i = 1, n do parts[#parts + 1] = struct.pack('<I4I4', C[i] - lo, S[i]) end
      for i = 1, m > 0 and n or 0 do
        parts[#parts + 1] = struct.pack('<dd', out[n + 2 * i - 1], out[n + 2 * i])
      end
      local ttl = life - now
      if ttl < 1 then ttl = 1 end
      rget('SET', key, table.concat(parts) .. kept, 'PX', string.format('%d', ttl))
    end
  end

  return struct.pack(rfmt, unpack(vals, 1, rlen))
end

for j = 1, k do
  reply[j + 1] = decide(KEYS[j], same_cost or tonumber(ARGV[cost_at + j]))
end
return reply
