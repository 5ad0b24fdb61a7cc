// The sets' and OTP's metric families: see feature_metrics.h.
#include "server/observability/feature_metrics.h"

#include "floodgate/otp.h"
#include "server/observability/metrics.h"

namespace floodgate::server {
void AppendFeatureMetrics(service::Services& services, std::string* out) {
  const ExpiringSets::Stats sets = services.sets->GetStats();
  AppendMetricFamily(out, "floodgate_set_operations_total", "counter",
                     "Expiring-set operations done, by kind (add includes refreshes; read is "
                     "contains, count and members).",
                     "op", {{"add", sets.adds}, {"remove", sets.removes}, {"read", sets.reads}});
  AppendMetric(out, "floodgate_set_full_total", "counter",
               "Members refused because their set (or the embedded store) was full.", sets.full);
  AppendMetric(out, "floodgate_set_backend_errors_total", "counter",
               "Expiring-set operations the store failed (Redis down or late).",
               sets.backend_errors);

  Otp& otp = *services.otp;
  if (!otp.enabled()) return;
  const Otp::Stats o = otp.GetStats();
  AppendMetric(out, "floodgate_otp_issued_total", "counter", "OTP codes issued.", o.issued);
  AppendMetric(out, "floodgate_otp_issue_limited_total", "counter",
               "OTP issues refused by the issue limit.", o.issue_limited);
  AppendMetricFamily(out, "floodgate_otp_verifications_total", "counter",
                     "OTP verifications by result (limited: refused by the verify limit before "
                     "any comparison).",
                     "result",
                     {{"valid", o.verified_valid},
                      {"invalid", o.verified_invalid},
                      {"limited", o.verify_limited}});
  AppendMetric(out, "floodgate_otp_backend_errors_total", "counter",
               "OTP steps the store failed (Redis down or late).", o.backend_errors);
  AppendMetricFamily(
      out, "floodgate_otp_deliveries_total", "counter",
      "Codes POSTed to the delivery URL, by result (dropped: not queued because "
      "the queue was full, or left at shutdown).",
      "result",
      {{"sent", o.delivered}, {"failed", o.delivery_failed}, {"dropped", o.delivery_dropped}});
  AppendMetric(out, "floodgate_otp_delivery_queue", "gauge",
               "Codes waiting for the delivery URL, or being sent.", o.delivery_queued);
}

}  // namespace floodgate::server
