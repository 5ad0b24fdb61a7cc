// What a Limiter gives besides its decisions, as values: its counters
// (LimiterStats, Limiter::Stats) and the callback of an asynchronous check
// (CheckCallback, Limiter::CheckCallback). Apart from limiter.h because the
// decision layer under the Limiter (src/service/) answers in these too, and
// must not include the Limiter it is built under.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "floodgate/decision.h"
#include "floodgate/status.h"

namespace floodgate {

struct LimiterStats {
  int64_t entries = 0;        // live entries in the store: rule states, sets, OTP subjects
  int64_t rejected_full = 0;  // new entries (or a state's growth) the full store refused
  int64_t expired_freed = 0;  // entries freed after expiring
  int64_t store_bytes = 0;    // bytes engine.max_memory bounds: entries, what their
                              // states own (logs, members, codes), tables
  // Decisions made by a fallback policy (Decision::fallback), by reason:
  // on_store_full (and CL.THROTTLE's denial at a full store), and
  // on_backend_error.
  int64_t fallback_store_full = 0;
  int64_t fallback_backend_error = 0;
  // A remote store's (zero on the embedded store):
  int64_t backend_errors = 0;       // decisions answered by on_backend_error
  int64_t local_cache_denials = 0;  // denials answered by the local over-limit cache
  int64_t local_cache_entries = 0;  // subjects in that cache now
  int64_t open_circuits = 0;        // Redis nodes given up on for now (circuit open)
  int64_t backend_timeouts = 0;     // requests Redis did not answer in time
  // Decisions and operations that failed on a Redis key of the wrong type
  // under floodgate's names (someone's SET or LPUSH on it): each follows
  // on_backend_error (or fails) and is logged once per key per minute.
  int64_t wrong_type = 0;
  // Which store decides: "memory" (the embedded store) or "redis", as the
  // store says. A static string.
  std::string_view store_kind;
};

// Runs exactly once with a check's outcome (see Limiter::CheckAsync). On an
// error status the decision is empty.
using CheckCallback = std::function<void(const Status& status, const Decision& decision)>;

}  // namespace floodgate
