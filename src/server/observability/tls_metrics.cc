// The TLS certificate's metric families: see tls_metrics.h.
#include "server/observability/tls_metrics.h"

#include "server/observability/metrics.h"

namespace floodgate::server {

void AppendTlsMetrics(const TlsReloader& reloader, std::string* out) {
  AppendMetricFamily(out, "floodgate_tls_reloads_total", "counter",
                     "Certificate reloads (SIGHUP, or the files changed on disk), by result: "
                     "refused keeps the previous certificate serving.",
                     "result", {{"ok", reloader.reloads()}, {"refused", reloader.refusals()}});
  AppendMetric(out, "floodgate_tls_certificate_expiry_timestamp_seconds", "gauge",
               "When the serving certificate stops being valid (Unix time).",
               reloader.not_after_s());
}

}  // namespace floodgate::server
