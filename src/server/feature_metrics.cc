// The sets' and OTP's metric families: see feature_metrics.h.
#include "server/feature_metrics.h"

#include "server/metrics.h"

namespace floodgate::server {
namespace {

void Sample(std::string* out, std::string_view name, std::string_view labels, int64_t value) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(std::to_string(value)).append("\n");
}

}  // namespace

void AppendFeatureMetrics(Limiter& limiter, std::string* out) {
  const ExpiringSets::Stats sets = limiter.sets().GetStats();
  AppendMetricHeader(out, "floodgate_set_operations_total", "counter",
                     "Expiring-set operations done, by kind (add includes refreshes; read is "
                     "contains, count and members).");
  Sample(out, "floodgate_set_operations_total", "op=\"add\"", sets.adds);
  Sample(out, "floodgate_set_operations_total", "op=\"remove\"", sets.removes);
  Sample(out, "floodgate_set_operations_total", "op=\"read\"", sets.reads);
  AppendMetricHeader(out, "floodgate_set_full_total", "counter",
                     "Members refused because their set (or the embedded store) was full.");
  Sample(out, "floodgate_set_full_total", "", sets.full);
  AppendMetricHeader(out, "floodgate_set_backend_errors_total", "counter",
                     "Expiring-set operations the store failed (Redis down or late).");
  Sample(out, "floodgate_set_backend_errors_total", "", sets.backend_errors);
}

}  // namespace floodgate::server
