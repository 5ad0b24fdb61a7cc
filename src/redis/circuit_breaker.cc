// The per-node circuit breaker. See circuit_breaker.h.
#include "redis/circuit_breaker.h"

namespace floodgate::redis {

CircuitBreaker::CircuitBreaker(int failure_threshold, int64_t open_ns,
                               std::atomic<int64_t>* open_gauge,
                               std::atomic<uint64_t>* open_counter)
    : failure_threshold_(failure_threshold < 1 ? 1 : failure_threshold),
      open_ns_(open_ns),
      open_gauge_(open_gauge),
      open_counter_(open_counter) {}

CircuitBreaker::~CircuitBreaker() {
  if (state_.load() != State::kClosed && open_gauge_ != nullptr) open_gauge_->fetch_sub(1);
}

void CircuitBreaker::RecordSuccess() {
  // Only a probe closes an open circuit: a late reply to a request sent
  // before it opened says little about the node now.
  if (failures_.load(std::memory_order_relaxed) != 0) failures_.store(0, std::memory_order_relaxed);
}

bool CircuitBreaker::RecordFailure(int64_t now_ns) {
  if (state_.load(std::memory_order_acquire) != State::kClosed) return false;
  if (failures_.fetch_add(1, std::memory_order_relaxed) + 1 < failure_threshold_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) != State::kClosed) return false;
  OpenLocked(now_ns);
  if (open_gauge_ != nullptr) open_gauge_->fetch_add(1);
  if (open_counter_ != nullptr) open_counter_->fetch_add(1, std::memory_order_relaxed);
  return true;
}

void CircuitBreaker::OpenLocked(int64_t now_ns) {
  probe_at_ns_ = now_ns + open_ns_;
  failures_.store(0, std::memory_order_relaxed);
  state_.store(State::kOpen, std::memory_order_release);
}

bool CircuitBreaker::TryStartProbe(int64_t now_ns) {
  if (state_.load(std::memory_order_acquire) != State::kOpen) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) != State::kOpen || now_ns < probe_at_ns_) {
    return false;
  }
  state_.store(State::kHalfOpen, std::memory_order_release);
  return true;
}

bool CircuitBreaker::ProbeSucceeded() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) != State::kHalfOpen) return false;
  failures_.store(0, std::memory_order_relaxed);
  state_.store(State::kClosed, std::memory_order_release);
  if (open_gauge_ != nullptr) open_gauge_->fetch_sub(1);
  return true;
}

void CircuitBreaker::ProbeFailed(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) != State::kHalfOpen) return;
  OpenLocked(now_ns);
}

int64_t CircuitBreaker::probe_at_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return probe_at_ns_;
}

}  // namespace floodgate::redis
