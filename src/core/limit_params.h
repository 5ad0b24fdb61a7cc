// LimitParams: one limit of a rule, compiled for the algorithms.
#pragma once

#include <cstdint>

#include "core/calendar.h"
#include "floodgate/decision.h"
#include "floodgate/rule.h"

namespace floodgate::core {

struct LimitParams {
  int64_t count = 0;      // N of "N/period"
  int64_t period_ms = 0;  // nominal period (Limit::PeriodMs)
  // token_bucket: capacity. gcra: redis-cell's max_burst + 1 (its "limit").
  // Other algorithms: count.
  int64_t capacity = 0;
  TimeUnit unit = TimeUnit::kSecond;
  int64_t multiplier = 1;
  // gcra only: period_ms * 1000 / count, precomputed (>= 1).
  int64_t emission_us = 0;
  // fixed_window only: where windows fall. Never null for fixed_window.
  const Zone* zone = nullptr;
  // fixed_window with a unit below a day: the window length. Such windows
  // are epoch-aligned whatever the zone, so a time within this long of the
  // window start a state recorded is in that same window, found without
  // Zone::WindowAt's division. 0 for calendar windows.
  int64_t epoch_window_ms = 0;
};

// What one algorithm step says about one limit.
struct Outcome {
  LimitStatus status{};  // value-initialised: algorithms set only what differs from 0
  // When the state written by this step holds nothing any more (all
  // consumption has aged out); 0 when there is nothing to keep.
  int64_t expires_at_ms = 0;
};

}  // namespace floodgate::core
