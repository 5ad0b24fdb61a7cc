-- fixed_window: one counter per window, every limit of a rule in one
-- decision, all-or-nothing; a port of src/core/fixed_window.cc and
-- rule_eval.cc. One call makes k decisions of one rule, in KEYS order, each
-- on its own key (a key named twice sees the first decision's write).
--
-- KEYS[1..k]  the state keys, fg:{rule:subject} or fg:{rule:subject}:tier
-- ARGV[1]     definition fingerprint; a state with another one is treated as
--             empty ('' skips the check)
-- ARGV[2]     now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]     n, the number of limits; or 'nAm' (e.g. '2a3') for a rule with
--             m alert thresholds (src/core/alerts.h)
-- ARGV[4..3+6n]  6 fields per limit: count, period_ms, b0, b1, b2, b3.
--             period_ms > 0: windows aligned to the epoch (the b fields unused).
--             period_ms = 0: calendar windows [b0,b1) [b1,b2) [b2,b3), the
--             previous, current and next windows around the caller's clock.
-- then, with alerts, 1 + m fields per limit: its period_ms, then the usage
--             that reaches each threshold
-- then the cost of each decision (0 peeks; -u refunds u units, see
--             Refund below); or one value, the cost of every decision
--
-- Reply: {now_ms, then per key one element}: a string of 1 + 7n (+ 3n)
--        little-endian doubles (struct '<d...'), admitted then per limit
--        allowed, limit, remaining, retry_after_ms, reset_after_ms,
--        window_start_ms, window_end_ms; then, with alerts, per limit the
--        thresholds this decision reached first in its window (bit j:
--        threshold j) and that window's start and end; or the error
--        "ERR floodgate: clock
--        skew ..." when a calendar limit's now falls outside [b0, b3) and
--        outside the window the state already counts (that decision changes
--        nothing). Packed, because Redis turns every integer of a Lua reply
--        into RESP one by one, which cost more than the decision itself.
-- Error: "ERR floodgate: bad fixed_window arguments", before any decision.
--
-- Refund (a cost -u): each limit's count in the window holding now drops
-- by min(u, used); a count kept from an earlier window is left alone. The
-- reply element is a cost-0 peek at the state as refunded, which is written
-- back (SET PX, with the expiry that peek finds: the window's end, or the
-- end of the window of alert bits still set), or deleted when it holds
-- nothing any more (DEL). No state (or another fingerprint): nothing is
-- written. Alert bits are left as they are. A calendar limit whose now
-- falls outside the windows sent answers clock skew, and nothing is given
-- back. The element then has n more doubles: the units each limit gave
-- back (min(u, used), or 0). A refund is a call of one key.
--
-- State (one string): a byte with the fingerprint's length, the fingerprint,
-- then per limit three little-endian doubles: window start, window end, used;
-- then, with alerts, per limit two more: the window start its alert bits
-- belong to, and the bits (threshold j reached and reported in it). Written
-- only when a request with cost > 0 is admitted, or by a refund (above); a
-- denial or a peek writes nothing. Its expiry is the end of the latest
-- window it counts: SET PX writes both. On Redis's clock (ARGV[2] ''), when
-- every limit stays in the window the state already counts, that instant is
-- unchanged, and SETRANGE overwrites the state in place (same length),
-- keeping the expiry an earlier SET PX gave it (cheaper: no expiry to set).
-- An explicit now always writes with SET PX: its expiry is relative to that
-- now, not to Redis's clock. Every figure is an integer below 2^53, exact in
-- a Lua number.
--
-- Cost: the batch shares the argument parsing, TIME and the formats; per
-- decision the script makes one GET and at most one write, and creates no
-- closure and no table.

-- The shared prelude's parameters (include/rule_prelude.lua): this script's
-- name, its ARGV fields per limit, its reply doubles per limit, its state's
-- words per limit.
local SCRIPT, FIELDS, REPLY, WORDS = 'fixed_window', 6, 7, 3
--! include prelude.lua
--! include rule_prelude.lua
local on_time = ARGV[2] == ''  -- now is Redis's clock

local count, period, b0, b1, b2, b3 = unpack(field, 1, 6)
local body_at = tostring(1 + fl)  -- SETRANGE's offset of the doubles
local fmod = math.fmod

-- Limit i for cost c against its stored (sws, swe, sused), in the state at
-- byte `at` of `raw` (at nil: none): allowed (0/1), remaining, retry, reset,
-- window start, window end, used afterwards, and whether that window is the
-- one the state counts; nil when no calendar window holds now (clock skew).
local function step(i, c, raw, at)
  local sws, swe, sused = 0, 0, 0
  if at then sws, swe, sused = unpack_state('<ddd', raw, at + 24 * (i - 1)) end
  local t = now
  if sused > 0 and t < sws then t = sws end  -- a step back stays in the counted window
  local ws, we
  local p = period[i]
  if p > 0 then
    local r = fmod(t, p)
    if r < 0 then r = r + p end
    ws = t - r
    we = ws + p
  elseif sused > 0 and t >= sws and t < swe then
    ws, we = sws, swe
  elseif t >= b0[i] and t < b1[i] then
    ws, we = b0[i], b1[i]
  elseif t >= b1[i] and t < b2[i] then
    ws, we = b1[i], b2[i]
  elseif t >= b2[i] and t < b3[i] then
    ws, we = b2[i], b3[i]
  else
    return nil  -- clock skew: no window holds t
  end
  local same = sused > 0 and sws == ws
  local used = same and sused or 0
  local lim = count[i]
  if c > lim then
    return 0, lim - used, -1, used > 0 and we - t or 0, ws, we, used, same
  elseif used + c <= lim then
    local after = used + c
    return 1, lim - after, 0, after > 0 and we - t or 0, ws, we, after, same
  end
  return 0, lim - used, we - t, used > 0 and we - t or 0, ws, we, used, same
