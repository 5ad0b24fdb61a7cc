-- concurrency: the leases of one (rule, subject), kept as a sorted set of
-- lease ids scored by each lease's expiry in ms since the epoch; a port of
-- src/core/concurrency.h (the golden vectors, tests/vectors/concurrency.json,
-- run on both). Every call first drops the leases whose expiry is <= now,
-- and ends by giving the key the expiry of its last lease (PEXPIRE), in the
-- same script; a table emptied is deleted (Redis drops an empty sorted set
-- itself). So a holder that dies frees its slot by the lease's TTL, and the
-- key never outlives its leases nor lives without a TTL, whatever happens
-- to the floodgate process.
--
-- KEYS[1]  the table's key, fg:lease:{<rule>:<subject>} (redis/lease_store.h)
-- ARGV[1]  the operation: acquire, release or renew
-- ARGV[2]  now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]  the lease's id
-- ARGV[4]  acquire, renew: the lease's TTL in ms (>= 1)
-- ARGV[5]  acquire: the most live leases the subject may hold (>= 0)
--
-- Reply: {ok, in_flight, ms, now_ms, expired}, all integers. ok: 1 when
--        the lease was granted (acquire; an id already held is refreshed,
--        taking no new slot), was live and is gone (release), or was live
--        and now expires ttl ms from now (renew); else 0. in_flight: the
--        live leases right after. ms: the TTL when granted or renewed; on a
--        refused acquire the ms until enough leases have expired for one
--        more to fit (-1: never, the most is 0); otherwise 0. expired: the
--        leases this call found expired and dropped.
-- Error: "ERR floodgate: bad concurrency arguments", before any write;
--        "WRONGTYPE floodgate: the key holds a <type>, not a zset" when
--        KEYS[1] exists and is not a sorted set (written by someone else),
--        before anything is read or written.
--! include prelude.lua
local key = KEYS[1]
local op = ARGV[1]
local now = now_ms(ARGV[2])
--! include expiring_prelude.lua
local bad = not now or #KEYS ~= 1
local ttl, most = tonumber(ARGV[4]), tonumber(ARGV[5])
if op == 'acquire' then
  bad = bad or #ARGV ~= 5 or not ttl or ttl < 1 or not most or most < 0
elseif op == 'renew' then
  bad = bad or #ARGV ~= 4 or not ttl or ttl < 1
elseif op == 'release' then
  bad = bad or #ARGV ~= 3
else
  bad = true
end
if bad then
  return redis.error_reply('ERR floodgate: bad concurrency arguments')
end
local wrong = type_error(key, 'zset', 'the key')
if wrong then return wrong end

local id = ARGV[3]
local expired = prune(key)
local ok, ms = 0, 0
if op == 'acquire' then
  if redis.call('ZSCORE', key, id) then
    ok = 1  -- held already: refreshed, as a renewal would
  else
    local size = redis.call('ZCARD', key)
    if size < most then
      ok = 1
    elseif most <= 0 then
      ms = -1
    else
      -- size - most + 1 leases must go: the (size - most)-th expiry from
      -- the earliest (0-based), which ties in score do not move.
      local nth = redis.call('ZRANGE', key, size - most, size - most, 'WITHSCORES')
      ms = tonumber(nth[2]) - now
    end
  end
  if ok == 1 then
    add(key, ttl, id)
    ms = ttl
  end
elseif op == 'release' then
  ok = redis.call('ZREM', key, id)
else
  if redis.call('ZSCORE', key, id) then
    add(key, ttl, id)
    ok, ms = 1, ttl
  end
end

reexpire(key)  -- the key lives exactly as long as its last lease
return {ok, redis.call('ZCARD', key), ms, now, expired}
