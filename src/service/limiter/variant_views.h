// Views of a variant: the same state (its id and tag) decided with other
// capacities, so that priorities and reservations' overruns need nothing of
// the algorithms or the stores (docs/reservations.md).
//
// - A priority class's view lowers each limit's capacity by the share kept
//   back from the class (Rule::priorities): `batch: 40%` of 100/minute
//   decides batch checks against 60 of the same count, so batch is denied
//   once 60 are used while the other classes go on to theirs. Kept back:
//   ceil(capacity x share / 100) units, so a share keeps at least one unit
//   whenever it is above 0 %. Decisions of a view report the class's limit
//   (60), its remaining and its waits.
// - The charge view raises each capacity out of reach, so that the units a
//   reservation's settle finds it used beyond its estimate are counted
//   whatever the limit, and the subject is in debt until its window or
//   refill covers them: fixed_window counts past its limit until the window
//   ends, sliding_window until the window slides past them, token_bucket
//   holds fewer than no tokens until the refill brings them back, gcra's
//   arrival time moves past its tolerance, sliding_log logs the units until
//   they age out. "Out of reach" is bounded by what each algorithm keeps
//   exact (the same bounds as the config's), and a debt past it is charged
//   to that bound only: 10^15 units for fixed_window, 100,000 per window for
//   sliding_log, 2^53 / period_ms for sliding_window and token_bucket, 2^52
//   microseconds of arrival time for gcra.
//
// The store cannot tell a view from its variant: both name one state, and
// the store decides with the capacities it is given (store.h: VariantRef).
// What the Redis store's local deny cache remembers of a class's denial is
// kept apart from the others' by CompiledRule::kept_back.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/rule_eval.h"
#include "floodgate/rule.h"
#include "floodgate/status.h"
#include "service/limiter/rule_set.h"

namespace floodgate::service {

// One class's decisions of one rule, since the server started: kept by the
// RuleBook across reloads, shown by /v1/admin/stats and the dashboard.
struct ClassCounts {
  std::atomic<int64_t> admitted{0};
  std::atomic<int64_t> denied{0};
};

struct ClassView {
  std::string name;
  int keep_percent = 0;
  Variant variant;  // its class_counts set, slow (counted after each decision)
};

// A variant's classes, in the rule's order, "default" among them (0 % when
// the rule does not name it).
struct ClassViews {
  std::vector<ClassView> classes;
  // The class of a check that names none.
  const ClassView* fallback = nullptr;

  const ClassView* Find(std::string_view name) const {
    for (const ClassView& c : classes) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }
};

// `compiled` with each capacity lowered by `keep_percent` % of it (rounded
// up); kept_back says by how much at most.
core::CompiledRule KeptBack(const core::CompiledRule& compiled, int keep_percent);
// `compiled` with each capacity raised out of reach (above).
core::CompiledRule ChargedAnyway(const core::CompiledRule& compiled);

// The views of `variant` of `rule` (whose id and tag are set): its classes
// when the rule has priorities, counted in `counts(class)`; its charge view.
void AddViews(const Rule& rule, Variant& variant,
              const std::function<std::shared_ptr<ClassCounts>(const std::string&)>& counts);

// The variant a check of `priority` (empty: none) decides with: `variant`
// itself for a rule without priorities, else its class's view. A class the
// rule does not have is INVALID_ARGUMENT naming the rule's classes; on a
// rule without priorities only "default" (what no class means) is accepted.
Status ClassOf(std::string_view rule, const Variant& variant, std::string_view priority,
               const Variant** out);

}  // namespace floodgate::service
