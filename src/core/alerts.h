// Quota alerts, decided with the count: which thresholds an admitted request
// takes a limit's usage to, once per window.
//
// A rule with alerts keeps, after its algorithm's state words, two words per
// limit: the start of the window its "already sent" bits belong to, and the
// bits (bit j: threshold j was reached in that window). The bits are read
// and written in the same step as the count, under the same lock (the
// embedded store) or in the same script call (Redis, whose scripts do the
// same thing), so exactly one admitted request observes each crossing
// however many threads or servers decide at once. A new window clears them.
//
// Usage is the limit's capacity minus what remains after the request (the
// decision's figures): units counted in the window for fixed_window,
// sliding_window (its weighted estimate) and sliding_log; the burst
// consumed for token_bucket and gcra. The window is the limit's own for
// fixed_window and sliding_window (its current bucket), and the
// epoch-aligned period holding the decision's instant for the others.
//
// Pure functions: no clock, no I/O. Not thread-safe for one state.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/calendar.h"
#include "core/limit_params.h"
#include "core/memory_room.h"
#include "floodgate/decision.h"
#include "floodgate/rule.h"

namespace floodgate::core {

struct CompiledRule;

// A rule's alert thresholds, compiled per limit. Part of CompiledRule.
struct AlertPolicy {
  int num_thresholds = 0;  // 0: the rule has no alerts (and no alert words)
  std::array<int, kMaxAlertThresholds> percents{};
  // units[i * num_thresholds + j]: the usage of limit i that reaches
  // threshold j, ceil(capacity * percent / 100) (at least 1).
  std::vector<int64_t> units;
  // Index of the first alert word in the state: the algorithm's words come
  // first, unchanged, so a rule's layout only grows at the end.
  int offset = 0;

  bool enabled() const { return num_thresholds > 0; }
};

// Alert words per limit.
inline constexpr int kAlertWordsPerLimit = 2;

// What one decision fired, per limit.
// Filled on the hot path of alerting rules, so not zeroed: fired[0,
// num_limits) is always set; used and window only where fired is not 0.
struct AlertOutcome {
  int num_limits = 0;
  int64_t at_ms = 0;  // the decision's instant (Redis: the script's clock)
  // Bit j: this decision took limit i to threshold j (first time in its window).
  std::array<uint32_t, kMaxLimitsPerRule> fired;
  std::array<int64_t, kMaxLimitsPerRule> used;  // the limit's usage after the decision
  std::array<Window, kMaxLimitsPerRule> window;

  bool any() const {
    for (int i = 0; i < num_limits; ++i) {
      if (fired[i] != 0) return true;
    }
    return false;
  }
};

// Compiles `thresholds` (percentages, increasing, at most
// kMaxAlertThresholds) for the limits of `rule`, whose algorithm words end
// at `offset`.
AlertPolicy CompileAlertPolicy(const std::vector<int>& thresholds,
                               const std::vector<LimitParams>& limits, int offset);

// The window limit i's alert bits belong to for a decision at now_ms whose
// figures for that limit are `status` (see the file comment).
Window AlertWindow(const CompiledRule& rule, int limit, const LimitStatus& status, int64_t now_ms);

// Runs after EvaluateRule on the same state, at the same instant, for the
// same cost, with its decision: sets the bits of the thresholds an admitted
// request (cost > 0, not a shadow denial) reached for the first time in the
// limit's current window, and reports them in *out. A decision at an
// instant before the window a limit's bits belong to (the clock stepped
// back) fires nothing for that limit and keeps its bits. Returns until when
// the state must be kept for its bits (the end of a window that has bits
// set; 0 when none): a state freed earlier would fire again.
int64_t ApplyAlerts(const CompiledRule& rule, const Decision& decision, int64_t now_ms,
                    int64_t cost, int64_t* state, AlertOutcome* out);

// EvaluateRule (with `room`), then ApplyAlerts when the rule has alerts and
// the room refused nothing; returns when the state holds nothing any more,
// alert bits included.
int64_t EvaluateRuleWithAlerts(const CompiledRule& rule, int64_t* state, int64_t now_ms,
                               int64_t cost, Decision* decision, AlertOutcome* out,
                               MemoryRoom* room = nullptr);

}  // namespace floodgate::core
