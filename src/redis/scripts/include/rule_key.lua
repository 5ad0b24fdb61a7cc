-- rule_key: how the algorithm scripts that keep a subject's state in one
-- string they GET (fixed_window, sliding_window, token_bucket, gcra) start
-- each decision of their per-key loop, kept once so they cannot drift
-- apart. cmake/embed_lua.cmake pastes it in place of the
-- `--! include rule_key.lua` line at the top of the body of each script's
-- `for j = 1, k do`, after rule_prelude.lua; this file is never loaded
-- alone. It is a run of statements rather than a function: Redis pays for
-- each closure a script makes, and for each of its upvalues, on every call,
-- and the decision that follows is inline in the loop for the same reason.
--
-- Defines, for KEYS[j], read with one GET: key; cost, the decision's cost;
-- raw, the stored value (false: none); at, where the state's numbers start
-- in it; and sfl, the length of its fingerprint. at is nil when there is no
-- state or it is not this rule's (another fingerprint, or another length
-- than n limits of `words` doubles each): the subject then starts afresh.
-- With no fingerprint given (fl 0) any stored one is accepted.
--
-- A key that holds another type than a string (someone ran SET's cousins,
-- LPUSH, HSET, ... on it) is answered here, reply[j + 1] the error
-- type_error() gives, and cost is nil: the script skips that decision,
-- which writes nothing, and makes the call's others as usual. rpget
-- returns Redis's WRONGTYPE error as a table instead of raising it.
  local key = KEYS[j]
  local raw = rpget('GET', key)
  local cost, at, sfl = nil, nil, fl
  if type(raw) == 'table' then
    reply[j + 1] = type_error(key, 'string', 'the key')
  else
    cost = same_cost or tonumber(ARGV[cost_at + j])
    if raw then
      if fl == 0 then sfl = string.byte(raw, 1) or 0 end  -- '' skips the check
      if #raw == 1 + sfl + 8 * words * n and (fl == 0 or string.find(raw, head, 1, true) == 1) then
        at = 2 + sfl
      end
    end
  end