end

-- One decision, in general: its reply element. `raw` is the stored value,
-- whose state starts at byte `at` (nil: no valid state) after a fingerprint
-- of length `sfl`; `refunded`: it is a refund's peek at the state as
-- refunded (include/rule_refund.lua), which it writes.
local function decide(key, cost, raw, at, sfl, refunded)
  local admitted = 1
  local expires = 0
  -- Every limit in the window its state counts (and the same fingerprint).
  local same_windows = on_time and at ~= nil and sfl == fl
  local pos = 1
  for i = 1, n do
    local allowed, remaining, retry, reset, ws, we, used, same = step(i, cost, raw, at)
    if not allowed then
      return redis.error_reply(string.format(
        'ERR floodgate: clock skew: now %d is outside the calendar windows [%d, %d) of limit %d',
        now, b0[i], b3[i], i))
    end
    if allowed == 0 then admitted = 0 end
    if not same then same_windows = false end
    vals[pos + 1], vals[pos + 2], vals[pos + 3], vals[pos + 4] = allowed, count[i], remaining, retry
    vals[pos + 5], vals[pos + 6], vals[pos + 7] = reset, ws, we
    out[3 * i - 2], out[3 * i - 1], out[3 * i] = ws, we, used
    if used > 0 and we > expires then expires = we end
    pos = pos + 7
  end
  vals[1] = admitted
  if m > 0 then expires = alerts(cost > 0 and admitted == 1, raw, at, WORDS * n, expires) end
  if cost > 0 and admitted == 1 then
    if same_windows then
      -- The fingerprint is unchanged.
      rget('SETRANGE', key, body_at, pack_state(fmt, unpack(out, 1, words * n)))
    else
      write_state(key, fmt, out, words, expires)
    end
  elseif cost > 0 then
    as_peek(step, raw, at)  -- nothing is consumed
  elseif refunded then
    write_refunded(key, raw, expires)
  end
  return pack_state(rfmt, unpack(vals, 1, rlen))
end

-- The common case, one limit with epoch-aligned windows and no clock step
-- back, is decided inline: step()'s arithmetic with the window of now
-- computed once per call. Interpreting the general path cost Redis more than
-- the GET and the write together. (The differential tests run rules of both
-- kinds.)
local fast = m == 0 and n == 1 and period[1] > 0
local lim1, ws1, we1, left1, px1 = count[1], 0, 0, 0, ''
if fast then
  local r = fmod(now, period[1])
  if r < 0 then r = r + period[1] end
  ws1 = now - r
  we1 = ws1 + period[1]
  left1 = we1 - now  -- > 0
  px1 = string.format('%d', left1)
end

for j = 1, k do
--! include rule_key.lua
  if cost and cost < 0 then  -- a refund of -cost units (see the header)
    local refunded = at ~= nil
    for i = 1, at and n or 0 do
      local allowed, _, _, _, ws, we, used, same = step(i, 0, raw, at)
      if not allowed then  -- clock skew: decide() answers it, and nothing is given back
        refunded = false
        break
      end
      if same then  -- the state counts now's window (used > 0)
        local given = cost < -used and used or -cost
        out[3 * i - 2], out[3 * i - 1], out[3 * i] = ws, we, used - given
        vals[rlen + i] = given
      else
        out[3 * i - 2], out[3 * i - 1], out[3 * i] = unpack_state('<ddd', raw, at + 24 * (i - 1))
        vals[rlen + i] = 0
      end
    end
--! include rule_refund.lua
    reply[j + 1] = decide(key, cost, raw, at, sfl, refunded)
  elseif cost then  -- nil: the key holds another type (answered)
    local sws, swe, sused = 0, 0, 0
    if fast and at then sws, swe, sused = unpack_state('<ddd', raw, at) end
    if fast and (sused == 0 or sws <= now) then
      local used = 0
      if sused > 0 and sws == ws1 then used = sused end
      if cost > lim1 then
        reply[j + 1] = pack_state(rfmt, 0, 0, lim1, lim1 - used, -1, used > 0 and left1 or 0, ws1,
          we1)
      elseif used + cost <= lim1 then
        local after = used + cost
        if cost > 0 then
          local value = pack_state('<ddd', ws1, we1, after)
          if on_time and used > 0 and sfl == fl then
            rget('SETRANGE', key, body_at, value)  -- same window, same expiry
          else
            rget('SET', key, head .. value, 'PX', px1)
          end
        end
        reply[j + 1] = pack_state(rfmt, 1, 1, lim1, lim1 - after, 0, after > 0 and left1 or 0, ws1,
          we1)
      else
        reply[j + 1] = pack_state(rfmt, 0, 0, lim1, lim1 - used, left1, used > 0 and left1 or 0,
          ws1, we1)
      end
    else
      reply[j + 1] = decide(key, cost, raw, at, sfl)
    end
  end
end
return reply
