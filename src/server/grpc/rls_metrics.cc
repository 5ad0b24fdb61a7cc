// RlsMetrics: see rls_metrics.h.
#include "server/grpc/rls_metrics.h"

#include <map>
#include <utility>

#include "server/observability/metrics.h"

namespace floodgate::server {
namespace {

const char* GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

// One writer: a plain load and store, no locked instruction.
void Bump(std::atomic<int64_t>& a) {
  a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

RlsMetrics::RlsMetrics(int threads) {
  for (int i = 0; i < threads; ++i) blocks_.push_back(std::make_unique<Block>(this));
}

void RlsMetrics::Block::CountRequest(int grpc_code, int overall_code) {
  if (grpc_code >= 0 && grpc_code <= 16) Bump(requests_by_code_[grpc_code]);
  if (grpc_code == 0 && overall_code >= 0 && overall_code <= 2) Bump(ok_by_overall_[overall_code]);
}

void RlsMetrics::Block::CountOutcomes(std::string_view domain,
                                      const std::vector<RlsCall::Outcome>& outcomes) {
  if (outcomes.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const RlsCall::Outcome& o : outcomes) {
    auto it = series_.find(SeriesView{domain, o.metric});
    if (it == series_.end()) {
      if (metrics_->series_.fetch_add(1, std::memory_order_relaxed) >= kMaxSeries) {
        metrics_->series_.fetch_sub(1, std::memory_order_relaxed);
        ++dropped_;
        continue;
      }
      it = series_.try_emplace(SeriesKey{std::string(domain), std::string(o.metric)}).first;
    }
    if (o.code == rls::Code::kOverLimit) {
      ++it->second.over_limit;
    } else if (o.shadow_over) {
      ++it->second.shadow_over_limit;
    } else {
      ++it->second.ok;
    }
  }
}

void RlsMetrics::Render(std::string* out) const {
  std::array<int64_t, 17> by_code{};
  std::array<int64_t, 3> by_overall{};
  std::map<std::pair<std::string, std::string>, Block::Outcomes> series;  // sorted
  int64_t dropped = 0;
  for (const auto& b : blocks_) {
    for (size_t i = 0; i < by_code.size(); ++i) {
      by_code[i] += b->requests_by_code_[i].load(std::memory_order_relaxed);
    }
    for (size_t i = 0; i < by_overall.size(); ++i) {
      by_overall[i] += b->ok_by_overall_[i].load(std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> lock(b->mu_);
    for (const auto& [key, o] : b->series_) {
      Block::Outcomes& sum = series[{key.domain, key.descriptor}];
      sum.ok += o.ok;
      sum.over_limit += o.over_limit;
      sum.shadow_over_limit += o.shadow_over_limit;
    }
    dropped += b->dropped_;
  }
  AppendMetricHeader(out, "floodgate_grpc_requests_total", "counter",
                     "ShouldRateLimit calls by gRPC status code and, for OK, overall_code.");
  static constexpr const char* kOverall[] = {"UNKNOWN", "OK", "OVER_LIMIT"};
  for (int overall = 1; overall <= 2; ++overall) {
    AppendMetricSample(out, "floodgate_grpc_requests_total",
                       "code=\"OK\",overall_code=\"" + std::string(kOverall[overall]) + "\"",
                       by_overall[overall]);
  }
  for (int code = 1; code <= 16; ++code) {
    const int64_t n = by_code[code];
    // The common error codes always show, the others once they occur.
    if (n == 0 && code != 3 && code != 8 && code != 13 && code != 14) continue;
    AppendMetricSample(out, "floodgate_grpc_requests_total",
                       "code=\"" + std::string(GrpcCodeName(code)) + "\",overall_code=\"\"", n);
  }
  AppendMetricHeader(out, "floodgate_envoy_descriptor_decisions_total", "counter",
                     "Envoy descriptors that matched a limit, by domain, descriptor (as "
                     "envoyproxy/ratelimit names its stats) and outcome.");
  for (const auto& [key, o] : series) {
    const std::string labels =
        "domain=\"" + EscapeLabel(key.first) + "\",descriptor=\"" + EscapeLabel(key.second) + "\"";
    constexpr std::string_view kName = "floodgate_envoy_descriptor_decisions_total";
    AppendMetricSample(out, kName, labels + ",outcome=\"ok\"", o.ok);
    AppendMetricSample(out, kName, labels + ",outcome=\"over_limit\"", o.over_limit);
    AppendMetricSample(out, kName, labels + ",outcome=\"shadow_over_limit\"", o.shadow_over_limit);
  }
  AppendMetric(out, "floodgate_envoy_descriptor_series_dropped_total", "counter",
               "Descriptor outcomes not shown above: more than 10000 series.", dropped);
}

}  // namespace floodgate::server
