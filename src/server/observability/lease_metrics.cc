// The leases' and waits' metric families: see lease_metrics.h.
#include "server/observability/lease_metrics.h"

#include <utility>
#include <vector>

#include "server/observability/metrics.h"

namespace floodgate::server {
namespace {

std::string RuleLabel(const std::string& rule) { return "rule=\"" + EscapeLabel(rule) + "\""; }

std::string RuleAnd(const std::string& rule, std::string_view name, std::string_view value) {
  return RuleLabel(rule) + "," + std::string(name) + "=\"" + std::string(value) + "\"";
}

}  // namespace

void AppendLeaseMetrics(const service::Services& services, std::string* out) {
  using service::LeaseLedger;
  using service::WaitRoom;
  const std::vector<std::pair<std::string, LeaseLedger::RuleStats>> leases =
      services.leases->Stats();
  AppendMetricHeader(out, "floodgate_leases_held", "gauge",
                     "Leases this server granted that are neither released nor expired, by rule "
                     "(a lease released through another server counts until its TTL ends).");
  for (const auto& [rule, s] : leases) {
    AppendMetricSample(out, "floodgate_leases_held", RuleLabel(rule), s.held);
  }
  AppendMetricHeader(out, "floodgate_lease_acquisitions_total", "counter",
                     "Lease acquisitions by rule and result (refused: max_in_flight held, or "
                     "the subject blocked).");
  for (const auto& [rule, s] : leases) {
    AppendMetricSample(out, "floodgate_lease_acquisitions_total",
                       RuleAnd(rule, "result", "acquired"), s.acquired);
    AppendMetricSample(out, "floodgate_lease_acquisitions_total",
                       RuleAnd(rule, "result", "refused"), s.refused);
  }
  AppendMetricHeader(out, "floodgate_lease_releases_total", "counter",
                     "Leases released while live, by rule.");
  for (const auto& [rule, s] : leases) {
    AppendMetricSample(out, "floodgate_lease_releases_total", RuleLabel(rule), s.released);
  }
  AppendMetricHeader(out, "floodgate_lease_expirations_total", "counter",
                     "Leases this server granted whose TTL ran out before anyone released them "
                     "(a client that died or forgot), by rule.");
  for (const auto& [rule, s] : leases) {
    AppendMetricSample(out, "floodgate_lease_expirations_total", RuleLabel(rule), s.expired);
  }

  const std::vector<std::pair<std::string, WaitRoom::RuleStats>> waits = services.waiting->Stats();
  AppendMetricHeader(out, "floodgate_waiting", "gauge",
                     "Requests held waiting for room now (WAIT, wait_ms), by rule.");
  for (const auto& [rule, s] : waits) {
    AppendMetricSample(out, "floodgate_waiting", RuleLabel(rule), s.waiting);
  }
  AppendMetricHeader(out, "floodgate_waits_total", "counter",
                     "Requests that waited, by rule and outcome: admitted, timed_out (denied by "
                     "the deadline), cancelled (the client went away), full (answered at once: "
                     "max_waiters were held).");
  for (const auto& [rule, s] : waits) {
    for (const auto& [outcome, n] : {std::pair<const char*, int64_t>{"admitted", s.admitted},
                                     {"timed_out", s.timed_out},
                                     {"cancelled", s.cancelled},
                                     {"full", s.full}}) {
      AppendMetricSample(out, "floodgate_waits_total", RuleAnd(rule, "outcome", outcome), n);
    }
  }
}

}  // namespace floodgate::server
