-- alert_stream: the Redis stream of pending quota alert events, shared by
-- every floodgate server on this Redis, read through one consumer group so
-- that each event is delivered by one server (src/redis/alert_stream.h).
--
-- KEYS[1]  the stream, fg:{alerts}
-- ARGV[1]  the operation; ARGV[2] the consumer group; then, by operation:
--   add      max_len, ttl_ms, then 6 fields per event: event_id, url, body,
--            signature, created_ms, attempts. Appends the events (the oldest
--            entries past max_len are trimmed), creates the group if it is
--            missing (reading from the stream's start) and makes sure the
--            key expires no sooner than ttl_ms from now, all in this call:
--            the key never exists without an expiry. Reply: the number of
--            entries the trimming dropped.
--   claim    consumer, min_idle_ms, count. Up to `count` entries for
--            `consumer`: first those other consumers took and left
--            unacknowledged for min_idle_ms (a server that stopped without
--            handing them back), then new ones. Reply: {id, {field, value,
--            ...}} per entry. Creates nothing: no stream, no entries.
--   touch    consumer, then ids. Resets the idle time of entries the
--            consumer holds (it is still retrying them). Reply: how many.
--   ack      then ids. Acknowledges and deletes delivered (or given up)
--            entries. Reply: how many were deleted.
--   release  consumer, max_len, ttl_ms, then 7 fields per event: the entry
--            id it was read from, then the 6 fields of add. Puts each event
--            back as a new entry (with its attempts so far) and
--            acknowledges the old one, so that any server takes it at once;
--            then forgets the consumer if it holds nothing. Reply: how many.
--   forget   consumer, idle_ms. Deletes every other consumer of the group
--            that holds no entry and has been idle for idle_ms (a server
--            gone without leaving: what it held was claimed first). One that
--            holds entries is kept: XGROUP DELCONSUMER would drop them.
--            Reply: how many were deleted.
--   leave    consumer. Deletes the consumer if it holds no entry (a clean
--            stop). Reply: 1 if it holds none (now gone), 0 if it holds some.
-- Error: "ERR floodgate: bad alert_stream arguments"; "WRONGTYPE floodgate:
-- the key holds a <type>, not a stream" when KEYS[1] exists and is not a
-- stream (written by someone else), before anything is read or written.
--! include prelude.lua
local key = KEYS[1]
local op, group = ARGV[1], ARGV[2]
local rcall = redis.call

local function bad()
  return redis.error_reply('ERR floodgate: bad alert_stream arguments')
end

local wrong = type_error(key, 'stream', 'the key')
if wrong then return wrong end

-- The group reads the stream from its start: an entry added before the
-- group existed (never, since add creates it) would still be delivered.
local function ensure_group()
  local ok = redis.pcall('XGROUP', 'CREATE', key, group, '0')
  if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP', 1, true) then
    return ok
  end
  return nil
end

-- Never shortens the expiry another server (with a longer retry_for) set.
local function expire_at_least(ttl)
  local left = rcall('PTTL', key)
  if left < ttl then rcall('PEXPIRE', key, ttl) end
end

-- Appends the event whose 6 fields start at ARGV[at]; returns its new id.
local function append(max_len, at)
  return rcall('XADD', key, 'MAXLEN', max_len, '*', 'id', ARGV[at], 'url', ARGV[at + 1], 'body',
    ARGV[at + 2], 'sig', ARGV[at + 3], 'created', ARGV[at + 4], 'attempts', ARGV[at + 5])
end

if op == 'add' then
  local max_len, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
  local n = (#ARGV - 4) / 6
  if not max_len or not ttl or ttl < 1 or n < 1 or n ~= math.floor(n) then return bad() end
  local before = rcall('XLEN', key)
  for i = 0, n - 1 do append(max_len, 5 + 6 * i) end
  local err = ensure_group()
  if err then return err end
  expire_at_least(ttl)
  local over = before + n - max_len
  return over > 0 and over or 0
elseif op == 'claim' then
  local consumer, min_idle, count = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  if not consumer or not min_idle or not count or count < 1 then return bad() end
  if rcall('EXISTS', key) == 0 then return {} end
  local err = ensure_group()
  if err then return err end
  local out = {}
  -- XAUTOCLAIM looks at a bounded stretch of the pending list per call:
  -- follow its cursor a few times.
  local cursor = '0-0'
  for _ = 1, 8 do
    local r = rcall('XAUTOCLAIM', key, group, consumer, min_idle, cursor, 'COUNT', count - #out)
    for _, entry in ipairs(r[2]) do
      if entry and entry ~= false then out[#out + 1] = entry end
    end
    cursor = r[1]
    if cursor == '0-0' or #out >= count then break end
  end
  if #out < count then
    local r = rcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #out, 'STREAMS', key,
      '>')
    if r then
      for _, entry in ipairs(r[1][2]) do out[#out + 1] = entry end
    end
  end
  return out
elseif op == 'touch' then
  local consumer = ARGV[3]
  if not consumer or #ARGV < 4 then return bad() end
  if rcall('EXISTS', key) == 0 then return 0 end
  local args = {}
  for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
  args[#args + 1] = 'JUSTID'  -- no entries back, and no delivery count bumped
  local r = rcall('XCLAIM', key, group, consumer, 0, unpack(args))
  return #r
elseif op == 'ack' then
  if #ARGV < 3 then return bad() end
  if rcall('EXISTS', key) == 0 then return 0 end
  local ids = {}
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
  rcall('XACK', key, group, unpack(ids))
  return rcall('XDEL', key, unpack(ids))
elseif op == 'release' then
  local consumer, max_len, ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local n = (#ARGV - 5) / 7
  if not consumer or not max_len or not ttl or ttl < 1 or n < 1 or n ~= math.floor(n) then
    return bad()
  end
  local existed = rcall('EXISTS', key) == 1
  for i = 0, n - 1 do
    local at = 6 + 7 * i
    append(max_len, at + 1)
    if existed then
      rcall('XACK', key, group, ARGV[at])
      rcall('XDEL', key, ARGV[at])
    end
  end
  local err = ensure_group()
  if err then return err end
  expire_at_least(ttl)
  local held = rcall('XPENDING', key, group, '-', '+', 1, consumer)
  if #held == 0 then rcall('XGROUP', 'DELCONSUMER', key, group, consumer) end
  return n
elseif op == 'forget' then
  local consumer, idle = ARGV[3], tonumber(ARGV[4])
  if not consumer or not idle or idle < 0 then return bad() end
  if rcall('EXISTS', key) == 0 then return 0 end
  local consumers = redis.pcall('XINFO', 'CONSUMERS', key, group)
  if type(consumers) ~= 'table' or consumers.err then return 0 end  -- no group yet
  local n = 0
  for _, c in ipairs(consumers) do
    local info = {}
    for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
    if info.name ~= consumer and info.pending == 0 and info.idle >= idle then
      rcall('XGROUP', 'DELCONSUMER', key, group, info.name)
      n = n + 1
    end
  end
  return n
elseif op == 'leave' then
  local consumer = ARGV[3]
  if not consumer then return bad() end
  if rcall('EXISTS', key) == 0 then return 0 end
  local held = redis.pcall('XPENDING', key, group, '-', '+', 1, consumer)
  if type(held) ~= 'table' or held.err then return 1 end  -- no group: nothing to leave
  if #held > 0 then return 0 end
  rcall('XGROUP', 'DELCONSUMER', key, group, consumer)
  return 1
end
return bad()
