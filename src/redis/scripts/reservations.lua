-- reservations: the ledger of reservations (store/reservations.h), one
-- string key per reservation, named fg:rsv:{<rule>:<subject>}:<id> so that
-- it sits in the slot of the subject's rule state
-- (redis/reservation_ledger.h). The value says what the key holds:
--
--   held:<expires_at_ms>:<estimate>:<tier>   a reservation not yet settled
--   settled:<expires_at_ms>                  a settled marker
--
-- expires_at_ms is when the record stops being live, on the call's clock:
-- it lets an explicit now (tests, replays) decide as the embedded store
-- does, where the key's own TTL (always set, from the TTL given) only
-- frees the memory. With Redis's TIME the two fall together. The tier is
-- last: it may hold any byte, ':' included.
--
-- A hold writes a record with SET … PX … NX: one key, one TTL, never a key
-- without one. A take turns a held record into a settled marker that keeps
-- the key's TTL (read with PTTL and set again: KEEPTTL needs Redis 6), so
-- of any number of concurrent takes of one reservation exactly one finds
-- it held.
--
-- KEYS[1]  the record's key
-- ARGV[1]  the operation: hold or take
-- ARGV[2]  now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]  hold: the TTL in ms, 1 to 86400000
-- ARGV[4]  hold: the estimate, 1 to 10^15
-- ARGV[5]  hold: the tier, at most 64 bytes ('' for the rule's own limits)
--
-- Reply: hold: {ok, now_ms}: ok 1 when the record was written, 0 when a
--          live record (held or settled) was there already, left alone.
--        take: {outcome, now_ms, estimate, tier}: outcome 1 when the
--          record was held (now settled; estimate and tier say what it
--          held), 2 when it was settled already, 0 when there is none or
--          it is past its expiry (then estimate 0 and tier '').
-- Error: "ERR floodgate: bad reservations arguments", before any write;
--        "WRONGTYPE floodgate: the key holds a <type>, not a string" when
--        KEYS[1] exists and is not a string; "ERR floodgate: the key holds
--        no reservation" when it is a string in no form above (someone
--        else's): both before anything is written.
--! include prelude.lua
local key = KEYS[1]
local op = ARGV[1]
local now = ARGV[2] and now_ms(ARGV[2])

-- `arg` as a whole number in [low, high], or nil (also for no argument).
local function whole(arg, low, high)
  local n = arg and tonumber(arg)
  if not n or n ~= math.floor(n) or n < low or n > high then return nil end
  return n
end

local bad = not now or now < 0 or #KEYS ~= 1
local ttl, estimate
if op == 'hold' then
  ttl = whole(ARGV[3], 1, 86400000)
  estimate = whole(ARGV[4], 1, 1000000000000000)
  bad = bad or #ARGV ~= 5 or not ttl or not estimate or #ARGV[5] > 64
elseif op == 'take' then
  bad = bad or #ARGV ~= 2
else
  bad = true
end
if bad then
  return redis.error_reply('ERR floodgate: bad reservations arguments')
end
local wrong = type_error(key, 'string', 'the key')
if wrong then return wrong end

-- What `value` holds: 'held', expiry, estimate, tier; 'settled', expiry;
-- or nil for a value in neither form.
local function parse(value)
  local expires, held, tier = string.match(value, '^held:(%d+):(%d+):(.*)$')
  if expires then return 'held', tonumber(expires), tonumber(held), tier end
  expires = string.match(value, '^settled:(%d+)$')
  if expires then return 'settled', tonumber(expires) end
  return nil
end
local function not_ours()
  return redis.error_reply('ERR floodgate: the key holds no reservation')
end

local found = redis.call('GET', key)
local kind, expires, held, tier
if found then
  kind, expires, held, tier = parse(found)
  if not kind then return not_ours() end
  if expires <= now then
    -- Past its expiry on this call's clock: it is no record any more.
    redis.call('DEL', key)
    found = false
  end
end

if op == 'hold' then
  if found then return {0, now} end
  local value = string.format('held:%d:%d:', now + ttl, estimate) .. ARGV[5]
  redis.call('SET', key, value, 'PX', string.format('%d', ttl), 'NX')
  return {1, now}
end

if not found then return {0, now, 0, ''} end
if kind == 'settled' then return {2, now, 0, ''} end
-- The marker keeps the key's TTL; a key someone stripped of its TTL gets
-- the record's remaining time, so that it never lives without one.
local left = redis.call('PTTL', key)
if left <= 0 then left = expires - now end
redis.call('SET', key, string.format('settled:%d', expires), 'PX', string.format('%d', left))
return {1, now, held, tier}
