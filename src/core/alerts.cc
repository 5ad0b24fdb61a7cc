// Quota alert bits: see alerts.h. src/redis/scripts/*.lua do the same
// thing, field for field (the differential tests compare them).
#include "core/alerts.h"

#include <algorithm>

#include "core/int_math.h"
#include "core/rule_eval.h"

namespace floodgate::core {

AlertPolicy CompileAlertPolicy(const std::vector<int>& thresholds,
                               const std::vector<LimitParams>& limits, int offset) {
  AlertPolicy p;
  p.num_thresholds = static_cast<int>(std::min<size_t>(thresholds.size(), kMaxAlertThresholds));
  p.offset = offset;
  for (int j = 0; j < p.num_thresholds; ++j) p.percents[j] = thresholds[j];
  p.units.reserve(limits.size() * static_cast<size_t>(p.num_thresholds));
  for (const LimitParams& l : limits) {
    for (int j = 0; j < p.num_thresholds; ++j) {
      // capacity <= 10^15 and percent <= 100: the product fits easily.
      p.units.push_back(std::max<int64_t>(1, CeilDiv(l.capacity * p.percents[j], 100)));
    }
  }
  return p;
}

Window AlertWindow(const CompiledRule& rule, int limit, const LimitStatus& status, int64_t now_ms) {
  if (rule.algorithm == Algorithm::kFixedWindow || rule.algorithm == Algorithm::kSlidingWindow) {
    // Their own windows, as the algorithm placed them (a clock step back
    // stays in the window already counted).
    return Window{status.window_start_ms, status.window_end_ms};
  }
  const int64_t period = rule.limits[limit].period_ms;
  const int64_t start = AlignDown(now_ms, period);
  return Window{start, start + period};
}

int64_t ApplyAlerts(const CompiledRule& rule, const Decision& d, int64_t now_ms, int64_t cost,
                    int64_t* state, AlertOutcome* out) {
  const AlertPolicy& policy = rule.alerts;
  const int n = d.num_limits;
  const int m = policy.num_thresholds;
  out->num_limits = n;
  out->at_ms = now_ms;
  // A shadow rule's denial consumed nothing: only real admissions count.
  const bool admitted = d.allowed && !d.shadow_denied && cost > 0;
  int64_t keep_until = 0;
  for (int i = 0; i < n; ++i) {
    out->fired[i] = 0;
    const LimitStatus& st = d.limits[i];
    int64_t* words = state + policy.offset + kAlertWordsPerLimit * i;
    const int64_t* units = policy.units.data() + static_cast<size_t>(i) * m;
    const int64_t used = st.limit - st.remaining;
    uint32_t bits = static_cast<uint32_t>(words[1]);
    // The usual case: nothing sent in any window yet and the lowest
    // threshold (units are increasing) not reached: nothing to decide, no
    // window to compute.
    if (bits == 0 && (!admitted || used < units[0])) continue;
    const Window w = AlertWindow(rule, i, st, now_ms);
    if (bits != 0 && w.start_ms < words[0]) {
      // The clock stepped back behind the window these bits belong to:
      // nothing fires (it would fire again later), and the bits stay, as
      // does the state, to the end of their window.
      keep_until = std::max(keep_until, words[0] + rule.limits[i].period_ms);
      continue;
    }
    if (w.start_ms != words[0]) bits = 0;  // a new window: nothing sent in it yet
    if (admitted) {
      uint32_t fired = 0;
      for (int j = 0; j < m; ++j) {
        if ((bits & (1u << j)) == 0 && used >= units[j]) fired |= 1u << j;
      }
      if (fired != 0) {
        bits |= fired;
        words[0] = w.start_ms;
        words[1] = bits;
        out->fired[i] = fired;
        out->used[i] = used;
        out->window[i] = w;
      }
    }
    if (bits != 0) keep_until = std::max(keep_until, w.end_ms);
  }
  return keep_until;
}

int64_t EvaluateRuleWithAlerts(const CompiledRule& rule, int64_t* state, int64_t now_ms,
                               int64_t cost, Decision* decision, AlertOutcome* out,
                               MemoryRoom* room) {
  const int64_t expires = EvaluateRule(rule, state, now_ms, cost, decision, room);
  // A step the room refused did not happen: it reaches no threshold.
  if (!rule.alerts.enabled() || (room != nullptr && room->refused())) {
    out->num_limits = 0;
    return expires;
  }
  return std::max(expires, ApplyAlerts(rule, *decision, now_ms, cost, state, out));
}

}  // namespace floodgate::core
