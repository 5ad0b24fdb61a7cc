// RuleSeries: one event loop's decisions of one rule per second, over the
// last kSeriesSeconds, for GET /v1/admin/stats and the dashboard's charts;
// a concurrency rule's acquisitions, granted or refused.
//
// One writer (the loop that owns it), any number of readers: a reader may
// see a second being started over (its counts momentarily behind), never a
// count from another second. Reads are for display, not accounting; the
// totals are floodgate_decisions_total's.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace floodgate::server {

inline constexpr int kSeriesSeconds = 900;  // 15 minutes

// A concurrency rule decides no rate and a rate rule grants no lease: a
// concurrency rule's acquisitions are counted in the same slots.
enum class SeriesOutcome : uint8_t {
  kAdmitted,
  kDenied,
  kShadowDenied,
  kAcquired = kAdmitted,
  kRefused = kDenied,
};
inline constexpr int kNumSeriesOutcomes = 3;

class RuleSeries {
 public:
  // Counts one decision made in unix second `now_s`. The owning loop only.
  void Add(int64_t now_s, SeriesOutcome outcome) {
    const size_t slot = Slot(now_s);
    if (second_[slot].load(std::memory_order_relaxed) != now_s) {
      // A slot last used kSeriesSeconds (or more) ago: start it over. The
      // counts are cleared before the second is published, so a reader
      // that sees the new second sees no old count.
      second_[slot].store(-1, std::memory_order_relaxed);
      for (auto& counts : counts_) counts[slot].store(0, std::memory_order_relaxed);
      second_[slot].store(now_s, std::memory_order_release);
    }
    auto& c = counts_[static_cast<int>(outcome)][slot];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // The count of `outcome` in unix second `s` (0 when the slot holds
  // another second). Any thread.
  int64_t At(int64_t s, SeriesOutcome outcome) const {
    const size_t slot = Slot(s);
    if (second_[slot].load(std::memory_order_acquire) != s) return 0;
    const int64_t n = counts_[static_cast<int>(outcome)][slot].load(std::memory_order_relaxed);
    // Started over for a later second meanwhile: not this second's count.
    return second_[slot].load(std::memory_order_acquire) == s ? n : 0;
  }

 private:
  static size_t Slot(int64_t s) {
    return static_cast<size_t>(((s % kSeriesSeconds) + kSeriesSeconds) % kSeriesSeconds);
  }
  std::array<std::atomic<int64_t>, kSeriesSeconds> second_{};
  std::array<std::array<std::atomic<int64_t>, kSeriesSeconds>, kNumSeriesOutcomes> counts_{};
};

}  // namespace floodgate::server
