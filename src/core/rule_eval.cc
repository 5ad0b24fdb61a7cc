// Rule evaluation and compilation: see rule_eval.h.
#include "core/rule_eval.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/algorithms.h"
#include "core/refund.h"
#include "core/sliding_log.h"

namespace floodgate::core {
namespace {

Status LimitError(const Rule& rule, const std::string& tier, const Limit& limit,
                  const std::string& why) {
  std::string where = "rule '" + rule.name + "'";
  if (!tier.empty()) where += " tier '" + tier + "'";
  return InvalidArgumentError(where + ": limit '" + limit.ToString() + "' " + why);
}

// The burst configured for limit i, or -1 when none is.
int64_t BurstFor(const Rule& rule, size_t i) {
  if (rule.burst.empty()) return -1;
  if (rule.burst.size() == 1) return rule.burst[0];
  return i < rule.burst.size() ? rule.burst[i] : -1;
}

// Picks the limit whose figures the decision reports (see Decision::binding).
int BindingLimit(const Decision& d) {
  int best = 0;
  for (int i = 1; i < d.num_limits; ++i) {
    const LimitStatus& a = d.limits[i];
    const LimitStatus& b = d.limits[best];
    bool better;
    if (!d.allowed) {
      if (a.allowed != b.allowed) {
        better = !a.allowed;
      } else if ((a.retry_after_ms < 0) != (b.retry_after_ms < 0)) {
        better = a.retry_after_ms < 0;
      } else {
        better = a.retry_after_ms > b.retry_after_ms;
      }
    } else {
      better = a.remaining < b.remaining ||
               (a.remaining == b.remaining && a.reset_after_ms > b.reset_after_ms);
    }
    if (better) best = i;
  }
  return best;
}

template <typename State, Outcome (*Apply)(const LimitParams&, State&, int64_t, int64_t)>
int64_t EvaluateFixedSize(const CompiledRule& rule, int64_t* words, int64_t now_ms, int64_t cost,
                          Decision* d) {
  static_assert(sizeof(State) % sizeof(int64_t) == 0);
  constexpr size_t kWords = sizeof(State) / sizeof(int64_t);
  const int n = static_cast<int>(rule.limits.size());
  if (n == 1) {
    // Most rules have one limit: all-or-nothing is then that limit's own
    // answer, and the general path's arrays and loops are a third of a
    // decision's instructions.
    State next;
    std::memcpy(&next, words, sizeof(State));
    const Outcome o = Apply(rule.limits[0], next, now_ms, cost);
    if (o.status.allowed) std::memcpy(words, &next, sizeof(State));
    d->limits[0] = o.status;
    d->num_limits = 1;
    FinishDecision(rule, o.status.allowed, d);
    return o.expires_at_ms;
  }
  State next[kMaxLimitsPerRule];
  int64_t expires[kMaxLimitsPerRule];
  bool admitted = true;
  for (int i = 0; i < n; ++i) {
    std::memcpy(&next[i], words + i * kWords, sizeof(State));
    const Outcome o = Apply(rule.limits[i], next[i], now_ms, cost);
    d->limits[i] = o.status;
    expires[i] = o.expires_at_ms;
    admitted = admitted && o.status.allowed;
  }
  if (admitted) {
    std::memcpy(words, next, n * sizeof(State));
  } else if (cost > 0) {
    // All-or-nothing: nothing was consumed, so limits that had room report
    // their figures as of a peek at the unchanged state.
    for (int i = 0; i < n; ++i) {
      if (!d->limits[i].allowed) continue;
      State unchanged;
      std::memcpy(&unchanged, words + i * kWords, sizeof(State));
      const Outcome o = Apply(rule.limits[i], unchanged, now_ms, 0);
      d->limits[i] = o.status;
      expires[i] = o.expires_at_ms;
    }
  }
  d->num_limits = n;
  int64_t expires_at_ms = 0;
  for (int i = 0; i < n; ++i) expires_at_ms = std::max(expires_at_ms, expires[i]);
  FinishDecision(rule, admitted, d);
  return expires_at_ms;
}

int64_t EvaluateSlidingLog(const CompiledRule& rule, int64_t* words, int64_t now_ms, int64_t cost,
                           Decision* d, MemoryRoom* room) {
  const int n = static_cast<int>(rule.limits.size());
  Outcome outcomes[kMaxLimitsPerRule];
  auto* log = reinterpret_cast<SlidingLog*>(words[0]);
  bool admitted;
  if (log != nullptr) {
    admitted = log->Apply(rule.limits, now_ms, cost, outcomes, room);
  } else {
    // Decide on an empty log first, so that a peek or a denial on a new
    // subject allocates nothing to keep.
    SlidingLog empty(n);
    admitted = empty.Apply(rule.limits, now_ms, cost, outcomes);
    if (admitted && cost > 0) {
      if (Claim(room, empty.HeapBytes())) {
        log = new SlidingLog(std::move(empty));
        words[0] = reinterpret_cast<int64_t>(log);
      } else {
        admitted = false;  // no room for the log: nothing recorded, nothing kept
      }
    }
  }
  d->num_limits = n;
  for (int i = 0; i < n; ++i) d->limits[i] = outcomes[i].status;
  FinishDecision(rule, admitted, d);
  return log != nullptr && n > 0 ? outcomes[0].expires_at_ms : 0;
}

}  // namespace

int StateWords(Algorithm algorithm, int num_limits) {
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return 2 * num_limits;
    case Algorithm::kSlidingWindow:
      return 3 * num_limits;
    case Algorithm::kTokenBucket:
      return 2 * num_limits;
    case Algorithm::kGcra:
      return num_limits;
    case Algorithm::kSlidingLog:
      return 1;
    case Algorithm::kConcurrency:
      return 0;  // leases live in a table of their own (core/concurrency.h)
  }
  return 0;
}

