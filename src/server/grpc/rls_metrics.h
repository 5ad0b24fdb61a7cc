// RlsMetrics: the gRPC front's counters, one block per thread answering
// calls, summed when /metrics is rendered: ShouldRateLimit calls by gRPC
// status and overall code (floodgate_grpc_requests_total), and descriptor
// outcomes by domain and descriptor
// (floodgate_envoy_descriptor_decisions_total, past kMaxSeries distinct
// series floodgate_envoy_descriptor_series_dropped_total).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "server/grpc/rls_service.h"

namespace floodgate::server {

// Thread-safe: each block is written by its own thread, Render reads them
// all from any thread.
class RlsMetrics {
 public:
  // Distinct (domain, descriptor) series kept; detailed_metric can name one
  // per value, so past this they are counted as dropped. The bound is on the
  // blocks' tables together (a series two threads saw counts twice).
  static constexpr size_t kMaxSeries = 10'000;

  // One thread's counters. Not thread-safe for writing: its thread only.
  // Takes no lock another writer takes: only Render contends for its mutex.
  class Block {
   public:
    explicit Block(RlsMetrics* metrics) : metrics_(metrics) {}
    // A call answered with gRPC status `grpc_code` (0..16) and, for OK, the
    // overall code (rls::Code).
    void CountRequest(int grpc_code, int overall_code);
    // The descriptor outcomes of one answered call.
    void CountOutcomes(std::string_view domain, const std::vector<RlsCall::Outcome>& outcomes);

   private:
    friend class RlsMetrics;
    struct Outcomes {
      int64_t ok = 0, over_limit = 0, shadow_over_limit = 0;
    };
    struct SeriesKey {
      std::string domain, descriptor;
    };
    struct SeriesView {
      std::string_view domain, descriptor;
    };
    // Looks a series up by views: no key is built for a series already kept.
    struct SeriesHash {
      using is_transparent = void;
      size_t operator()(const SeriesView& v) const { return absl::HashOf(v.domain, v.descriptor); }
      size_t operator()(const SeriesKey& k) const {
        return (*this)(SeriesView{k.domain, k.descriptor});
      }
    };
    struct SeriesEq {
      using is_transparent = void;
      static SeriesView View(const SeriesKey& k) { return {k.domain, k.descriptor}; }
      static SeriesView View(const SeriesView& v) { return v; }
      template <typename A, typename B>
      bool operator()(const A& a, const B& b) const {
        return View(a).domain == View(b).domain && View(a).descriptor == View(b).descriptor;
      }
    };

    RlsMetrics* const metrics_;
    // By gRPC status code (0..16) and, for OK, by overall code. Written by
    // the block's thread only (load and store, no read-modify-write).
    std::array<std::atomic<int64_t>, 17> requests_by_code_{};
    std::array<std::atomic<int64_t>, 3> ok_by_overall_{};
    mutable std::mutex mu_;
    absl::flat_hash_map<SeriesKey, Outcomes, SeriesHash, SeriesEq> series_ ABSL_GUARDED_BY(mu_);
    int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  };

  explicit RlsMetrics(int threads);

  Block& block(int thread) { return *blocks_[thread]; }

  // Appends the counters in the Prometheus text format.
  void Render(std::string* out) const;

 private:
  std::vector<std::unique_ptr<Block>> blocks_;
  std::atomic<size_t> series_{0};  // entries of every block's table
};

}  // namespace floodgate::server
