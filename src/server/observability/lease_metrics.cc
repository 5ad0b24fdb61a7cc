// The leases' and waits' metric families: see lease_metrics.h.
#include "server/observability/lease_metrics.h"

#include <initializer_list>
#include <utility>
#include <vector>

#include "server/observability/metrics.h"

namespace floodgate::server {
namespace {

std::string RuleLabel(const std::string& rule) { return "rule=\"" + EscapeLabel(rule) + "\""; }

std::string RuleAnd(const std::string& rule, std::string_view name, std::string_view value) {
  return RuleLabel(rule) + "," + std::string(name) + "=\"" + std::string(value) + "\"";
}

// A family with one sample per rule and label set: for each rule's
// stats, each (label value, member) of `series`.
template <typename Stats>
void AppendPerRule(std::string* out, std::string_view name, std::string_view type,
                   std::string_view help, const std::vector<std::pair<std::string, Stats>>& rules,
                   std::string_view label,
                   std::initializer_list<std::pair<std::string_view, int64_t Stats::*>> series) {
  AppendMetricHeader(out, name, type, help);
  for (const auto& [rule, stats] : rules) {
    for (const auto& [value, member] : series) {
      AppendMetricSample(out, name, label.empty() ? RuleLabel(rule) : RuleAnd(rule, label, value),
                         stats.*member);
    }
  }
}

}  // namespace

void AppendLeaseMetrics(const service::Services& services, std::string* out) {
  using service::LeaseLedger;
  using service::WaitRoom;
  using Lease = LeaseLedger::RuleStats;
  using Wait = WaitRoom::RuleStats;
  const std::vector<std::pair<std::string, Lease>> leases = services.leases->Stats();
  AppendPerRule<Lease>(out, "floodgate_leases_held", "gauge",
                       "Leases this server granted that are neither released nor expired, by rule "
                       "(a lease released through another server counts until its TTL ends).",
                       leases, "", {{"", &Lease::held}});
  AppendPerRule<Lease>(out, "floodgate_lease_acquisitions_total", "counter",
                       "Lease acquisitions by rule and result (refused: max_in_flight held, or "
                       "the subject blocked).",
                       leases, "result",
                       {{"acquired", &Lease::acquired}, {"refused", &Lease::refused}});
  AppendPerRule<Lease>(out, "floodgate_lease_releases_total", "counter",
                       "Leases released while live, by rule.", leases, "",
                       {{"", &Lease::released}});
  AppendPerRule<Lease>(out, "floodgate_lease_expirations_total", "counter",
                       "Leases this server granted whose TTL ran out before anyone released them "
                       "(a client that died or forgot), by rule.",
                       leases, "", {{"", &Lease::expired}});

  const std::vector<std::pair<std::string, Wait>> waits = services.waiting->Stats();
  AppendPerRule<Wait>(out, "floodgate_waiting", "gauge",
                      "Requests held waiting for room now (WAIT, wait_ms), by rule.", waits, "",
                      {{"", &Wait::waiting}});
  AppendPerRule<Wait>(out, "floodgate_waits_total", "counter",
                      "Requests that waited, by rule and outcome: admitted, timed_out (denied by "
                      "the deadline), cancelled (the client went away), full (answered at once: "
                      "max_waiters were held).",
                      waits, "outcome",
                      {{"admitted", &Wait::admitted},
                       {"timed_out", &Wait::timed_out},
                       {"cancelled", &Wait::cancelled},
                       {"full", &Wait::full}});
}

}  // namespace floodgate::server