void FinishDecision(const CompiledRule& rule, bool admitted, Decision* decision) {
  Decision& d = *decision;
  for (int i = 0; i < d.num_limits; ++i) {
    LimitStatus& st = d.limits[i];
    st.period_ms = st.window_end_ms > st.window_start_ms ? st.window_end_ms - st.window_start_ms
                                                         : rule.limits[i].period_ms;
  }
  d.allowed = admitted;
  d.shadow_denied = false;
  d.fallback = Fallback::kNone;  // a store answered (a caller may reuse a Decision)
  d.binding = BindingLimit(d);
  if (static_cast<size_t>(d.binding) < rule.limits.size()) {
    const LimitParams& bound = rule.limits[d.binding];
    d.binding_limit = Limit{bound.count, bound.multiplier, bound.unit};
  }
  const LimitStatus& b = d.limits[d.binding];
  d.limit = b.limit;
  d.remaining = b.remaining;
  d.retry_after_ms = admitted ? 0 : b.retry_after_ms;
  d.reset_after_ms = b.reset_after_ms;
  if (rule.shadow && !admitted) {
    d.shadow_denied = true;
    d.allowed = true;
    d.retry_after_ms = 0;
  }
}

void FallbackDecision(const CompiledRule& rule, bool allow, Fallback reason, Decision* decision) {
  Decision& d = *decision;
  d.num_limits = static_cast<int>(rule.limits.size());
  for (int i = 0; i < d.num_limits; ++i) {
    LimitStatus& st = d.limits[i];
    st = LimitStatus{};
    st.allowed = allow;
    st.limit = rule.limits[i].capacity;
    st.remaining = -1;
    st.retry_after_ms = allow ? 0 : kFallbackRetryAfterMs;
    st.reset_after_ms = -1;
  }
  FinishDecision(rule, allow, &d);
  d.fallback = reason;
}

