// Metrics: see metrics.h.
#include "server/observability/metrics.h"

#include "common/text.h"

namespace floodgate::server {

Metrics::Metrics(int num_loops) : num_loops_(num_loops) {
  for (int i = 0; i < num_loops; ++i) loops_.push_back(std::make_unique<LoopCounters>());
  // Known kinds start at 0, so a scrape shows the series before the first error.
  for (const char* kind : {"protocol", "bad_request", "not_found", "unknown_command",
                           "unauthorized", "store_full", "method_not_allowed"}) {
    errors_.try_emplace(kind);
  }
}

RuleCounters* Metrics::ForRule(std::string_view rule, int loop) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rules_.find(rule);
  if (it == rules_.end()) {
    it = rules_.emplace(std::string(rule), std::make_unique<RuleCounters[]>(num_loops_)).first;
  }
  return &it->second[loop];
}

void Metrics::ObserveLatencies(int loop, int64_t ns, size_t count) {
  LoopCounters& c = *loops_[loop];
  const int64_t us = ns / 1000;
  size_t bucket = 0;
  while (bucket < kLatencyBucketsUs.size() && us >= kLatencyBucketsUs[bucket]) ++bucket;
  // Only this loop writes its slot: a relaxed load and store is enough.
  auto bump = [](std::atomic<int64_t>& a, int64_t d) {
    a.store(a.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  };
  const auto n = static_cast<int64_t>(count);
  bump(c.latency_buckets[bucket], n);
  bump(c.latency_count, n);
  bump(c.latency_sum_ns, ns * n);
}

void Metrics::CountError(std::string_view kind) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = errors_.find(kind);
  if (it == errors_.end()) it = errors_.try_emplace(std::string(kind)).first;
  it->second.fetch_add(1, std::memory_order_relaxed);
}

void AppendMetricSample(std::string* out, std::string_view name, std::string_view labels,
                        int64_t value) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(std::to_string(value)).append("\n");
}

void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void AppendMetricFamily(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help, std::string_view label,
                        std::initializer_list<MetricSeries> series) {
  AppendMetricHeader(out, name, type, help);
  std::string labels;
  for (const MetricSeries& s : series) {
    labels.assign(label).append("=\"").append(s.label_value).append("\"");
    AppendMetricSample(out, name, labels, s.value);
  }
}

void AppendMetric(std::string* out, std::string_view name, std::string_view type,
                  std::string_view help, int64_t value) {
  AppendMetricHeader(out, name, type, help);
  AppendMetricSample(out, name, "", value);
}

std::string EscapeLabel(std::string_view value) {
  std::string out;
  text::AppendBackslashEscaped(out, value);
  return out;
}

void Metrics::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  AppendMetricHeader(out, "floodgate_decisions_total", "counter",
                     "Decisions by rule and outcome (allowed, denied, shadow_denied).");
  for (const auto& [rule, per_loop] : rules_) {
    int64_t allowed = 0, denied = 0, shadow = 0, leased = 0;
    for (int i = 0; i < num_loops_; ++i) {
      allowed += per_loop[i].allowed.load(std::memory_order_relaxed);
      denied += per_loop[i].denied.load(std::memory_order_relaxed);
      shadow += per_loop[i].shadow_denied.load(std::memory_order_relaxed);
      leased += per_loop[i].acquired.load(std::memory_order_relaxed) +
                per_loop[i].refused.load(std::memory_order_relaxed);
    }
    // A concurrency rule's acquisitions have families of their own
    // (lease_metrics.h): it decides nothing here.
    if (leased > 0 && allowed + denied + shadow == 0) continue;
    const std::string label = "rule=\"" + EscapeLabel(rule) + "\"";
    AppendMetricSample(out, "floodgate_decisions_total", label + ",outcome=\"allowed\"", allowed);
    AppendMetricSample(out, "floodgate_decisions_total", label + ",outcome=\"denied\"", denied);
    AppendMetricSample(out, "floodgate_decisions_total", label + ",outcome=\"shadow_denied\"",
                       shadow);
  }

  AppendMetricHeader(out, "floodgate_request_duration_seconds", "histogram",
                     "Time to handle one request (RESP command or HTTP request); sampled: one "
                     "pipeline or HTTP request in 8 is timed.");
  int64_t cumulative = 0, count = 0, sum_ns = 0;
  std::array<int64_t, kLatencyBucketsUs.size() + 1> buckets{};
  for (const auto& loop : loops_) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      buckets[b] += loop->latency_buckets[b].load(std::memory_order_relaxed);
    }
    count += loop->latency_count.load(std::memory_order_relaxed);
    sum_ns += loop->latency_sum_ns.load(std::memory_order_relaxed);
  }
  for (size_t b = 0; b < kLatencyBucketsUs.size(); ++b) {
    cumulative += buckets[b];
    char le[32];
    std::snprintf(le, sizeof(le), "%g", static_cast<double>(kLatencyBucketsUs[b]) / 1e6);
    AppendMetricSample(out, "floodgate_request_duration_seconds_bucket",
                       "le=\"" + std::string(le) + "\"", cumulative);
  }
  cumulative += buckets.back();
  AppendMetricSample(out, "floodgate_request_duration_seconds_bucket", "le=\"+Inf\"", cumulative);
  char sum[64];
  std::snprintf(sum, sizeof(sum), "%.9f", static_cast<double>(sum_ns) / 1e9);
  *out += "floodgate_request_duration_seconds_sum " + std::string(sum) + "\n";
  AppendMetricSample(out, "floodgate_request_duration_seconds_count", "", count);

  AppendMetricHeader(out, "floodgate_errors_total", "counter", "Errors answered, by kind.");
  for (const auto& [kind, n] : errors_) {
    AppendMetricSample(out, "floodgate_errors_total", "kind=\"" + EscapeLabel(kind) + "\"",
                       n.load(std::memory_order_relaxed));
  }
}

}  // namespace floodgate::server
