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
-- then the cost of each decision (0 peeks; -u refunds u units, see
--             Refund below); or one value, the cost of every decision
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
-- Refund (a cost -u, rules only): each limit's TAT moves back by u x the
-- emission interval, not below now (never more than a full burst). The
-- reply element is a cost-0 peek at the state as refunded, which is written
-- back (SET PX, the peek's expiry), or deleted when no TAT is ahead of now
-- and no alert bit keeps it (DEL). No state (or another fingerprint):
-- nothing is written. Alert bits are left as they are. The element then has
-- n more doubles: the units each limit got back (min(u, the emission
-- intervals its TAT was ahead of now, a part one counted)). A refund is a
-- call of one key.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit one little-endian double: the theoretical arrival time in us;
-- then, with alerts, per limit two more: the window start its alert bits
-- belong to, and the bits. Written (SET PX) only when a request with cost > 0
-- is admitted, or by a refund (above).
--
-- Exactness: the configuration keeps interval * limit <= 2^52 us, and times in
-- us stay below 2^53 until the year 2255.
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit, its state's
-- words per limit.
local SCRIPT, FIELDS, REPLY, WORDS = 'gcra', 2, 5, 1
--! include prelude.lua
--! include rule_prelude.lua

local emission, limit = field[1], field[2]
local now_us = now * 1000

-- Limit i for cost c against its stored TAT, in the state at byte `at` of
-- `raw` (at nil: none): allowed (0/1), remaining, retry, ttl, the new TAT,
-- the expiry in ms (0: nothing to keep).
local function step(i, c, raw, at)
  local stat = 0
  if at then stat = unpack_state('<d', raw, at + 8 * (i - 1)) end
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

for j = 1, k do
--! include rule_key.lua
  local refunded = false
  if cost and cost < 0 then  -- a refund of -cost units (see the header)
    refunded = at ~= nil
    for i = 1, at and n or 0 do
      local tat = unpack_state('<d', raw, at + 8 * (i - 1))
      vals[rlen + i] = 0
      if tat > now_us then
        -- Emission intervals ahead (a part one counts). Not below now;
        -- compared before multiplying, as the C++ does.
        local ahead = ceildiv(tat - now_us, emission[i])
        if -cost >= ahead then
          tat = now_us
          vals[rlen + i] = ahead
        else
          tat = tat + cost * emission[i]
          vals[rlen + i] = -cost
        end
      end
      out[i] = tat
    end
--! include rule_refund.lua
  end
  if cost then  -- nil: the key holds another type (answered)
    local admitted, expires, pos = 1, 0, 1
    for i = 1, n do
      local allowed, remaining, retry, ttl, new_tat, e = step(i, cost, raw, at)
      if allowed == 0 then admitted = 0 end
      vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, limit[i], remaining,
        retry
      vals[pos + 5] = ttl
      out[i] = new_tat
      if e > expires then expires = e end
      pos = pos + 5
    end
--! include rule_decided.lua
  end
end
return reply
