// Rule evaluation: all limits of a rule against one state, at one instant,
// all-or-nothing.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/alerts.h"
#include "core/calendar.h"
#include "core/limit_params.h"
#include "core/memory_room.h"
#include "floodgate/decision.h"
#include "floodgate/rule.h"

namespace floodgate::core {

// Bounds CompileRule holds limits to, so that every figure stays exact in
// int64 and in the Redis scripts' doubles: count x period_ms (sliding_window)
// and max(count, burst) x period_ms (token_bucket) at most kMaxExact, units
// per window of a sliding_log (one timestamp each) at most
// kMaxSlidingLogCount, gcra's emission interval x capacity at most
// kMaxGcraSpanUs.
inline constexpr int64_t kMaxExact = int64_t{1} << 53;
inline constexpr int64_t kMaxSlidingLogCount = 100'000;
inline constexpr int64_t kMaxGcraSpanUs = int64_t{1} << 52;

// One rule, or one tier of a rule, ready to evaluate. Immutable; thread-safe.
struct CompiledRule {
  std::string name;
  std::string tier;  // empty for the rule's own limits
  Algorithm algorithm = Algorithm::kFixedWindow;
  bool shadow = false;
  OnBackendError on_backend_error = OnBackendError::kAllow;
  OnStoreFull on_store_full = OnStoreFull::kDeny;
  std::vector<LimitParams> limits;
  std::shared_ptr<const Zone> zone;  // keeps limits[i].zone alive
  // The algorithm's words (StateWords()), then the alert words when the
  // rule has alerts (core/alerts.h).
  int state_words = 0;
  AlertPolicy alerts;
  // Quota slices (Rule::slices): decided by service/slices/ on a shared
  // store; the state and its format are the same with or without them.
  SliceConfig slices;
  // A view of the rule (service/limiter/variant_views.h) rather than the
  // rule itself: > 0, a priority class's, whose capacities are lowered by
  // this many units at most; kChargedAnyway, a settle's, whose capacities are
  // out of reach. 0: the rule's own capacities. A store that remembers
  // denials (the Redis store's local deny cache) goes by it.
  int64_t kept_back = 0;
};
inline constexpr int64_t kChargedAnyway = -1;

// Compiles `limits` (a rule's own or a tier's) of `rule`. INVALID_ARGUMENT
// naming the rule and limit when a limit does not fit the algorithm's bounds.
Result<CompiledRule> CompileRule(const Rule& rule, const std::string& tier,
                                 const std::vector<Limit>& limits);

// Size of a rule's state in int64 words: 2 per limit for fixed_window and
// token_bucket, 3 for sliding_window, 1 for gcra; sliding_log keeps one word,
// an owning pointer to its SlidingLog (see ReleaseRuleState); concurrency
// none (its leases are a table of their own: core/concurrency.h).
int StateWords(Algorithm algorithm, int num_limits);

// Evaluates `rule` for `cost` units at now_ms against `state` (all zeros for
// a new subject), updating it iff admitted with cost > 0, and fills *decision.
// Returns when the state will hold nothing (0: nothing to keep).
// A concurrency rule is decided by leases, never here: it is denied with
// retry_after_ms -1 and no limits, `state` untouched, 0 returned.
// A state that owns memory (sliding_log's log) claims what an admission
// adds to it from `room` (null: no bound); when the room refuses, the
// admission is not recorded, the state keeps what it had, and *decision
// describes a step that did not happen (the store answers it as full).
// Not thread-safe for one state: the caller serialises.
int64_t EvaluateRule(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                     Decision* decision, MemoryRoom* room = nullptr);

// Completes a decision whose per-limit figures are set (num_limits and
// limits[0, num_limits), as the algorithms report them): each limit's
// period_ms, the binding limit and its figures, `allowed`, and shadow mode.
// `admitted` is whether every limit had room (and the cost was consumed).
// EvaluateRule ends with it; the Redis store calls it on the figures its
// scripts return, so both stores report a decision the same way.
void FinishDecision(const CompiledRule& rule, bool admitted, Decision* decision);

// Fills *decision for a subject whose usage is unknown (see
// Decision::fallback): `allow` is the rule's policy for `reason`
// (on_backend_error, on_store_full). Every limit reports its capacity and
// period, remaining and reset_after_ms -1 (unknown), and on a denial a
// retry after kFallbackRetryAfterMs; shadow mode applies as usual.
inline constexpr int64_t kFallbackRetryAfterMs = 1000;
void FallbackDecision(const CompiledRule& rule, bool allow, Fallback reason, Decision* decision);

// Frees what a state owns (sliding_log's log). Safe on a zero state.
void ReleaseRuleState(Algorithm algorithm, int64_t* state);

// The units each limit of a rule gave back in one refund: [i] for limit i.
using RefundedUnits = std::array<int64_t, kMaxLimitsPerRule>;

// Gives back up to `cost` units (in [1, kMaxLimitCount]; callers check) to
// every limit of `rule` in `state` at now_ms, each as its algorithm defines
// a refund (core/refund.h): never below nothing used, never creating state
// (a zero state stays zero), never moving the state's expiry later. Unlike
// a decision it is not all-or-nothing: each limit gives back what it
// counts, and (*refunded)[i] receives what limit i gave back, in [0, cost]
// (0 for every limit of a zero state). Alert bits already set stay set
// (the thresholds they stand for were reached and reported; a refund does
// not make them fire again in the same window). A concurrency rule has
// nothing to refund: a no-op that gives back nothing.
// Not thread-safe for one state: the caller serialises.
void RefundRule(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                RefundedUnits* refunded);

// What a refund did (RefundRuleAndPeek, and every store's Refund).
struct RefundResult {
  // The subject's state right after, as a cost-0 peek at that instant
  // reports it.
  Decision after;
  // refunded[i]: the units limit i gave back, in [0, cost]; set for
  // i < after.num_limits. Limits of one rule may differ: each gives back
  // what it counts (a window that ended counts nothing).
  RefundedUnits refunded{};
  // The refund's figure as a whole: the most any limit gave back (0 when
  // none did). A refund is not all-or-nothing, so there is no one count.
  int64_t most_refunded() const {
    int64_t most = 0;
    for (int i = 0; i < after.num_limits; ++i) most = std::max(most, refunded[i]);
    return most;
  }
};

// RefundRule, then a peek at the state it left (EvaluateRule with cost 0,
// at the same instant) into out->after: what the subject has now; what
// each limit gave back into out->refunded, from the same step. Returns when
// the state holds nothing any more, alert bits included, as
// EvaluateRuleWithAlerts does for that peek; never later than before the
// refund. A state that holds nothing at now_ms is cleared (released and
// zeroed, as a new subject's) and 0 returned: the stores drop it then.
int64_t RefundRuleAndPeek(const CompiledRule& rule, int64_t* state, int64_t now_ms, int64_t cost,
                          RefundResult* out);

}  // namespace floodgate::core
