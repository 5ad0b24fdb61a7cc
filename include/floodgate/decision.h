// Decision: the answer to "may this subject do this now?".
#pragma once

#include <array>
#include <cstdint>

#include "floodgate/rule.h"

namespace floodgate {

// The figures of one limit of a rule, as of the decision's instant.
// Trivially constructible on purpose (a Decision is filled on the hot path
// without zeroing unused slots): value-initialise (`LimitStatus s{};`).
struct LimitStatus {
  bool allowed;             // this limit alone had room for the cost
  int64_t limit;            // the limit's capacity (N, or the burst)
  int64_t remaining;        // units left after this decision
  int64_t retry_after_ms;   // 0 when allowed, -1 when the cost can never fit
  int64_t reset_after_ms;   // until this limit is fully reset
  int64_t window_start_ms;  // the current window (windowed algorithms), else 0
  int64_t window_end_ms;
  int64_t period_ms;  // the limit's period (a calendar window's actual length)
};

struct Decision {
  // True iff every limit had room and the cost was consumed (or the rule is
  // in shadow mode: then `allowed` is true and `shadow_denied` tells the truth).
  bool allowed = false;
  bool shadow_denied = false;
  // The store did not answer in time (or failed): `allowed` is the rule's
  // on_backend_error, and the figures are the limits', not usage.
  bool backend_error = false;
  // Figures of the binding limit: on a denial the denying limit with the
  // longest wait (-1, never, dominates); on an admission the limit with the
  // fewest units remaining (ties: the longest reset).
  int64_t limit = 0;
  int64_t remaining = 0;
  int64_t retry_after_ms = 0;
  int64_t reset_after_ms = 0;
  int binding = 0;  // index into limits

  // limits[0, num_limits) are set; the slots after them are unspecified.
  int num_limits = 0;
  std::array<LimitStatus, kMaxLimitsPerRule> limits;
};

}  // namespace floodgate
