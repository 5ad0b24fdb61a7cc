// The sets' and OTP's metric families: see feature_metrics.h.
#include "server/feature_metrics.h"

#include "floodgate/otp.h"
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

  Otp& otp = limiter.otp();
  if (!otp.enabled()) return;
  const Otp::Stats o = otp.GetStats();
  AppendMetricHeader(out, "floodgate_otp_issued_total", "counter", "OTP codes issued.");
  Sample(out, "floodgate_otp_issued_total", "", o.issued);
  AppendMetricHeader(out, "floodgate_otp_issue_limited_total", "counter",
                     "OTP issues refused by the issue limit.");
  Sample(out, "floodgate_otp_issue_limited_total", "", o.issue_limited);
  AppendMetricHeader(out, "floodgate_otp_verifications_total", "counter",
                     "OTP verifications by result (limited: refused by the verify limit before "
                     "any comparison).");
  Sample(out, "floodgate_otp_verifications_total", "result=\"valid\"", o.verified_valid);
  Sample(out, "floodgate_otp_verifications_total", "result=\"invalid\"", o.verified_invalid);
  Sample(out, "floodgate_otp_verifications_total", "result=\"limited\"", o.verify_limited);
  AppendMetricHeader(out, "floodgate_otp_backend_errors_total", "counter",
                     "OTP steps the store failed (Redis down or late).");
  Sample(out, "floodgate_otp_backend_errors_total", "", o.backend_errors);
  AppendMetricHeader(out, "floodgate_otp_deliveries_total", "counter",
                     "Codes POSTed to the delivery URL, by result (dropped: not queued because "
                     "the queue was full, or left at shutdown).");
  Sample(out, "floodgate_otp_deliveries_total", "result=\"sent\"", o.delivered);
  Sample(out, "floodgate_otp_deliveries_total", "result=\"failed\"", o.delivery_failed);
  Sample(out, "floodgate_otp_deliveries_total", "result=\"dropped\"", o.delivery_dropped);
  AppendMetricHeader(out, "floodgate_otp_delivery_queue", "gauge",
                     "Codes waiting for the delivery URL, or being sent.");
  Sample(out, "floodgate_otp_delivery_queue", "", o.delivery_queued);
}

}  // namespace floodgate::server
