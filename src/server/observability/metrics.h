// Metrics: counters and a latency histogram, rendered in the Prometheus text
// format for GET /metrics.
//
// Thread-safe. Hot-path counters are kept per event loop (each loop writes
// only its own slot, so loops never contend on a cache line) and summed when
// scraped.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/observability/rule_series.h"

namespace floodgate::server {

// The request-duration histogram is sampled: sessions time one batch of
// requests (a pipeline, or one HTTP request) in this many.
inline constexpr uint64_t kLatencySampling = 8;

// Latency histogram bucket bounds, in microseconds (+Inf is implicit).
inline constexpr std::array<int64_t, 12> kLatencyBucketsUs = {1,   5,   10,   25,   50,    100,
                                                              250, 500, 1000, 2500, 10000, 100000};

// One loop's counters for one rule: a rate rule's decisions, a
// concurrency rule's acquisitions (requests answered: one that waited
// counts once, by how it ended).
struct alignas(64) RuleCounters {
  std::atomic<int64_t> allowed{0};
  std::atomic<int64_t> denied{0};
  std::atomic<int64_t> shadow_denied{0};
  std::atomic<int64_t> acquired{0};
  std::atomic<int64_t> refused{0};
  RuleSeries series;  // the same, per second (GET /v1/admin/stats)
};

// One loop's general counters.
struct alignas(64) LoopCounters {
  std::array<std::atomic<int64_t>, kLatencyBucketsUs.size() + 1> latency_buckets{};
  std::atomic<int64_t> latency_count{0};
  std::atomic<int64_t> latency_sum_ns{0};
};

class Metrics {
 public:
  explicit Metrics(int num_loops);

  // A stable pointer to `loop`'s counters for `rule`, created on first use.
  // Callers cache it per loop (the lookup takes a mutex).
  RuleCounters* ForRule(std::string_view rule, int loop);
  LoopCounters& ForLoop(int loop) { return *loops_[loop]; }

  // Records one request's handling time.
  void ObserveLatency(int loop, int64_t ns) { ObserveLatencies(loop, ns, 1); }
  // Records `count` requests that each took `ns` (a pipeline's average).
  void ObserveLatencies(int loop, int64_t ns, size_t count);

  // Counts an error by kind ("protocol", "bad_request", "not_found",
  // "store_full", "unauthorized", ...). Thread-safe; not for the hot path of
  // successful requests.
  void CountError(std::string_view kind);

  // Calls `fn(rule, per_loop, num_loops)` for each rule counted so far, in
  // name order, under the lock (keep `fn` short).
  template <typename Fn>
  void ForEachRule(Fn&& fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [rule, per_loop] : rules_) fn(rule, per_loop.get(), num_loops_);
  }
  int num_loops() const { return num_loops_; }

  // Appends the counters this class owns in the Prometheus text format.
  void Render(std::string* out) const;

 private:
  const int num_loops_;
  std::vector<std::unique_ptr<LoopCounters>> loops_;
  mutable std::mutex mu_;
  // rule -> one RuleCounters per loop
  std::map<std::string, std::unique_ptr<RuleCounters[]>, std::less<>> rules_;  // guarded by mu_
  std::map<std::string, std::atomic<int64_t>, std::less<>> errors_;            // guarded by mu_
};

// Appends one metric family header: "# HELP name help\n# TYPE name type\n".
void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help);
// Appends one sample: "name{labels} value\n" ("name value\n" without labels;
// `labels` is already in the text format, e.g. reason="queue_full").
void AppendMetricSample(std::string* out, std::string_view name, std::string_view labels,
                        int64_t value);
// One series of a family whose series are known up front: its value of the
// family's one label (text-format-safe as it is, e.g. "queue_full"), and its
// value.
struct MetricSeries {
  std::string_view label_value;
  int64_t value = 0;
};
// Appends a whole family, its header then one series per element of
// `series` in order, labelled label="label_value", so that its name and its
// label are written once.
void AppendMetricFamily(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help, std::string_view label,
                        std::initializer_list<MetricSeries> series);
// Appends a family of one series without labels.
void AppendMetric(std::string* out, std::string_view name, std::string_view type,
                  std::string_view help, int64_t value);
// Escapes a label value (backslash, quote, newline) for the text format.
std::string EscapeLabel(std::string_view value);

}  // namespace floodgate::server
