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
-- then the cost of each decision (0 peeks); or one value, the cost of
--             every decision
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
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit three little-endian doubles: current bucket start, current,
-- previous; then, with alerts, per limit two more: the window start its alert
-- bits belong to, and the bits. Written (SET PX) only when a request with
-- cost > 0 is admitted.
--
-- Exactness: the configuration keeps count * period_ms <= 2^53, and every
-- comparison below is arranged so that no product or sum exceeds that (the
-- C++ compares previous * weight + (current + cost) * period <= count *
-- period, which can reach 2^54; here both sides are split first).
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table beyond the decoded state.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit.
local SCRIPT, FIELDS, REPLY = 'sliding_window', 2, 7
--! include rule_prelude.lua

local count, period = {}, {}
for i = 1, n do
  count[i] = tonumber(ARGV[2 + 2 * i])
  period[i] = tonumber(ARGV[3 + 2 * i])
end

local words = m > 0 and 5 or 3  -- doubles per limit in the state
local fmt = '<' .. string.rep('d', words * n)

-- Limit i for cost c against its stored (bucket start, current, previous):
-- allowed (0/1), remaining, retry, reset, window start, window end, the
-- state afterwards (start, current, previous) and its expiry (0: none).
local function step(i, c, sws, scur, sprev)
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

local reply = {now}
local out = {}  -- the state to write, 3 per limit
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
      local sws, scur, sprev = 0, 0, 0
      if state then sws, scur, sprev = state[3 * i - 2], state[3 * i - 1], state[3 * i] end
      local allowed, remaining, retry, reset, ws, we, cur, prev, e = step(i, cost, sws, scur, sprev)
      if allowed == 0 then admitted = 0 end
      vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, count[i], remaining,
        retry
      vals[pos + 5], vals[pos + 6], vals[pos + 7] = reset, ws, we
      out[3 * i - 2], out[3 * i - 1], out[3 * i] = ws, cur, prev
      if e > expires then expires = e end
      pos = pos + 7
    end
    vals[1] = admitted
    if m > 0 then
      local ok = cost > 0 and admitted == 1
      for i = 1, n do
        local aws, abits = 0, 0
        if state then aws, abits = state[3 * n + 2 * i - 1], state[3 * n + 2 * i] end
        local p = 1 + 7 * (i - 1)
        local ws, we = vals[p + 6], vals[p + 7]
        local fired, keep
        fired, aws, abits, keep = alert(i, ok, vals[p + 2] - vals[p + 3], ws, we, aws, abits)
        out[3 * n + 2 * i - 1], out[3 * n + 2 * i] = aws, abits
        if keep > expires then expires = keep end
        local r = 1 + 7 * n + 3 * (i - 1)
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
          local sws, scur, sprev = 0, 0, 0
          if state then sws, scur, sprev = state[3 * i - 2], state[3 * i - 1], state[3 * i] end
          local _, remaining, retry, reset = step(i, 0, sws, scur, sprev)
          vals[pos + 3], vals[pos + 4], vals[pos + 5] = remaining, retry, reset
        end
        pos = pos + 7
      end
    end
    reply[j + 1] = pack_state(rfmt, unpack(vals, 1, rlen))
  end
end
return reply
