// GCRA at full (microsecond) precision, for callers that must round exactly
// as redis-cell does (CL.THROTTLE). ApplyGcra (algorithms.h) is this step
// with the figures rounded up to milliseconds.
#pragma once

#include <cstdint>

#include "core/algorithms.h"
#include "floodgate/status.h"

namespace floodgate::core {

struct GcraFigures {
  bool allowed = false;
  int64_t limit = 0;  // max_burst + 1
  int64_t remaining = 0;
  int64_t retry_after_us = 0;  // 0 when allowed, -1 when the cost exceeds the limit
  int64_t ttl_us = 0;          // TAT - now after the step: redis-cell's reset_after
};

// Same contract as ApplyGcra. p.emission_us and p.capacity must be set.
GcraFigures GcraStep(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost);

// CL.THROTTLE's parameters (redis-cell: `count` per `period_s` seconds with
// `max_burst`, spending `quantity`) as one gcra limit, checked before any
// arithmetic. INVALID_ARGUMENT naming the parameter; both stores use it, so
// both refuse alike.
Result<LimitParams> ThrottleParams(int64_t max_burst, int64_t count, int64_t period_s,
                                   int64_t quantity);

// redis-cell's rounding of a duration to whole seconds for CL.THROTTLE:
// truncate, then add one if at least a millisecond was cut off.
// -1 (never) stays -1.
constexpr int64_t CellSeconds(int64_t us) {
  if (us < 0) return -1;
  return us / 1'000'000 + ((us % 1'000'000) / 1000 > 0 ? 1 : 0);
}

}  // namespace floodgate::core
