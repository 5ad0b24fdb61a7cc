// token_bucket: capacity `capacity`, refilled continuously at `count` per
// `period_ms`. Tokens are scaled by period_ms (one token = period_ms units and
// one ms refills `count` units), so refill is exact integer arithmetic.
// Config guarantees max(count, capacity) * period_ms <= 2^53.
#include <algorithm>

#include "core/algorithms.h"
#include "core/int_math.h"
#include "core/refund.h"

namespace floodgate::core {

Outcome ApplyTokenBucket(const LimitParams& p, TokenBucketState& s, int64_t now_ms, int64_t cost) {
  const int64_t period = p.period_ms;
  const int64_t rate = p.count;  // scaled units refilled per ms
  const int64_t full = p.capacity * period;

  int64_t missing = s.scaled_tokens_missing;
  if (missing > 0) {
    if (now_ms < s.updated_ms) now_ms = s.updated_ms;  // a step back refills nothing
    const int64_t elapsed = now_ms - s.updated_ms;
    // Compare before multiplying: elapsed * rate may overflow for old states.
    missing = elapsed >= CeilDiv(missing, rate) ? 0 : missing - elapsed * rate;
  }

  Outcome out;
  LimitStatus& st = out.status;
  st.limit = p.capacity;
  if (cost > p.capacity) {
    st.allowed = false;
    st.retry_after_ms = -1;
  } else if (missing + cost * period <= full) {
    st.allowed = true;
    missing += cost * period;
    if (cost > 0) s = {missing, now_ms};
  } else {
    st.allowed = false;
    const int64_t deficit = missing + cost * period - full;
    st.retry_after_ms = CeilDiv(deficit, rate);
  }
  st.remaining = (full - missing) / period;
  st.reset_after_ms = CeilDiv(missing, rate);
  out.expires_at_ms = missing > 0 ? now_ms + st.reset_after_ms : 0;
  return out;
}

int64_t RefundTokenBucket(const LimitParams& p, TokenBucketState& s, int64_t now_ms, int64_t cost) {
  if (s.scaled_tokens_missing <= 0) return 0;        // full: the capacity caps what comes back
  if (now_ms < s.updated_ms) now_ms = s.updated_ms;  // as Apply: a step back refills nothing
  const int64_t period = p.period_ms;
  const int64_t elapsed = now_ms - s.updated_ms;
  int64_t missing = s.scaled_tokens_missing;
  // As Apply, compare before multiplying: elapsed * rate and cost * period
  // may overflow where the result is simply a full bucket.
  if (elapsed >= CeilDiv(missing, p.count)) return 0;  // refilled by now: nothing to give back
  missing -= elapsed * p.count;
  // Whole tokens missing, a part-refilled one counted: what the bucket's
  // remaining (floor of the tokens held) grows by when they all come back.
  const int64_t tokens = CeilDiv(missing, period);
  const int64_t given = std::min(cost, tokens);
  missing = cost >= tokens ? 0 : missing - cost * period;
  s = {missing, now_ms};
  return given;
}

}  // namespace floodgate::core
