// Decision: the answer to "may this subject do this now?".
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

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

// Why a decision was not made from the subject's state.
enum class Fallback : uint8_t {
  kNone,          // a real decision: the store counted
  kBackendError,  // the remote store failed or was late: the rule's on_backend_error
  kStoreFull,     // the embedded store had no room for a new subject: the rule's on_store_full
};

// "backend_error", "store_full"; "" for kNone. The words every front shows.
constexpr std::string_view FallbackName(Fallback fallback) {
  switch (fallback) {
    case Fallback::kBackendError:
      return "backend_error";
    case Fallback::kStoreFull:
      return "store_full";
    case Fallback::kNone:
      break;
  }
  return "";
}

struct Decision {
  // True iff every limit had room and the cost was consumed (or the rule is
  // in shadow mode: then `allowed` is true and `shadow_denied` tells the truth).
  bool allowed = false;
  bool shadow_denied = false;
  // Not kNone: the subject's usage is unknown and `allowed` is the rule's
  // policy for that case (on_backend_error, on_store_full). Then `limit` is
  // the configured capacity, `remaining` and `reset_after_ms` are -1
  // (unknown, never a claim of 0), and a denial asks to retry in a second
  // (the same in each limits[i]). A full store counted nothing; a Redis that
  // answered too late may have counted.
  Fallback fallback = Fallback::kNone;
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

  // Denied by a block (docs/control-plane.md), not by the subject's usage:
  // every limit shows remaining 0 and retry_after_ms = the block's time
  // left. So is the denial that starts a rule's block_for block (its usage
  // denied it; it answers as the block it starts). block_reason is the
  // block's reason; the text it views stays valid until this thread's next
  // decision (a block_for's: for the process's life). After `limits` on
  // purpose: fields before it would shift each LimitStatus across two
  // cache lines.
  bool blocked = false;
  std::string_view block_reason;
  // The binding limit as the rule writes it (its Limit::ToString(), e.g.
  // "3/hour"): what a denial names as having bound it (docs/visibility.md).
  // Set with every decision a store makes; a fallback's is its rule's
  // binding limit too, though no count bound it.
  Limit binding_limit;
};

// Whether a limit's count denied `d` (or would have, in shadow mode): not a
// block, not a fallback. Such a denial names its binding_limit.
inline bool DeniedByLimit(const Decision& d) {
  return (!d.allowed || d.shadow_denied) && d.fallback == Fallback::kNone && !d.blocked;
}

// redis-cell's CL.THROTTLE answer (Limiter::Throttle). Figures are
// redis-cell's: retry/reset in whole seconds, rounded up when at least a
// millisecond is cut off; retry -1 when not limited or when the quantity
// can never fit.
struct ThrottleResult {
  bool limited = false;
  int64_t limit = 0;
  int64_t remaining = 0;
  int64_t retry_after_s = -1;
  int64_t reset_after_s = 0;
  Fallback fallback = Fallback::kNone;
};

}  // namespace floodgate
