-- gcra: the generic cell rate algorithm with redis-cell's semantics, in
-- microseconds, every limit of a rule in one decision, all-or-nothing; a
-- port of src/core/gcra.cc and rule_eval.cc. Also serves CL.THROTTLE (one
-- limit, parameters per call, empty fingerprint: one state per key whatever
-- the parameters, as in redis-cell). One call makes k decisions of one rule,
-- in KEYS order, each on its own key (a key named twice sees the first
-- decision's write).
--
-- KEYS[1..k]  the state keys, fg:{rule:subject}[:tier] or fg:cl:{key}
-- ARGV[1]     definition fingerprint; a state with another one is treated as
--             empty ('' skips the check)
-- ARGV[2]     now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]     n, the number of limits; or 'nAm' (e.g. '2a3') for a rule with
--             m alert thresholds (src/core/alerts.h)
-- ARGV[4..3+2n]  2 fields per limit: emission interval in us (period / count),
--             limit (redis-cell's max_burst + 1)
-- then, with alerts, 1 + m fields per limit: its period_ms, then the usage
--             (burst consumed) that reaches each threshold
-- then the cost of each decision (0 peeks); or one value, the cost of
--             every decision
--
-- Reply: {now_ms, then per key a string of 1 + 5n (+ 3n) little-endian
--        doubles (struct '<d...')}: admitted, then per limit allowed, limit,
--        remaining, retry_after_us (-1: never), reset_after_us; then, with
--        alerts, per limit the thresholds this decision reached first in
--        its window (bit j: threshold j) and that window's start and end
--        (the epoch-aligned period holding now). Packed: Redis turns each
--        integer of a Lua reply into RESP one by one.
-- Durations are in microseconds, unrounded: a rule's decision rounds them up
-- to ms, CL.THROTTLE to redis-cell's seconds (the caller does both).
-- Error: "ERR floodgate: bad gcra arguments", before any decision.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit one little-endian double: the theoretical arrival time in us;
-- then, with alerts, per limit two more: the window start its alert bits
-- belong to, and the bits. Written (SET PX) only when a request with cost > 0
-- is admitted.
--
-- Exactness: the configuration keeps interval * limit <= 2^52 us, and times in
-- us stay below 2^53 until the year 2255.
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table beyond the decoded state.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit.
local SCRIPT, FIELDS, REPLY = 'gcra', 2, 5
--! include rule_prelude.lua

local emission, limit = {}, {}
for i = 1, n do
  emission[i] = tonumber(ARGV[2 + 2 * i])
  limit[i] = tonumber(ARGV[3 + 2 * i])
end

local words = m > 0 and 3 or 1  -- doubles per limit in the state
local fmt = '<' .. string.rep('d', words * n)
local now_us = now * 1000

-- Limit i for cost c against its stored TAT (0: none): allowed (0/1),
-- remaining, retry, ttl, the new TAT, the expiry in ms (0: nothing to keep).
local function step(i, c, stat)
  local em = emission[i]
  local lim = limit[i]
  local tolerance = em * lim
  local tat = now_us
  -- An expired TAT is a fresh subject; one ahead of an earlier now (a clock
  -- step back) only makes the answer stricter.
  if stat > now_us then tat = stat end
  local allowed, retry, ttl, new_tat = 0, 0, tat - now_us, tat
  if c > lim then
    retry = -1
  else
    local nt = tat + em * c
    local diff = now_us - (nt - tolerance)
    if diff < 0 then
      retry = -diff
    else
      allowed = 1
      ttl = nt - now_us
      new_tat = nt
    end
  end
  local room = tolerance - ttl
  local remaining = room > 0 and floordiv(room, em) or 0
  local expires = ttl > 0 and ceildiv(now_us + ttl, 1000) or 0
  return allowed, remaining, retry, ttl, new_tat, expires
end

local reply = {now}
local out = {}  -- the state to write
local vals = {}  -- the decision's reply fields
for j = 1, k do
  local key = KEYS[j]
  local raw = rpget('GET', key)
  if type(raw) == 'table' then
    reply[j + 1] = wrong_type(key)
  else
    local cost = same_cost or tonumber(ARGV[cost_at + j])
    local at = state_at(raw, words)
    local state = at and {unpack_state(fmt, raw, at)} or nil
    local admitted = 1
    local expires = 0
    local pos = 1
    for i = 1, n do
      local allowed, remaining, retry, ttl, new_tat, e = step(i, cost, state and state[i] or 0)
      if allowed == 0 then admitted = 0 end
      vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, limit[i], remaining,
        retry
      vals[pos + 5] = ttl
      out[i] = new_tat
      if e > expires then expires = e end
      pos = pos + 5
    end
    vals[1] = admitted
    if m > 0 then
      local ok = cost > 0 and admitted == 1
      for i = 1, n do
        local aws, abits = 0, 0
        if state then aws, abits = state[n + 2 * i - 1], state[n + 2 * i] end
        local p = 1 + 5 * (i - 1)
        local ws, we = epoch_window(i)
        local fired, keep
        fired, aws, abits, keep = alert(i, ok, vals[p + 2] - vals[p + 3], ws, we, aws, abits)
        out[n + 2 * i - 1], out[n + 2 * i] = aws, abits
        if keep > expires then expires = keep end
        local r = 1 + 5 * n + 3 * (i - 1)
        vals[r + 1], vals[r + 2], vals[r + 3] = fired, ws, we
      end
    end
    if cost > 0 and admitted == 1 then
      write_state(key, fmt, out, words, expires)
    elseif cost > 0 then
      -- Nothing is consumed: limits that had room report as of a peek.
      pos = 1
      for i = 1, n do
        if vals[pos + 1] == 1 then
          local _, remaining, retry, ttl = step(i, 0, state and state[i] or 0)
          vals[pos + 3], vals[pos + 4], vals[pos + 5] = remaining, retry, ttl
        end
        pos = pos + 5
      end
    end
    reply[j + 1] = pack_state(rfmt, unpack(vals, 1, rlen))
  end
end
return reply
