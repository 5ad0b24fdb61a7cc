-- sliding_window: the two-bucket weighted counter, exact in integers, every
-- limit of a rule in one decision, all-or-nothing; a port of
-- src/core/sliding_window.cc and rule_eval.cc. One call makes k decisions of
-- one rule, in KEYS order, each on its own key (a key named twice sees the
-- first decision's write).
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
-- Reply: {now_ms, then per key a string of 1 + 7n (+ 3n) little-endian
--        doubles (struct '<d...')}: admitted, then per limit allowed, limit,
--        remaining, retry_after_ms, reset_after_ms, window_start_ms,
--        window_end_ms; then, with alerts, per limit the thresholds this
--        decision reached first in its window (bit j: threshold j) and that
--        window's start and end. Packed: Redis turns each integer of a Lua
--        reply into RESP one by one.
-- Error: "ERR floodgate: bad sliding_window arguments", before any decision.
--
-- Refund (a cost -u): each limit takes u units off its current bucket
-- first, then off the previous one, neither below zero (a unit taken from
-- the previous bucket lowers the estimate by its weight only). The reply
-- element is a cost-0 peek at the state as refunded (a limit that gave units
-- back in the form a decision writes: current bucket start, current,
-- previous), which is written back (SET PX, the peek's expiry), or deleted
-- when it holds nothing any more (DEL). No state (or another fingerprint):
-- nothing is written. Alert bits are left as they are. The element then has
-- n more doubles: the units each limit took off its buckets. A refund is a
-- call of one key.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit three little-endian doubles: current bucket start, current,
-- previous; then, with alerts, per limit two more: the window start its alert
-- bits belong to, and the bits. Written (SET PX) only when a request with
-- cost > 0 is admitted, or by a refund (above).
--
-- Exactness: the configuration keeps count * period_ms <= 2^53, and every
-- comparison below is arranged so that no product or sum exceeds that (the
-- C++ compares previous * weight + (current + cost) * period <= count *
-- period, which can reach 2^54; here both sides are split first).
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit, its state's
-- words per limit.
local SCRIPT, FIELDS, REPLY, WORDS = 'sliding_window', 2, 7, 3
--! include prelude.lua
--! include rule_prelude.lua

local count, period = field[1], field[2]

-- Limit i for cost c against its stored (bucket start, current, previous),
-- in the state at byte `at` of `raw` (at nil: none): allowed (0/1),
-- remaining, retry, reset, window start, window end, the state afterwards
-- (start, current, previous) and its expiry (0: none).
local function step(i, c, raw, at)
  local sws, scur, sprev = 0, 0, 0
  if at then sws, scur, sprev = unpack_state('<ddd', raw, at + 24 * (i - 1)) end
  local p, lim = period[i], count[i]
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

  local allowed, retry = 0, 0
  if c > lim then
    retry = -1
  elseif cur + c <= lim and prev * weight <= (lim - cur - c) * p then
    allowed = 1
    cur = cur + c
  elseif cur + c <= lim then
    -- Room comes back within this bucket as the previous one slides out.
    local max_weight = floordiv((lim - cur - c) * p, prev)
    retry = (start + p - max_weight) - t
  else
    -- This bucket alone is too full: wait into the next one.
    local max_weight = floordiv((lim - c) * p, cur)
    retry = (start + 2 * p - max_weight) - t
  end

  -- remaining = floor(lim - cur - prev * weight / p)
  local room = lim * p - prev * weight - cur * p
  local expires, reset = 0, 0
  if cur > 0 then
    expires = start + 2 * p
  elseif prev > 0 then
    expires = start + p
  end
  if expires > 0 then reset = expires - t end
  return allowed, room > 0 and floordiv(room, p) or 0, retry, reset, start, start + p, cur, prev,
    expires
end

for j = 1, k do
--! include rule_key.lua
  local refunded = false
  if cost and cost < 0 then  -- a refund of -cost units (see the header)
    refunded = at ~= nil
    for i = 1, at and n or 0 do
      local _, _, _, _, ws, _, cur, prev = step(i, 0, raw, at)
      local from_cur = cur < -cost and cur or -cost
      local from_prev = prev < -cost - from_cur and prev or -cost - from_cur
      if from_cur + from_prev > 0 then
        out[3 * i - 2], out[3 * i - 1], out[3 * i] = ws, cur - from_cur, prev - from_prev
      else
        out[3 * i - 2], out[3 * i - 1], out[3 * i] = unpack_state('<ddd', raw, at + 24 * (i - 1))
      end
      vals[rlen + i] = from_cur + from_prev
    end
--! include rule_refund.lua
  end
  if cost then  -- nil: the key holds another type (answered)
    local admitted, expires, pos = 1, 0, 1
    for i = 1, n do
      local allowed, remaining, retry, reset, ws, we, cur, prev, e = step(i, cost, raw, at)
      if allowed == 0 then admitted = 0 end
      vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, count[i], remaining,
        retry
      vals[pos + 5], vals[pos + 6], vals[pos + 7] = reset, ws, we
      out[3 * i - 2], out[3 * i - 1], out[3 * i] = ws, cur, prev
      if e > expires then expires = e end
      pos = pos + 7
    end
--! include rule_decided.lua
  end
end
return reply
