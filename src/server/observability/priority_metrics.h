// The priority classes' metric family (docs/reservations.md#priorities),
// for GET /metrics.
#pragma once

#include <string>

#include "service/limiter/rule_set.h"

namespace floodgate::server {

// floodgate_priority_decisions_total{rule,class,outcome}: nothing when no
// rule has priorities.
void AppendPriorityMetrics(const service::RuleBook& rules, std::string* out);

}  // namespace floodgate::server
