-- expiring_set: a set whose members each carry their own expiry (seeds 000
-- and 001), kept as a sorted set scored by each member's expiry in ms since
-- the epoch; a port of src/engine/set_store.cc. Every call first drops the
-- members whose expiry is <= now, and ends by giving the key the expiry of
-- its last member (PEXPIRE), in the same script: a member is never returned
-- or counted once expired, and the key never outlives its members nor lives
-- without a TTL, whatever happens to the floodgate process.
--
-- KEYS[1]  the set's key, fg:set:{key}
-- ARGV[1]  the operation: add, rem, has, card or members
-- ARGV[2]  now in ms since the epoch; '' reads the server's TIME (once)
-- ARGV[3]  add, rem, has: the member
-- ARGV[4]  add: the member's TTL in ms (>= 1)
-- ARGV[5]  add: the most live members the set may hold
--
-- Reply: {now_ms, value} and, for members, then member, expires_at_ms for
--        each live member, earliest expiry first (ties in byte order, as
--        the engine lists them). value: add 1 (new member), 0 (refreshed)
--        or -1 (refused: the set is full); rem 1 or 0 (was it there); has
--        1 or 0; card and members the number of live members.
-- Error: "ERR floodgate: bad expiring_set arguments", before any write;
--        "WRONGTYPE floodgate: the key holds a <type>, not a zset" when
--        KEYS[1] exists and is not a sorted set (written by someone else),
--        before anything is read or written.
--! include prelude.lua
local key = KEYS[1]
local op = ARGV[1]
local now = now_ms(ARGV[2])
--! include expiring_prelude.lua
local bad = not now or #KEYS ~= 1
if op == 'add' then
  local ttl, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
  bad = bad or #ARGV ~= 5 or not ttl or ttl < 1 or not cap or cap < 0
elseif op == 'rem' or op == 'has' then
  bad = bad or #ARGV ~= 3
elseif op == 'card' or op == 'members' then
  bad = bad or #ARGV ~= 2
else
  bad = true
end
if bad then
  return redis.error_reply('ERR floodgate: bad expiring_set arguments')
end
local wrong = type_error(key, 'zset', 'the key')
if wrong then return wrong end

prune(key)
local reply = {now, 0}
if op == 'add' then
  local member = ARGV[3]
  if redis.call('ZSCORE', key, member) then
    reply[2] = 0
  elseif redis.call('ZCARD', key) >= tonumber(ARGV[5]) then
    reply[2] = -1
  else
    reply[2] = 1
  end
  if reply[2] >= 0 then
    add(key, tonumber(ARGV[4]), member)
  end
elseif op == 'rem' then
  reply[2] = redis.call('ZREM', key, ARGV[3])
elseif op == 'has' then
  reply[2] = redis.call('ZSCORE', key, ARGV[3]) and 1 or 0
elseif op == 'card' then
  reply[2] = redis.call('ZCARD', key)
else
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  reply[2] = #all / 2
  for i = 1, #all do reply[2 + i] = all[i] end
end

reexpire(key)  -- the key lives exactly as long as its last member
return reply
