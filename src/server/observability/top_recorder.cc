// TopRecorder: see top_recorder.h.
#include "server/observability/top_recorder.h"

namespace floodgate::server {

TopRecorder::TopRecorder(service::TopSubjects* top, int loops) : top_(top) {
  for (int i = 0; i < std::max(1, loops); ++i) {
    queues_.push_back(std::make_unique<Queue>(static_cast<uint64_t>(i) + 1));
  }
  drainer_.Start([this] { Run(); });
}

TopRecorder::~TopRecorder() { Stop(); }

void TopRecorder::Stop() { drainer_.Stop(); }

void TopRecorder::Wake() { drainer_.Wake(); }

void TopRecorder::Run() {
  while (drainer_.SleepFor(kDrainEveryMs * int64_t{1'000'000})) Drain();
}

void TopRecorder::Drain() {
  std::lock_guard<std::mutex> drain(drain_mu_);
  for (const auto& q : queues_) {
    {
      std::lock_guard<std::mutex> lock(q->mu);
      if (q->events.empty()) continue;
      // The drained buffers (emptied, capacity kept) become the queue's.
      q->events.swap(drained_events_);
      q->bytes.swap(drained_bytes_);
    }
    size_t at = 0;
    for (const Event& e : drained_events_) {
      const std::string_view rule(drained_bytes_.data() + at, e.rule_size);
      const std::string_view key(drained_bytes_.data() + at + e.rule_size, e.key_size);
      at += e.rule_size + e.key_size;
      top_->Record(rule, key, e.units, e.denied, e.now_ms);
    }
    recorded_.fetch_add(static_cast<int64_t>(drained_events_.size()), std::memory_order_relaxed);
    drained_events_.clear();
    drained_bytes_.clear();
  }
}

int64_t TopRecorder::skipped() const {
  int64_t n = 0;
  for (const auto& q : queues_) n += q->skipped.load(std::memory_order_relaxed);
  return n;
}

int64_t TopRecorder::dropped() const {
  int64_t n = 0;
  for (const auto& q : queues_) {
    std::lock_guard<std::mutex> lock(q->mu);
    n += q->dropped;
  }
  return n;
}

}  // namespace floodgate::server
