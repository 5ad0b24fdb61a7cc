-- expiring_prelude: what the scripts that keep expiring sets (expiring_set,
-- otp, concurrency) share, kept once so they cannot drift apart: sorted
-- sets scored by each member's expiry in ms since the epoch, every key
-- given the expiry of its last member in the call that adds to it, so that
-- none lives without a TTL. cmake/embed_lua.cmake pastes it in place of
-- each script's `--! include expiring_prelude.lua` line, after the script's
-- `now`; this file is never loaded alone.
--
-- Defines: prune, add, reexpire.

-- Drops the members of `key` whose expiry is <= now; returns how many.
local function prune(key)
  return redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
end

-- Adds `member` to `key` (or moves its expiry), to expire `ttl` ms from now.
local function add(key, ttl, member)
  redis.call('ZADD', key, string.format('%d', now + ttl), member)
end

-- The key lives exactly as long as its last member. An emptied sorted set
-- is deleted by Redis itself, so there is nothing to expire then; dropping
-- members never moves the last one.
local function reexpire(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, string.format('%d', tonumber(last[2]) - now))
  end
end
