// The priority classes' metric family: see priority_metrics.h.
#include "server/observability/priority_metrics.h"

#include <vector>

#include "server/observability/metrics.h"

namespace floodgate::server {

void AppendPriorityMetrics(const service::RuleBook& rules, std::string* out) {
  const std::vector<service::RuleBook::ClassStat> classes = rules.ClassStats();
  if (classes.empty()) return;
  AppendMetricHeader(out, "floodgate_priority_decisions_total", "counter",
                     "Checks of a rule's priority class, admitted or denied (a shadow rule's "
                     "denial counted as denied).");
  for (const service::RuleBook::ClassStat& c : classes) {
    const std::string labels =
        "rule=\"" + EscapeLabel(c.rule) + "\",class=\"" + EscapeLabel(c.name) + "\",outcome=\"";
    AppendMetricSample(out, "floodgate_priority_decisions_total", labels + "admitted\"",
                       c.admitted);
    AppendMetricSample(out, "floodgate_priority_decisions_total", labels + "denied\"", c.denied);
  }
}

}  // namespace floodgate::server
