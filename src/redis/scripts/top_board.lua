-- top_board: where the floodgate servers sharing this Redis leave each
-- other their top-subjects sketches (src/redis/redis_sketch_board.h). Both keys
-- share the hash tag {top}: each call is one atomic step on one node (one
-- server, a Cluster or behind Twemproxy alike), one round trip. Both keys
-- always have a TTL: that of the longest-lived server listed.
--
-- KEYS[1]  fg:{top}:servers  sorted set: server name -> when its sketches
--          expire, in ms on the publishers' clocks
-- KEYS[2]  fg:{top}:blobs    hash: server name -> its sketches (bytes)
-- ARGV[1]  the operation; then, by operation:
--   publish  now_ms, server, ttl_ms, blob
--            Lists `server` until now_ms + ttl_ms with `blob` (replacing
--            its last), drops the servers expired at now_ms, and sets both
--            keys' TTL to the longest-lived server's time left. Reply: the
--            servers listed.
--   read     now_ms, max
--            Reply: a flat array server, blob, ... of at most `max` servers
--            unexpired at now_ms. Writes nothing.
-- now_ms is the caller's clock (the lifetimes are the publishers'), never
-- ''. Errors: "ERR floodgate: bad top_board arguments"; "WRONGTYPE
-- floodgate: KEYS[i] holds a <type>, not a <type>".
--! include prelude.lua
local rcall = redis.call
local op = ARGV[1]

local function bad()
  return redis.error_reply('ERR floodgate: bad top_board arguments')
end

for i, want in ipairs({'zset', 'hash'}) do
  local wrong = type_error(KEYS[i], want, 'KEYS[' .. i .. ']')
  if wrong then return wrong end
end

if op == 'publish' then
  if #ARGV ~= 5 then return bad() end
  local now, server, ttl = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
  if now == nil or ttl == nil or ttl < 1 then return bad() end
  rcall('ZADD', KEYS[1], now + ttl, server)
  rcall('HSET', KEYS[2], server, ARGV[5])
  local gone = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  for i = 1, #gone, 1000 do
    rcall('HDEL', KEYS[2], unpack(gone, i, math.min(i + 999, #gone)))
  end
  rcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  local last = rcall('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local left = math.max(ttl, math.floor(tonumber(last[2]) - now))
  rcall('PEXPIRE', KEYS[1], left)
  rcall('PEXPIRE', KEYS[2], left)
  return rcall('ZCARD', KEYS[1])
end

if op == 'read' then
  if #ARGV ~= 3 then return bad() end
  local now, max = tonumber(ARGV[2]), tonumber(ARGV[3])
  if now == nil or max == nil or max < 1 then return bad() end
  local live = rcall('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0, max)
  local out = {}
  for _, server in ipairs(live) do
    local blob = rcall('HGET', KEYS[2], server)
    if blob then
      out[#out + 1] = server
      out[#out + 1] = blob
    end
  end
  return out
end

return bad()