Result<CompiledRule> CompileRule(const Rule& rule, const std::string& tier,
                                 const std::vector<Limit>& limits) {
  if (limits.empty() || limits.size() > static_cast<size_t>(kMaxLimitsPerRule)) {
    return InvalidArgumentError("rule '" + rule.name + "' needs 1 to " +
                                std::to_string(kMaxLimitsPerRule) + " limits");
  }
  const std::vector<int>& thresholds = rule.alerts.thresholds;
  if (thresholds.size() > static_cast<size_t>(kMaxAlertThresholds)) {
    return InvalidArgumentError("rule '" + rule.name + "' has more than " +
                                std::to_string(kMaxAlertThresholds) + " alert thresholds");
  }
  for (size_t j = 0; j < thresholds.size(); ++j) {
    if (thresholds[j] < 1 || thresholds[j] > 100 || (j > 0 && thresholds[j] <= thresholds[j - 1])) {
      return InvalidArgumentError("rule '" + rule.name +
                                  "': alert thresholds must be increasing percentages, 1 to 100");
    }
  }
  if (rule.slices.enabled()) {
    if (rule.algorithm != Algorithm::kFixedWindow) {
      return InvalidArgumentError("rule '" + rule.name +
                                  "': slices need algorithm: fixed_window, not " +
                                  std::string(AlgorithmName(rule.algorithm)));
    }
    if (rule.slices.max_share_ppm > kSliceShareScale || rule.slices.idle_return_ms < 1) {
      return InvalidArgumentError("rule '" + rule.name +
                                  "': slices need max_share in (0, 100%] and idle_return > 0");
    }
  }
  CompiledRule c;
  c.name = rule.name;
  c.tier = tier;
  c.slices = rule.slices;
  c.algorithm = rule.algorithm;
  c.shadow = rule.shadow;
  c.on_backend_error = rule.on_backend_error;
  c.on_store_full = rule.on_store_full;
  auto zone = Zone::Load(rule.timezone);
  if (!zone.ok())
    return InvalidArgumentError("rule '" + rule.name + "': " + zone.status().message());
  c.zone = *zone;
  for (size_t i = 0; i < limits.size(); ++i) {
    const Limit& l = limits[i];
    // A concurrency rule's limit is its max_in_flight, which may be 0 (a
    // tier or an override that admits nobody).
    const int64_t min_count = rule.algorithm == Algorithm::kConcurrency ? 0 : 1;
    if (l.count < min_count || l.count > kMaxLimitCount || l.multiplier < 1 || l.PeriodMs() < 1 ||
        l.PeriodMs() > kMaxPeriodMs) {
      return LimitError(rule, tier, l, "is out of range");
    }
    LimitParams p;
    p.count = l.count;
    p.period_ms = l.PeriodMs();
    p.unit = l.unit;
    p.multiplier = l.multiplier;
    p.zone = c.zone.get();
    p.capacity = l.count;
    const int64_t burst = BurstFor(rule, i);
    // Bounds are checked with division so the check itself cannot overflow.
    switch (rule.algorithm) {
      case Algorithm::kFixedWindow:
        if (p.unit < TimeUnit::kDay) p.epoch_window_ms = p.period_ms;
        break;
      case Algorithm::kSlidingWindow:
        if (p.count > kMaxExact / p.period_ms) {
          return LimitError(rule, tier, l,
                            "is too large for sliding_window (count x period in ms "
                            "must stay under 2^53)");
        }
        break;
      case Algorithm::kSlidingLog:
        if (p.count > kMaxSlidingLogCount) {
          return LimitError(rule, tier, l,
                            "is too large for sliding_log (at most 100000 per "
                            "window; use sliding_window)");
        }
        break;
      case Algorithm::kTokenBucket:
        if (burst >= 0) p.capacity = burst;
        if (p.capacity < 1 || p.capacity > kMaxLimitCount) {
          return LimitError(rule, tier, l, "has a token_bucket burst out of range");
        }
        if (std::max(p.count, p.capacity) > kMaxExact / p.period_ms) {
          return LimitError(rule, tier, l,
                            "is too large for token_bucket (count or burst x "
                            "period in ms must stay under 2^53)");
        }
        break;
      case Algorithm::kGcra: {
        const int64_t max_burst = burst >= 0 ? burst : p.count - 1;
        if (max_burst < 0 || max_burst >= kMaxLimitCount) {
          return LimitError(rule, tier, l, "has a gcra burst out of range");
        }
        p.capacity = max_burst + 1;
        if (p.period_ms > (int64_t{1} << 62) / 1000)
          return LimitError(rule, tier, l, "is too long");
        const int64_t emission_us = p.period_ms * 1000 / p.count;
        if (emission_us < 1) {
          return LimitError(rule, tier, l, "is too fine for gcra (under 1 microsecond per unit)");
        }
        p.emission_us = emission_us;
        if (p.capacity > kMaxGcraSpanUs / emission_us) {
          return LimitError(rule, tier, l,
                            "is too large for gcra (period x burst / count must "
                            "stay under 2^52 microseconds)");
        }
        break;
      }
      case Algorithm::kConcurrency:
        // count is max_in_flight and the period the lease TTL: nothing here
        // is state arithmetic (leases are decided by core/concurrency.h).
        break;
    }
    c.limits.push_back(p);
  }
  c.state_words = StateWords(c.algorithm, static_cast<int>(c.limits.size()));
  if (rule.alerts.enabled()) {
    c.alerts = CompileAlertPolicy(rule.alerts.thresholds, c.limits, c.state_words);
    c.state_words += kAlertWordsPerLimit * static_cast<int>(c.limits.size());
  }
  return c;
}

