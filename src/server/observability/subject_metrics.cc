// The subjects' metric families: see subject_metrics.h.
#include "server/observability/subject_metrics.h"

#include <memory>
#include <string>

#include "server/observability/metrics.h"
#include "service/subjects/jwt_verifier.h"

namespace floodgate::server {

void AppendSubjectMetrics(const service::Subjects& subjects, std::string* out) {
  const std::shared_ptr<const service::SubjectRules> rules = subjects.Current();
  if (rules == nullptr || (rules->empty() && rules->lists().empty())) return;
  const service::Subjects::Counts counts = subjects.GetCounts();

  AppendMetricHeader(out, "floodgate_list_entries", "gauge",
                     "Networks each list holds (as last loaded).");
  for (const auto& list : rules->lists()) {
    AppendMetricSample(out, "floodgate_list_entries", "list=\"" + EscapeLabel(list->name) + "\"",
                       static_cast<int64_t>(list->networks.size()));
  }
  AppendMetricHeader(out, "floodgate_list_matches_total", "counter",
                     "Checks a rule's deny_list denied or allow_list admitted unchecked.");
  for (const auto& [labels, n] : counts.list_matches) {
    const auto& [list, rule, action] = labels;
    AppendMetricSample(out, "floodgate_list_matches_total",
                       "list=\"" + EscapeLabel(list) + "\",rule=\"" + EscapeLabel(rule) +
                           "\",action=\"" + action + "\"",
                       n);
  }
  AppendMetricHeader(out, "floodgate_key_missing_total", "counter",
                     "Checks whose key template found a part missing from the request, answered "
                     "by the rule's on_missing.");
  for (const auto& [labels, n] : counts.missing) {
    AppendMetricSample(
        out, "floodgate_key_missing_total",
        "rule=\"" + EscapeLabel(labels.first) + "\",part=\"" + EscapeLabel(labels.second) + "\"",
        n);
  }
  if (rules->jwt() == nullptr) return;
  AppendMetricHeader(out, "floodgate_jwt_rejected_total", "counter",
                     "Bearer tokens that did not verify, by why.");
  for (size_t i = 0; i < counts.jwt_rejected.size(); ++i) {
    AppendMetricSample(
        out, "floodgate_jwt_rejected_total",
        "reason=\"" + std::string(service::JwtReasonLabel(static_cast<service::JwtReason>(i))) +
            "\"",
        counts.jwt_rejected[i]);
  }
}

}  // namespace floodgate::server
