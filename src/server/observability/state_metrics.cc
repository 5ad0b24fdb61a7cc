// The state snapshot's metric families: see state_metrics.h.
#include "server/observability/state_metrics.h"

#include <cstdio>
#include <string_view>

#include "server/observability/metrics.h"

namespace floodgate::server {
namespace {

// A gauge in seconds from milliseconds (the helpers in metrics.h write
// integers).
void AppendSeconds(std::string* out, std::string_view name, std::string_view help, int64_t ms) {
  char value[32];
  std::snprintf(value, sizeof(value), "%.3f", static_cast<double>(ms) / 1000.0);
  out->append("# HELP ").append(name).append(" ").append(help).append("\n");
  out->append("# TYPE ").append(name).append(" gauge\n");
  out->append(name).append(" ").append(value).append("\n");
}

}  // namespace

void AppendStateMetrics(const service::StateKeeper& keeper, std::string* out) {
  const service::StateKeeper::Stats s = keeper.GetStats();
  AppendMetricFamily(out, "floodgate_snapshots_total", "counter",
                     "State snapshots written to data_dir, by result.", "result",
                     {{"ok", s.saves}, {"failed", s.save_failures}});
  AppendMetric(out, "floodgate_snapshot_entries", "gauge",
               "Entries (subjects, sets, OTP subjects, lease tables) in the last snapshot written.",
               s.last_save.entries);
  AppendMetric(out, "floodgate_snapshot_bytes", "gauge", "Size of the last snapshot written.",
               s.last_save.bytes);
  AppendSeconds(out, "floodgate_snapshot_duration_seconds",
                "How long the last snapshot took to write.", s.last_save.duration_ms);
  AppendSeconds(out, "floodgate_snapshot_timestamp_seconds",
                "When the last snapshot was taken (Unix time; 0: none yet).",
                s.last_save.written_at_ms);
  AppendMetricFamily(out, "floodgate_snapshot_loaded_entries", "gauge",
                     "What the snapshot loaded at start held: loaded, or skipped (expired since, "
                     "of a rule or limit the config no longer has, no room in the store).",
                     "outcome",
                     {{"loaded", s.load.entries},
                      {"expired", s.load.skipped_expired},
                      {"unknown_rule", s.load.skipped_unknown},
                      {"store_full", s.load.refused_full}});
  AppendSeconds(out, "floodgate_snapshot_load_duration_seconds",
                "How long loading the snapshot took at start.", s.load.duration_ms);
}

}  // namespace floodgate::server
