// TopRecorder: see top_recorder.h.
#include "server/observability/top_recorder.h"

#include <chrono>

namespace floodgate::server {

TopRecorder::TopRecorder(service::TopSubjects* top, int loops) : top_(top) {
  for (int i = 0; i < std::max(1, loops); ++i) {
    queues_.push_back(std::make_unique<Queue>(static_cast<uint64_t>(i) + 1));
  }
  thread_ = std::thread([this] { Run(); });
}

TopRecorder::~TopRecorder() { Stop(); }

void TopRecorder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TopRecorder::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_one();
}

void TopRecorder::Run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(kDrainEveryMs),
                   [&] { return stopping_ || wake_; });
      if (stopping_) return;
      wake_ = false;
    }
    Drain();
  }
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
