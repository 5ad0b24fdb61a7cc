-- rule_prelude: what the five algorithm scripts (fixed_window, sliding_window,
-- sliding_log, token_bucket, gcra) share, kept once so they cannot drift
-- apart. cmake/embed_lua.cmake pastes it in place of each script's
-- `--! include rule_prelude.lua` line, so Redis loads (and digests) one
-- self-contained script per algorithm; this file is never loaded alone. It
-- uses include/prelude.lua, which each script includes first.
--
-- It reads ARGV[1..3], the limits' fields, the alert fields and the costs as
-- the scripts' headers describe (a negative cost is a refund, which each
-- script handles first: include/rule_refund.lua), and answers "ERR
-- floodgate: bad <SCRIPT> arguments" before any decision. The including script defines first:
--   SCRIPT  its name, for that error
--   FIELDS  its ARGV fields per limit, ARGV[4..3+FIELDS*n]
--   REPLY   its reply doubles per limit, before the alert fields
--   WORDS   its state's 8-byte words per limit, before the alert pair
--           (sliding_log: its header's)
--
-- Defines: floordiv, ceildiv; fp, now, n, m, k, na (ARGV[1..3]); field (the
-- limits' fields); aperiod, aunits, band, bor (alerts); cost_at, same_cost
-- (the costs); reply, rlen, rfmt, vals (the replies); fl, head, words, fmt,
-- out (the state); rget, rpget, unpack_state, pack_state, write_state, write_refunded,
-- alerts, as_peek.
local function floordiv(a, b)  -- exact for integers below 2^53, b > 0
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end
local function ceildiv(a, b) return -floordiv(-a, b) end

local fp = ARGV[1]
local now = now_ms(ARGV[2])
local n, m = tonumber(ARGV[3]), 0
if not n then
  local ns, ms = string.match(ARGV[3] or '', '^(%d+)a(%d)$')
  n, m = tonumber(ns), tonumber(ms)
end
local k = #KEYS
local na = m > 0 and (1 + m) * n or 0  -- alert fields
if not now or not n or n < 1 or m > 8 or #fp > 255 or k < 1 or
    #ARGV ~= 3 + FIELDS * n + na + k and #ARGV ~= 4 + FIELDS * n + na then
  return redis.error_reply('ERR floodgate: bad ' .. SCRIPT .. ' arguments')
end

-- The limits' fields as numbers: field[f][i] is field f of limit i (nil
-- where it is no number).
local field = {}
for f = 1, FIELDS do field[f] = {} end
for i = 1, n do
  for f = 1, FIELDS do field[f][i] = tonumber(ARGV[3 + FIELDS * (i - 1) + f]) end
end

-- Alerts (src/core/alerts.cc): per limit its period and threshold usages.
local aperiod, aunits = {}, {}
for i = 1, m > 0 and n or 0 do
  local a = 3 + FIELDS * n + (1 + m) * (i - 1)
  aperiod[i] = tonumber(ARGV[a + 1])
  for j = 1, m do aunits[(i - 1) * m + j] = tonumber(ARGV[a + 1 + j]) end
end
local band, bor = bit.band, bit.bor

local cost_at = 3 + FIELDS * n + na
local costs = #ARGV - cost_at  -- k, or 1: one cost for every decision
for j = 1, costs do
  if not tonumber(ARGV[cost_at + j]) then
    return redis.error_reply('ERR floodgate: bad ' .. SCRIPT .. ' arguments')
  end
end
local same_cost = costs == 1 and tonumber(ARGV[cost_at + 1])

-- The call's reply: now, then each decision's element, reply[j + 1] for
-- KEYS[j]: admitted, REPLY doubles per limit, then with alerts 3 per limit.
local reply = {now}
local rlen = 1 + REPLY * n + (m > 0 and 3 * n or 0)
local rfmt = '<' .. string.rep('d', rlen)
local vals = {}  -- the decision's reply fields, refilled by each decision
-- Every state starts with a byte holding the fingerprint's length, then the
-- fingerprint.
local fl = #fp
local head = string.char(fl) .. fp
-- Then per limit its words, with alerts followed by their pair (2 more); a
-- state of doubles (all but sliding_log's) is packed with fmt.
local words = WORDS + (m > 0 and 2 or 0)
local fmt = '<' .. string.rep('d', words * n)
local out = {}  -- the state's numbers a decision writes, refilled by each
local rget, unpack_state, pack_state = redis.call, struct.unpack, struct.pack

-- Writes a state of n limits of `words` doubles (`values`) at `key` with its
-- expiry, in one SET; a state that holds nothing by now is deleted instead.
local function write_state(key, fmt, values, words, expires)
  if expires > now then
    rget('SET', key, head .. pack_state(fmt, unpack(values, 1, words * n)), 'PX',
      string.format('%d', expires - now))
  else
    rget('DEL', key)
  end
end

-- A refund's state `raw` (include/rule_refund.lua), kept as long as the
-- peek at it says it holds anything (`expires`, never later than before),
-- deleted if it holds nothing.
local function write_refunded(key, raw, expires)
  if expires > now then
    rget('SET', key, raw, 'PX', string.format('%d', expires - now))
  else
    rget('DEL', key)
  end
end

-- Each script reads a state key first with rpget, which returns Redis's
-- WRONGTYPE error as a table instead of raising it (see rule_key.lua).
local rpget = redis.pcall

-- With alerts, the alert step of each limit of a decision, once its limits
-- have filled their reply fields in vals (`ok`: it consumed, cost > 0 and
-- admitted). Limit i's stored (window start, bits) are the two doubles
-- after the first `base` 8-byte words of the state at byte `at` of `raw`
-- (at nil: none); the pair to store goes to out after its first `base`
-- values, and the alert fields (the bits fired first in this window, the
-- window's start and end) to vals after every limit's REPLY fields. Returns
-- the later of `expires` and when the state must live until for its bits.
local function alerts(ok, raw, at, base, expires)
  for i = 1, n do
    local aws, abits = 0, 0
    if at then aws, abits = unpack_state('<dd', raw, at + 8 * base + 16 * (i - 1)) end
    local p = 1 + REPLY * (i - 1)
    local ap = aperiod[i]
    local ws, we
    if REPLY == 7 then
      ws, we = vals[p + 6], vals[p + 7]  -- the limit's own window, from its reply
    else
      -- A limit without a window of its own (gcra, token_bucket,
      -- sliding_log): the epoch-aligned period holding now.
      local r = math.fmod(now, ap)
      if r < 0 then r = r + ap end
      ws = now - r
      we = ws + ap
    end
    local fired, keep = 0, 0
    if abits ~= 0 and ws < aws then
      keep = aws + ap  -- the clock stepped back: nothing fires
    else
      local bits = abits
      if ws ~= aws then bits = 0 end
      if ok then
        local used = vals[p + 2] - vals[p + 3]  -- limit - remaining
        for j = 1, m do
          local b = 2 ^ (j - 1)
          if band(bits, b) == 0 and used >= aunits[(i - 1) * m + j] then fired = bor(fired, b) end
        end
      end
      if fired ~= 0 then
        bits = bor(bits, fired)
        aws, abits = ws, bits
      end
      if bits ~= 0 then keep = we end
    end
    out[base + 2 * i - 1], out[base + 2 * i] = aws, abits
    if keep > expires then expires = keep end
    local q = 1 + REPLY * n + 3 * (i - 1)
    vals[q + 1], vals[q + 2], vals[q + 3] = fired, ws, we
  end
  return expires
end

-- A decision that asked for units (cost > 0) and was denied consumes
-- nothing: the limits that had room report as of a peek, with the
-- remaining, retry and reset of step(i, 0, raw, at) (the script's step for
-- limit i, against the state at byte `at` of `raw`).
local function as_peek(step, raw, at)
  local pos = 1
  for i = 1, n do
    if vals[pos + 1] == 1 then
      local _, remaining, retry, reset = step(i, 0, raw, at)
      vals[pos + 3], vals[pos + 4], vals[pos + 5] = remaining, retry, reset
    end
    pos = pos + REPLY
  end
end
