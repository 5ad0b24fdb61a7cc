// TopRecorder: takes the loops' decisions to the top-subjects sketch off
// the loops' threads. A loop only appends the decision to a queue of its
// own (a lock no other loop takes, two appends, no allocation once warm);
// a thread of the recorder's moves the queues into TopSubjects when one
// holds kWakeAt decisions, or every kDrainEveryMs (an idle server's thread
// sleeps), where the sketch's work (a hash lookup, often an eviction
// and a heap step: ~125 ns on a key of the long tail) is done. Under load a
// loop queues a sample of its decisions, each weighted by the decisions it
// stands for (top_sampler.h): the sketch's cost stops growing with the
// load, and so does its share of a decision's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/thread_stopper.h"
#include "server/observability/top_sampler.h"
#include "service/top/top_subjects.h"

namespace floodgate::server {

// Thread-safe: Record from its loop's thread, the rest from any.
class TopRecorder {
 public:
  static constexpr int64_t kDrainEveryMs = 250;
  // Decisions queued by one loop that wake the thread to drain at once.
  static constexpr size_t kWakeAt = 4096;
  // Decisions one loop may have queued; past it they are dropped (counted):
  // the recorder fell behind (it drains far faster than a loop decides).
  static constexpr size_t kMaxQueued = 1 << 16;
  static constexpr size_t kMaxQueuedBytes = 4 << 20;  // their rules' and keys' bytes

  TopRecorder(service::TopSubjects* top, int loops);
  ~TopRecorder();  // Stop()
  TopRecorder(const TopRecorder&) = delete;
  TopRecorder& operator=(const TopRecorder&) = delete;

  // On loop `loop`'s thread: `units` of `key` on `rule`, denied or not, at
  // now_ms, for the sketch.
  void Record(int loop, std::string_view rule, std::string_view key, int64_t units, bool denied,
              int64_t now_ms) {
    Queue& q = *queues_[static_cast<size_t>(loop)];
    const int64_t weight = q.sampler.Weigh(now_ms);
    if (weight == 0) {
      q.skipped.store(q.sampler.skipped(), std::memory_order_relaxed);
      return;
    }
    if (weight > 1) units = units > INT64_MAX / weight ? INT64_MAX : units * weight;
    std::lock_guard<std::mutex> lock(q.mu);
    if (q.events.size() >= kMaxQueued || q.bytes.size() >= kMaxQueuedBytes) {
      ++q.dropped;
      return;
    }
    q.events.push_back(Event{static_cast<uint32_t>(rule.size()), static_cast<uint32_t>(key.size()),
                             units, now_ms, denied});
    q.bytes.append(rule);
    q.bytes.append(key);
    if (q.events.size() == kWakeAt) Wake();
  }

  // Moves what every loop queued into the sketch now (a query does, so
  // that it sees every decision made before it).
  void Drain();
  // Stops the thread (what is queued stays). Idempotent.
  void Stop();
  // Decisions dropped because a queue was full.
  int64_t dropped() const;
  // Decisions moved into the sketch so far.
  int64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  // Decisions the loops made under load that no sample counted: each is
  // stood for by one that was (top_sampler.h).
  int64_t skipped() const;

 private:
  struct Event {
    uint32_t rule_size, key_size;
    int64_t units, now_ms;
    bool denied;
  };
  struct alignas(64) Queue {
    explicit Queue(uint64_t seed) : sampler(seed) {}
    TopSampler sampler;               // the loop's thread alone
    std::atomic<int64_t> skipped{0};  // sampler.skipped(), for any thread
    std::mutex mu;
    std::vector<Event> events ABSL_GUARDED_BY(mu);
    std::string bytes ABSL_GUARDED_BY(mu);  // each event's rule then key, in order
    int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  };
  void Run();
  void Wake();

  service::TopSubjects* const top_;
  std::vector<std::unique_ptr<Queue>> queues_;
  // One drain at a time; its buffers, swapped with a queue's to empty it
  // without copying or freeing.
  std::mutex drain_mu_;
  std::vector<Event> drained_events_ ABSL_GUARDED_BY(drain_mu_);
  std::string drained_bytes_ ABSL_GUARDED_BY(drain_mu_);

  std::atomic<int64_t> recorded_{0};
  ThreadStopper drainer_;
};

}  // namespace floodgate::server
