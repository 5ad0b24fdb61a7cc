-- rule_decided: how the algorithm scripts that keep a subject's state in one
-- string and decide every key in their per-key loop (sliding_window,
-- token_bucket, gcra) end each decision, kept once so they cannot drift
-- apart. cmake/embed_lua.cmake pastes it in place of the
-- `--! include rule_decided.lua` line, inside the loop's `if cost then`,
-- once every limit of the decision has filled its reply fields in vals
-- (from vals[2]) and its state words in out (WORDS each); this file is
-- never loaded alone. Statements, not a function, for rule_key.lua's
-- reason.
--
-- Uses, besides rule_prelude.lua's: admitted (0/1, every limit allowed),
-- expires (the state's expiry so far, 0: none), the script's step (for
-- as_peek), key, cost, raw, at (rule_key.lua), and refunded (rule_refund.lua;
-- false for a decision). A decision that consumed (cost > 0, admitted)
-- writes the state; one that was denied consumes nothing and reports its
-- figures as of a peek; a refund's peek writes the refunded state (raw),
-- or deletes it. Sets reply[j + 1], the decision's reply element.
    vals[1] = admitted
    if m > 0 then expires = alerts(cost > 0 and admitted == 1, raw, at, WORDS * n, expires) end
    if cost > 0 and admitted == 1 then
      write_state(key, fmt, out, words, expires)
    elseif cost > 0 then
      as_peek(step, raw, at)  -- nothing is consumed
    elseif refunded then
      write_refunded(key, raw, expires)
    end
    reply[j + 1] = pack_state(rfmt, unpack(vals, 1, rlen))
