// The alerts' metric families: see alert_metrics.h.
#include "server/observability/alert_metrics.h"

#include "server/observability/metrics.h"

namespace floodgate::server {
void AppendAlertMetrics(const Alerts& alerts, std::string* out) {
  const Alerts::Stats s = alerts.GetStats();
  AppendMetric(out, "floodgate_alerts_emitted_total", "counter",
               "Quota alert events emitted by this server's decisions (one per rule, subject, "
               "tier, limit, threshold and window).",
               s.emitted);
  AppendMetric(out, "floodgate_alerts_delivered_total", "counter",
               "Alert events this server POSTed and the webhook answered 2xx.", s.delivered);
  AppendMetric(out, "floodgate_alerts_retries_total", "counter",
               "Failed alert POSTs scheduled again (backoff with jitter).", s.retried);
  AppendMetricFamily(out, "floodgate_alerts_dropped_total", "counter",
                     "Alert events given up, by reason: queue_full (alert_delivery.queue_size), "
                     "expired (alert_delivery.retry_for passed), stream_full (trimmed from the "
                     "Redis stream), shutdown (nowhere to keep them).",
                     "reason",
                     {{"queue_full", s.dropped_queue_full},
                      {"expired", s.dropped_expired},
                      {"stream_full", s.dropped_stream_full},
                      {"shutdown", s.dropped_shutdown}});
  AppendMetric(out, "floodgate_alerts_pending", "gauge",
               "Alert events waiting here for delivery, a retry, or the Redis stream.", s.pending);
}

}  // namespace floodgate::server
