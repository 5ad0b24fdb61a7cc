// gcra: the generic cell rate algorithm with redis-cell's semantics and
// figures (CL.THROTTLE), computed in microseconds.
//
// emission interval T = period / count; limit = max_burst + 1 (`capacity`);
// delay variation tolerance = T * limit. A request of `cost` moves the
// theoretical arrival time (TAT) by T * cost and is allowed iff the new TAT
// is no further than the tolerance ahead of now. As in redis-cell:
// remaining = floor((tolerance - ttl) / T), reset_after = ttl (TAT - now),
// and a cost above the limit is never allowed (retry_after -1).
// Config guarantees T >= 1 us and T * limit <= 2^52.
#include "core/gcra.h"

#include <algorithm>
#include <string>

#include "core/int_math.h"
#include "core/refund.h"

namespace floodgate::core {

GcraFigures GcraStep(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost) {
  const int64_t emission_us = p.emission_us;
  const int64_t limit = p.capacity;
  const int64_t tolerance_us = emission_us * limit;
  const int64_t now_us = now_ms * 1000;
  // An expired TAT (in the past) is a fresh subject; a TAT ahead of an
  // earlier `now` (clock stepped back) only makes the answer stricter.
  const int64_t tat = s.tat_us > now_us ? s.tat_us : now_us;

  GcraFigures f;
  f.limit = limit;
  f.ttl_us = tat - now_us;
  if (cost > limit) {
    f.retry_after_us = -1;
  } else {
    const int64_t new_tat = tat + emission_us * cost;  // <= tat + tolerance: no overflow
    const int64_t diff = now_us - (new_tat - tolerance_us);
    if (diff < 0) {
      f.retry_after_us = -diff;
    } else {
      f.allowed = true;
      f.ttl_us = new_tat - now_us;
      if (cost > 0) s.tat_us = new_tat;
    }
  }
  if (tat == now_us) {
    // No TAT ahead of now (a new or long idle subject, the usual case over
    // many subjects): ttl is emission * cost if allowed, else 0, so the
    // division below comes out as limit - cost, or limit. It is the one
    // division by a variable on the decision's path.
    f.remaining = f.allowed ? limit - cost : limit;
  } else {
    const int64_t next = tolerance_us - f.ttl_us;
    f.remaining = next > 0 ? next / emission_us : 0;
  }
  return f;
}

Result<LimitParams> ThrottleParams(int64_t max_burst, int64_t count, int64_t period_s,
                                   int64_t quantity) {
  if (max_burst < 0 || max_burst >= kMaxLimitCount) {
    return InvalidArgumentError("max_burst must be between 0 and " +
                                std::to_string(kMaxLimitCount - 1));
  }
  if (count < 1 || count > kMaxLimitCount) {
    return InvalidArgumentError("count must be between 1 and " + std::to_string(kMaxLimitCount));
  }
  if (period_s < 1 || period_s > kMaxPeriodMs / 1000) {
    return InvalidArgumentError("period must be between 1 and " +
                                std::to_string(kMaxPeriodMs / 1000) + " seconds");
  }
  if (quantity < 0 || quantity > kMaxLimitCount) {
    return InvalidArgumentError("quantity must be between 0 and " + std::to_string(kMaxLimitCount));
  }
  LimitParams p;
  p.count = count;
  p.period_ms = period_s * 1000;
  p.capacity = max_burst + 1;
  p.emission_us = period_s * 1'000'000 / count;
  if (p.emission_us < 1) {
    return InvalidArgumentError("rate too high: " + std::to_string(count) + " per " +
                                std::to_string(period_s) + " s is under 1 microsecond per unit");
  }
  if (p.capacity > (int64_t{1} << 52) / p.emission_us) {
    return InvalidArgumentError(
        "max_burst too large for this rate (burst x period / count must "
        "stay under 2^52 microseconds)");
  }
  return p;
}

Outcome ApplyGcra(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost) {
  const GcraFigures f = GcraStep(p, s, now_ms, cost);
  Outcome out;
  LimitStatus& st = out.status;
  st.allowed = f.allowed;
  st.limit = f.limit;
  st.remaining = f.remaining;
  // retry_after_us (when not -1) and ttl_us are >= 0, so rounding up is
  // (n + 999) / 1000, without CeilDiv's sign handling.
  st.retry_after_ms = f.retry_after_us < 0 ? -1 : (f.retry_after_us + 999) / 1000;
  st.reset_after_ms = (f.ttl_us + 999) / 1000;
  // ceil((now_ms * 1000 + ttl_us) / 1000), now_ms * 1000 being a multiple.
  out.expires_at_ms = f.ttl_us > 0 ? now_ms + st.reset_after_ms : 0;
  return out;
}

int64_t RefundGcra(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost) {
  const int64_t now_us = now_ms * 1000;
  // A TAT not ahead of now is a full burst already: nothing to give back.
  if (s.tat_us <= now_us) return 0;
  // Emission intervals ahead, a part one counted: what the remaining grows
  // by when the TAT comes back to now.
  const int64_t intervals = CeilDiv(s.tat_us - now_us, p.emission_us);
  // Not below now: a TAT in the past would make more than the burst
  // available. Compared before multiplying, as cost * emission may overflow.
  s.tat_us = cost >= intervals ? now_us : s.tat_us - cost * p.emission_us;
  return std::min(cost, intervals);
}

}  // namespace floodgate::core
