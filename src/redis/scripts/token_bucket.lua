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

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit.
local SCRIPT, FIELDS, REPLY = 'token_bucket', 3, 5
--! include rule_prelude.lua

local rate, period, capacity = {}, {}, {}
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  rate[i] = tonumber(ARGV[a + 1])
  period[i] = tonumber(ARGV[a + 2])
  capacity[i] = tonumber(ARGV[a + 3])
end

local words = m > 0 and 4 or 2  -- doubles per limit in the state
local fmt = '<' .. string.rep('d', words * n)

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
        local ws, we = epoch_window(i)
        local fired, keep
        fired, aws, abits, keep = alert(i, ok, vals[p + 2] - vals[p + 3], ws, we, aws, abits)
        out[2 * n + 2 * i - 1], out[2 * n + 2 * i] = aws, abits
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
end
return reply
