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
-- Error: "ERR floodgate: bad token_bucket arguments", before any decision.
--
-- Refund (a cost -u): each limit's bucket, refilled up to now, gets u
-- tokens back, capped at its capacity. The reply element is a cost-0 peek at
-- the state as refunded, which is written back (SET PX, the peek's expiry),
-- or deleted when every bucket is full and no alert bit keeps it (DEL). No
-- state (or another fingerprint): nothing is written. Alert bits are left
-- as they are. The element then has n more doubles: the tokens each bucket
-- got back (min(u, the tokens missing, a part-refilled one counted)). A
-- refund is a call of one key.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit two little-endian doubles: tokens missing scaled by
-- period_ms (0 = full), time of the last update; then, with alerts, per limit
-- two more: the window start its alert bits belong to, and the bits. Written
-- (SET PX) only when a request with cost > 0 is admitted, or by a refund
-- (above).
--
-- Exactness: the configuration keeps max(count, capacity) * period_ms <= 2^53;
-- comparisons are arranged so no sum exceeds the full bucket.
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit, its state's
-- words per limit.
local SCRIPT, FIELDS, REPLY, WORDS = 'token_bucket', 3, 5, 2
--! include prelude.lua
--! include rule_prelude.lua

local rate, period, capacity = field[1], field[2], field[3]

-- Limit i for cost c against its stored (missing, updated), in the state at
-- byte `at` of `raw` (at nil: none): allowed (0/1), remaining, retry, reset,
-- missing and time afterwards, expiry (0: none).
local function step(i, c, raw, at)
  local missing, updated = 0, 0
  if at then missing, updated = unpack_state('<dd', raw, at + 16 * (i - 1)) end
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

for j = 1, k do
--! include rule_key.lua
  local refunded = false
  if cost and cost < 0 then  -- a refund of -cost units (see the header)
    refunded = at ~= nil
    for i = 1, at and n or 0 do
      local _, _, _, _, missing, t = step(i, 0, raw, at)  -- refilled up to now
      if missing > 0 then
        local p = period[i]
        -- Whole tokens missing (a part-refilled one counts). Compared before
        -- multiplying, as the C++ does: -cost * p may pass 2^53.
        local tokens = ceildiv(missing, p)
        if -cost >= tokens then
          missing = 0
          vals[rlen + i] = tokens
        else
          missing = missing + cost * p
          vals[rlen + i] = -cost
        end
        out[2 * i - 1], out[2 * i] = missing, t
      else
        out[2 * i - 1], out[2 * i] = unpack_state('<dd', raw, at + 16 * (i - 1))
        vals[rlen + i] = 0
      end
    end
--! include rule_refund.lua
  end
  if cost then  -- nil: the key holds another type (answered)
    local admitted, expires, pos = 1, 0, 1
    for i = 1, n do
      local allowed, remaining, retry, reset, missing, t, e = step(i, cost, raw, at)
      if allowed == 0 then admitted = 0 end
      vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, capacity[i], remaining,
        retry
      vals[pos + 5] = reset
      out[2 * i - 1], out[2 * i] = missing, t
      if e > expires then expires = e end
      pos = pos + 5
    end
--! include rule_decided.lua
  end
end
return reply
