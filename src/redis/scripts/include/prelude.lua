-- prelude: what every script shares (the five algorithm scripts,
-- expiring_set, otp, concurrency, alert_stream, control), kept once so
-- they cannot drift apart.
-- cmake/embed_lua.cmake pastes it in place of each script's
-- `--! include prelude.lua` line, before the script's other includes (they
-- use it); this file is never loaded alone.
--
-- Defines: now_ms, type_error.

-- The call's now in ms since the epoch: `arg` (a script's ARGV[2]), or
-- Redis's clock (TIME) when it is ''; nil when it is no number. A script
-- reads it once, so every decision of a call shares one now, and floodgate
-- servers with skewed clocks agree on Redis's.
local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- nil when `key` holds a `want` (Redis's name of a type) or nothing;
-- otherwise the error the script answers when a key holds another type
-- (someone else wrote it), naming the type found: "WRONGTYPE floodgate:
-- <what> holds a <type>, not a <want>", `what` saying which key ('the key',
-- 'KEYS[2]'). The key itself is not in the message (the caller knows it; its
-- bytes are the user's).
local function type_error(key, want, what)
  local found = redis.call('TYPE', key)
  if type(found) == 'table' then found = found.ok end  -- a status reply
  if found == want or found == 'none' then return nil end
  return redis.error_reply('WRONGTYPE floodgate: ' .. what .. ' holds a ' .. tostring(found) ..
    ', not a ' .. want)
end
