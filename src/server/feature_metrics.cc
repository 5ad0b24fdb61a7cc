// The sets' and OTP's metric families: see feature_metrics.h.
#include "server/feature_metrics.h"

#include "floodgate/otp.h"
#include "server/metrics.h"

namespace floodgate::server {
void AppendFeatureMetrics(service::LimiterCore& limiter, std::string* out) {
  const ExpiringSets::Stats sets = limiter.sets().GetStats();
  AppendMetricHeader(out, "floodgate_set_operations_total", "counter",
                     "Expiring-set operations done, by kind (add includes refreshes; read is "
                     "contains, count and members).");
  AppendMetricSample(out, "floodgate_set_operations_total", "op=\"add\"", sets.adds);
  AppendMetricSample(out, "floodgate_set_operations_total", "op=\"remove\"", sets.removes);
  AppendMetricSample(out, "floodgate_set_operations_total", "op=\"read\"", sets.reads);
  AppendMetricHeader(out, "floodgate_set_full_total", "counter",
                     "Members refused because their set (or the embedded store) was full.");
  AppendMetricSample(out, "floodgate_set_full_total", "", sets.full);
  AppendMetricHeader(out, "floodgate_set_backend_errors_total", "counter",
                     "Expiring-set operations the store failed (Redis down or late).");
  AppendMetricSample(out, "floodgate_set_backend_errors_total", "", sets.backend_errors);

  Otp& otp = limiter.otp();
  if (!otp.enabled()) return;
  const Otp::Stats o = otp.GetStats();
  AppendMetricHeader(out, "floodgate_otp_issued_total", "counter", "OTP codes issued.");
  AppendMetricSample(out, "floodgate_otp_issued_total", "", o.issued);
  AppendMetricHeader(out, "floodgate_otp_issue_limited_total", "counter",
                     "OTP issues refused by the issue limit.");
  AppendMetricSample(out, "floodgate_otp_issue_limited_total", "", o.issue_limited);
  AppendMetricHeader(out, "floodgate_otp_verifications_total", "counter",
                     "OTP verifications by result (limited: refused by the verify limit before "
                     "any comparison).");
  AppendMetricSample(out, "floodgate_otp_verifications_total", "result=\"valid\"",
                     o.verified_valid);
  AppendMetricSample(out, "floodgate_otp_verifications_total", "result=\"invalid\"",
                     o.verified_invalid);
  AppendMetricSample(out, "floodgate_otp_verifications_total", "result=\"limited\"",
                     o.verify_limited);
  AppendMetricHeader(out, "floodgate_otp_backend_errors_total", "counter",
                     "OTP steps the store failed (Redis down or late).");
  AppendMetricSample(out, "floodgate_otp_backend_errors_total", "", o.backend_errors);
  AppendMetricHeader(out, "floodgate_otp_deliveries_total", "counter",
                     "Codes POSTed to the delivery URL, by result (dropped: not queued because "
                     "the queue was full, or left at shutdown).");
  AppendMetricSample(out, "floodgate_otp_deliveries_total", "result=\"sent\"", o.delivered);
  AppendMetricSample(out, "floodgate_otp_deliveries_total", "result=\"failed\"", o.delivery_failed);
  AppendMetricSample(out, "floodgate_otp_deliveries_total", "result=\"dropped\"",
                     o.delivery_dropped);
  AppendMetricHeader(out, "floodgate_otp_delivery_queue", "gauge",
                     "Codes waiting for the delivery URL, or being sent.");
  AppendMetricSample(out, "floodgate_otp_delivery_queue", "", o.delivery_queued);
}

}  // namespace floodgate::server
