-- control: the control plane's records (overrides, blocks, runtime rules)
-- and its change log, shared by every floodgate server on this Redis
-- (src/redis/control_store.h). The five keys share the hash tag {control},
-- so each call is one atomic step on one node: one server, a Cluster or
-- behind Twemproxy alike. None has an expiry: they are configuration, kept
-- until changed.
--
-- KEYS[1..3]  the tables fg:{control}:overrides, :blocks, :rules: hashes of
--             entry key -> "<expires_at_ms>:<value>", the expiry in decimal
--             (0: never), the value's bytes after the first ':'
-- KEYS[4]     fg:{control}:version, the counter every write bumps
-- KEYS[5]     fg:{control}:log, the change log, newest first
-- ARGV[1]     the operation; then, by operation:
--   put   table (1..3), now_ms, key, expires_at_ms, value, log
--   del   table (1..3), now_ms, key, log
--         Drop the table's entries expired at now_ms, then set (put) or
--         delete (del; an absent entry is no error) the entry, bump the
--         version, and push `log` onto the change log unless it is '' (the
--         log keeps its last 1000). Reply: the new version.
--   load  now_ms. Reply: {version, then per table (KEYS[1..3] in order) a
--         flat array key, "<expires_at_ms>:<value>", ... of the entries
--         unexpired at now_ms}; version is the counter's text, or 0 when
--         there is none yet. Writes nothing.
-- An entry is expired at now_ms when its expiry is not 0 and <= now_ms.
-- Errors: "ERR floodgate: bad control arguments"; "WRONGTYPE floodgate:
-- KEYS[i] holds a <type>, not a <type>" when a key the call uses (put and
-- del: its table's, the version, the log; load: all but the log) holds
-- another type than the one above (written by someone else), before
-- anything is read or written.
--! include prelude.lua
local rcall = redis.call
local op = ARGV[1]
local log_keep = 1000

local function bad()
  return redis.error_reply('ERR floodgate: bad control arguments')
end

-- Checks the types of KEYS[i] for each i of `indexes` (as in the header):
-- the first error. Only the keys a call uses, so that a stray key in one
-- table leaves the others usable.
local function types_error(indexes)
  local want = {'hash', 'hash', 'hash', 'string', 'list'}
  for _, i in ipairs(indexes) do
    local wrong = type_error(KEYS[i], want[i], 'KEYS[' .. i .. ']')
    if wrong then return wrong end
  end
  return nil
end

-- Whether the encoded entry `v` is expired at `now`. A value that does not
-- start with a number (not written by floodgate) never expires here: the
-- reader reports it rather than have it vanish.
local function expired(v, now)
  local at = tonumber(string.match(v, '^(%-?%d+):'))
  return at ~= nil and at ~= 0 and at <= now
end

-- HDEL in slices: unpack() of a very long list would overflow Lua's stack.
local function drop_expired(key, now)
  local all = rcall('HGETALL', key)
  local gone = {}
  for i = 1, #all, 2 do
    if expired(all[i + 1], now) then gone[#gone + 1] = all[i] end
  end
  for i = 1, #gone, 1000 do
    rcall('HDEL', key, unpack(gone, i, math.min(i + 999, #gone)))
  end
end

if op == 'put' or op == 'del' then
  local table_index, now = tonumber(ARGV[2]), tonumber(ARGV[3])
  local key, log, expires_at
  if op == 'put' then
    if #ARGV ~= 7 then return bad() end
    key, expires_at, log = ARGV[4], ARGV[5], ARGV[7]
    if not string.match(expires_at, '^%-?%d+$') then return bad() end
  else
    if #ARGV ~= 5 then return bad() end
    key, log = ARGV[4], ARGV[5]
  end
  if table_index ~= 1 and table_index ~= 2 and table_index ~= 3 or not now then return bad() end
  local wrong = types_error({table_index, 4, 5})
  if wrong then return wrong end
  -- First, so that a version key holding no number fails the call before
  -- anything is written (Redis does not undo a script's earlier writes).
  local version = rcall('INCR', KEYS[4])
  local hash = KEYS[table_index]
  drop_expired(hash, now)
  if op == 'put' then
    rcall('HSET', hash, key, expires_at .. ':' .. ARGV[6])
  else
    rcall('HDEL', hash, key)
  end
  if log ~= '' then
    rcall('LPUSH', KEYS[5], log)
    rcall('LTRIM', KEYS[5], 0, log_keep - 1)
  end
  return version
elseif op == 'load' then
  local now = tonumber(ARGV[2])
  if #ARGV ~= 2 or not now then return bad() end
  local wrong = types_error({1, 2, 3, 4})
  if wrong then return wrong end
  local out = {rcall('GET', KEYS[4]) or 0}
  for t = 1, 3 do
    local all = rcall('HGETALL', KEYS[t])
    local live = {}
    for i = 1, #all, 2 do
      if not expired(all[i + 1], now) then
        live[#live + 1] = all[i]
        live[#live + 1] = all[i + 1]
      end
    end
    out[#out + 1] = live
  end
  return out
end
return bad()
