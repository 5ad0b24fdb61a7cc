-- rule_prelude: what the five algorithm scripts (fixed_window, sliding_window,
-- sliding_log, token_bucket, gcra) share, kept once so they cannot drift
-- apart. cmake/embed_lua.cmake pastes it in place of each script's
-- `--! include rule_prelude.lua` line, so Redis loads (and digests) one
-- self-contained script per algorithm; this file is never loaded alone.
--
-- It reads ARGV[1..3], the alert fields and the costs as the scripts' headers
-- describe, and answers "ERR floodgate: bad <SCRIPT> arguments" before any
-- decision. The including script defines first:
--   SCRIPT  its name, for that error
--   FIELDS  its ARGV fields per limit, ARGV[4..3+FIELDS*n] (it reads them
--           itself, after the include)
--   REPLY   its reply doubles per limit, before the alert fields
--
-- Defines: floordiv, ceildiv; fp, now, n, m, k, na (ARGV[1..3]); aperiod,
-- aunits, band, bor, epoch_window, alert (alerts); cost_at, same_cost (the
-- costs); rlen, rfmt (a decision's reply); fl, head (the state's leading
-- fingerprint); rget, rpget, wrong_type, unpack_state, pack_state.
local function floordiv(a, b)  -- exact for integers below 2^53, b > 0
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end
local function ceildiv(a, b) return -floordiv(-a, b) end

local fp = ARGV[1]
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
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

-- Alerts (src/core/alerts.cc): per limit its period and threshold usages.
local aperiod, aunits = {}, {}
for i = 1, m > 0 and n or 0 do
  local a = 3 + FIELDS * n + (1 + m) * (i - 1)
  aperiod[i] = tonumber(ARGV[a + 1])
  for j = 1, m do aunits[(i - 1) * m + j] = tonumber(ARGV[a + 1 + j]) end
end
local band, bor = bit.band, bit.bor

-- Limit i's alert window when its limit has none of its own (gcra,
-- token_bucket, sliding_log): the epoch-aligned period holding now, as
-- start, end.
local function epoch_window(i)
  local p = aperiod[i]
  local r = math.fmod(now, p)
  if r < 0 then r = r + p end
  local ws = now - r
  return ws, ws + p
end

-- Limit i's alert step after a decision: with its window [ws, we), its
-- usage and its stored (aws, abits), the bits fired, the pair to store and
-- until when the state must live for its bits (0: no bits).
local function alert(i, admitted, used, ws, we, aws, abits)
  if abits ~= 0 and ws < aws then
    return 0, aws, abits, aws + aperiod[i]  -- the clock stepped back: nothing fires
  end
  local bits = abits
  if ws ~= aws then bits = 0 end
  local fired = 0
  if admitted then
    for j = 1, m do
      local b = 2 ^ (j - 1)
      if band(bits, b) == 0 and used >= aunits[(i - 1) * m + j] then fired = bor(fired, b) end
    end
  end
  if fired ~= 0 then
    bits = bor(bits, fired)
    aws, abits = ws, bits
  end
  return fired, aws, abits, bits ~= 0 and we or 0
end

local cost_at = 3 + FIELDS * n + na
local costs = #ARGV - cost_at  -- k, or 1: one cost for every decision
for j = 1, costs do
  if not tonumber(ARGV[cost_at + j]) then
    return redis.error_reply('ERR floodgate: bad ' .. SCRIPT .. ' arguments')
  end
end
local same_cost = costs == 1 and tonumber(ARGV[cost_at + 1])

-- A decision's reply element: admitted, REPLY doubles per limit, then with
-- alerts 3 per limit.
local rlen = 1 + REPLY * n + (m > 0 and 3 * n or 0)
local rfmt = '<' .. string.rep('d', rlen)
-- Every state starts with a byte holding the fingerprint's length, then the
-- fingerprint.
local fl = #fp
local head = string.char(fl) .. fp
local rget, unpack_state, pack_state = redis.call, struct.unpack, struct.pack

-- Where the numbers of a stored state `raw` (a string, or false: none)
-- start, and the length of its fingerprint; the position is nil when there
-- is no state or it is not this rule's (another fingerprint, or another
-- length than n limits of `words` doubles each): the subject then starts
-- afresh. With no fingerprint given (fl 0) any stored one is accepted.
local function state_at(raw, words)
  local sfl = fl
  if not raw then return nil, sfl end
  if fl == 0 then sfl = string.byte(raw, 1) or 0 end  -- '' skips the check
  if #raw == 1 + sfl + 8 * words * n and (fl == 0 or string.find(raw, head, 1, true) == 1) then
    return 2 + sfl, sfl
  end
  return nil, sfl
end

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

-- A state key that holds another type than a string (someone ran SET's
-- cousins, LPUSH, HSET, ... on it): each script reads a key first with
-- rpget, which returns Redis's WRONGTYPE error as a table instead of raising
-- it, and answers that decision with this error, naming the type found,
-- without writing; the call's other decisions are made as usual. The key is
-- not in the message (the caller knows it; its bytes are the user's).
local rpget = redis.pcall
local function wrong_type(key)
  local t = rget('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  return redis.error_reply('WRONGTYPE floodgate: the key holds a ' .. tostring(t) ..
    ', not a string')
end