int64_t EvaluateRule(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                     Decision* decision, MemoryRoom* room) {
  switch (rule.algorithm) {
    case Algorithm::kFixedWindow:
      return EvaluateFixedSize<FixedWindowState, ApplyFixedWindow>(rule, state, now_ms, cost,
                                                                   decision);
    case Algorithm::kSlidingWindow:
      return EvaluateFixedSize<SlidingWindowState, ApplySlidingWindow>(rule, state, now_ms, cost,
                                                                       decision);
    case Algorithm::kTokenBucket:
      return EvaluateFixedSize<TokenBucketState, ApplyTokenBucket>(rule, state, now_ms, cost,
                                                                   decision);
    case Algorithm::kGcra:
      return EvaluateFixedSize<GcraState, ApplyGcra>(rule, state, now_ms, cost, decision);
    case Algorithm::kSlidingLog:
      return EvaluateSlidingLog(rule, state, now_ms, cost, decision, room);
    case Algorithm::kConcurrency:
      break;  // decided by leases, never by a check: see below
  }
  // No rate to decide (a concurrency rule, which the service never checks):
  // a denial that never clears, no state touched, nothing kept.
  *decision = Decision{};
  decision->retry_after_ms = -1;
  return 0;
}

void ReleaseRuleState(Algorithm algorithm, int64_t* state) {
  if (algorithm != Algorithm::kSlidingLog) return;
  delete reinterpret_cast<SlidingLog*>(state[0]);
  state[0] = 0;
}

namespace {

template <typename State, int64_t (*Refund)(const LimitParams&, State&, int64_t, int64_t)>
void RefundFixedSize(const CompiledRule& rule, int64_t* words, int64_t now_ms, int64_t cost,
                     RefundedUnits* refunded) {
  static_assert(sizeof(State) % sizeof(int64_t) == 0);
  constexpr size_t kWords = sizeof(State) / sizeof(int64_t);
  for (size_t i = 0; i < rule.limits.size(); ++i) {
    State s;
    std::memcpy(&s, words + i * kWords, sizeof(State));
    (*refunded)[i] = Refund(rule.limits[i], s, now_ms, cost);
    std::memcpy(words + i * kWords, &s, sizeof(State));
  }
}

}  // namespace

void RefundRule(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                RefundedUnits* refunded) {
  refunded->fill(0);
  switch (rule.algorithm) {
    case Algorithm::kFixedWindow:
      return RefundFixedSize<FixedWindowState, RefundFixedWindow>(rule, state, now_ms, cost,
                                                                  refunded);
    case Algorithm::kSlidingWindow:
      return RefundFixedSize<SlidingWindowState, RefundSlidingWindow>(rule, state, now_ms, cost,
                                                                      refunded);
    case Algorithm::kTokenBucket:
      return RefundFixedSize<TokenBucketState, RefundTokenBucket>(rule, state, now_ms, cost,
                                                                  refunded);
    case Algorithm::kGcra:
      return RefundFixedSize<GcraState, RefundGcra>(rule, state, now_ms, cost, refunded);
    case Algorithm::kSlidingLog:
      // No log yet: nothing was ever logged, so nothing to give back.
      if (auto* log = reinterpret_cast<SlidingLog*>(state[0]); log != nullptr) {
        log->Refund(rule.limits, now_ms, cost, *refunded);
      }
      return;
    case Algorithm::kConcurrency:
      return;  // no state: leases are released, never refunded
  }
}

int64_t RefundRuleAndPeek(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                          RefundResult* out) {
  RefundRule(rule, state, now_ms, cost, &out->refunded);
  // A peek fires nothing and changes no alert bit; it says how long the
  // state must be kept for the bits it has.
  AlertOutcome unused;
  const int64_t expires = EvaluateRuleWithAlerts(rule, state, now_ms, 0, &out->after, &unused);
  if (expires > now_ms) return expires;
  // It holds nothing any more, and every store drops it now (the embedded
  // store frees the entry, a script deletes the key): cleared here too, so
  // that a clock step back finds a new subject wherever the state lived.
  ReleaseRuleState(rule.algorithm, state);
  std::fill(state, state + rule.state_words, 0);
  return 0;
}

}  // namespace floodgate::core
