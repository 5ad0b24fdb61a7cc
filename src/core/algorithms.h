// The five limiting algorithms as pure functions of (params, state, now, cost).
//
// Contract shared by every Apply():
//  - It never reads a clock; `now_ms` is the decision's instant.
//  - It admits iff the limit has room for `cost`. Admitted with cost > 0: the
//    state is updated to consume it. Denied, or cost == 0 (a peek): the state
//    is left as it was in meaning (it may be normalised, e.g. an old window
//    rolled over, which changes no future decision).
//  - A cost larger than the limit's capacity is denied with retry_after_ms -1.
//  - A zero state is a subject never seen (or fully expired).
//  - A `now_ms` earlier than the state's own time is treated as that time:
//    a clock step back never refunds.
//  - cost is in [0, kMaxLimitCount]; callers check.
// Not thread-safe: callers serialise access to a state.
#pragma once

#include <cstdint>

#include "core/limit_params.h"

namespace floodgate::core {

// Epoch/calendar-aligned windows; a counter per window.
struct FixedWindowState {
  int64_t window_start_ms;
  int64_t used;
};
Outcome ApplyFixedWindow(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost);

// Two epoch-aligned buckets; the previous bucket weighs by how much of it the
// sliding window still covers. Exact integer arithmetic (no rounding).
struct SlidingWindowState {
  int64_t window_start_ms;  // start of the current bucket
  int64_t current;
  int64_t previous;
};
Outcome ApplySlidingWindow(const LimitParams& p, SlidingWindowState& s, int64_t now_ms,
                           int64_t cost);

// Tokens refill continuously at count per period up to capacity. Tokens are
// kept scaled by period_ms so refill is exact integer arithmetic.
struct TokenBucketState {
  int64_t scaled_tokens_missing;  // (capacity - tokens) * period_ms; 0 = full
  int64_t updated_ms;
};
Outcome ApplyTokenBucket(const LimitParams& p, TokenBucketState& s, int64_t now_ms, int64_t cost);

// GCRA with redis-cell's semantics and figures, in microseconds.
struct GcraState {
  int64_t tat_us;  // theoretical arrival time; 0 = none
};
Outcome ApplyGcra(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost);

}  // namespace floodgate::core
