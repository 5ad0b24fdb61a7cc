// sliding_window: the two-bucket estimate used by Cloudflare and nginx-style
// limiters, computed exactly in integers.
//
// With P the period, `elapsed` the time into the current bucket and
// weight = P - elapsed, the estimate is previous * weight / P + current.
// Comparing scaled by P (previous * weight + current * P <= count * P) needs
// no division, so there is no rounding; config guarantees count * P <= 2^53,
// which bounds every product below.
#include <algorithm>

#include "core/algorithms.h"
#include "core/int_math.h"
#include "core/refund.h"

namespace floodgate::core {

Outcome ApplySlidingWindow(const LimitParams& p, SlidingWindowState& s, int64_t now_ms,
                           int64_t cost) {
  const int64_t period = p.period_ms;
  const int64_t n = p.count;
  const bool empty = s.current == 0 && s.previous == 0;
  if (!empty && now_ms < s.window_start_ms) now_ms = s.window_start_ms;  // no refund

  const int64_t start = AlignDown(now_ms, period);
  int64_t current = 0;
  int64_t previous = 0;
  if (!empty && start == s.window_start_ms) {
    current = s.current;
    previous = s.previous;
  } else if (!empty && start == s.window_start_ms + period) {
    previous = s.current;
  }
  const int64_t weight = period - (now_ms - start);  // 1..period

  Outcome out;
  LimitStatus& st = out.status;
  st.limit = n;
  st.window_start_ms = start;
  st.window_end_ms = start + period;

  if (cost > n) {
    st.allowed = false;
    st.retry_after_ms = -1;
  } else if (previous * weight + (current + cost) * period <= n * period) {
    st.allowed = true;
    current += cost;
  } else if (current + cost <= n) {
    // Room comes back within this bucket as the previous one slides out:
    // wait until previous * weight' <= (n - current - cost) * period.
    st.allowed = false;
    const int64_t max_weight = (n - current - cost) * period / previous;
    st.retry_after_ms = (start + period - max_weight) - now_ms;
  } else {
    // This bucket alone is too full: wait until, in the next bucket, the
    // current one (then previous) has slid out far enough.
    st.allowed = false;
    const int64_t max_weight = (n - cost) * period / current;
    st.retry_after_ms = (start + 2 * period - max_weight) - now_ms;
  }
  if (st.allowed && cost > 0) s = {start, current, previous};

  // remaining = floor(n - current - previous * weight / period)
  const int64_t room = n * period - previous * weight - current * period;
  st.remaining = room > 0 ? room / period : 0;
  if (current > 0) {
    out.expires_at_ms = start + 2 * period;
  } else if (previous > 0) {
    out.expires_at_ms = start + period;
  }
  st.reset_after_ms = out.expires_at_ms > 0 ? out.expires_at_ms - now_ms : 0;
  return out;
}

int64_t RefundSlidingWindow(const LimitParams& p, SlidingWindowState& s, int64_t now_ms,
                            int64_t cost) {
  if (s.current == 0 && s.previous == 0) return 0;
  if (now_ms < s.window_start_ms) now_ms = s.window_start_ms;  // as Apply
  const int64_t period = p.period_ms;
  const int64_t start = AlignDown(now_ms, period);
  // The two buckets as Apply sees them at now_ms.
  int64_t current;
  int64_t previous;
  if (start == s.window_start_ms) {
    current = s.current;
    previous = s.previous;
  } else if (start == s.window_start_ms + period) {
    current = 0;
    previous = s.current;
  } else {
    return 0;  // both buckets have slid out: nothing counts any more
  }
  // The current bucket first: its units weigh fully, so each one given back
  // is one request admitted again; the previous bucket's weigh less.
  const int64_t from_current = std::min(cost, current);
  const int64_t from_previous = std::min(cost - from_current, previous);
  if (from_current == 0 && from_previous == 0) return 0;
  s = {start, current - from_current, previous - from_previous};
  return from_current + from_previous;
}

}  // namespace floodgate::core
