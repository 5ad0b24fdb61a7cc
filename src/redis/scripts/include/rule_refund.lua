-- rule_refund: how the algorithm scripts that keep a subject's state in one
-- string (fixed_window, sliding_window, token_bucket, gcra) finish giving
-- units back, kept once so they cannot drift apart. cmake/embed_lua.cmake
-- pastes it in place of the `--! include rule_refund.lua` line, at the end
-- of each script's `if cost and cost < 0 then` block (a refund of -cost
-- units: see the scripts' headers), once the script has put every limit's
-- words in out (WORDS each: refunded, or as stored for a limit with nothing
-- to give back) and the units limit i gave back in vals[rlen + i], and set
-- refunded (true: there is a state of this rule, and the refund writes it
-- back; false when there is none, or one of another fingerprint, or
-- fixed_window's clock skew stopped it); this file is never loaded alone.
-- Statements, not a function, for rule_key.lua's reason.
--
-- The state as refunded (the stored header and alert pairs, which a refund
-- does not touch: bits already fired stay fired) replaces raw, and cost
-- becomes 0: the decision that follows is a peek at it, whose element is
-- the refund's reply, and which writes it with the peek's expiry, or
-- deletes it when it holds nothing any more (rule_decided.lua,
-- fixed_window's decide), as the embedded store frees such an entry. The
-- units given back follow the peek's fields in that element: rlen and rfmt
-- grow by n, for the rest of the call (a refund is a call of one key).
    if refunded then
      for q = WORDS * n + 1, words * n do
        out[q] = unpack_state('<d', raw, at + 8 * (q - 1))
      end
      raw = string.sub(raw, 1, at - 1) .. pack_state(fmt, unpack(out, 1, words * n))
    else
      for i = 1, n do vals[rlen + i] = 0 end
    end
    rlen = rlen + n
    rfmt = '<' .. string.rep('d', rlen)
    cost = 0
