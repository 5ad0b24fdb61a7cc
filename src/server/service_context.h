// ServiceContext: what request handlers of every protocol share: the
// limiter, metrics, the access token and server facts for INFO/healthz.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/clock.h"
#include "server/metrics.h"
#include "service/limiter_core.h"
#include "store/store.h"

namespace floodgate::server {

// Thread-safe (every member is, or is immutable after start).
struct ServiceContext {
  service::LimiterCore* limiter = nullptr;
  Metrics* metrics = nullptr;
  // Empty: no authentication. Else RESP AUTH / HTTP "Bearer" must match.
  std::string auth_token;
  int64_t started_at_ms = 0;
  int threads = 1;
  std::string version = "0.1.0";
  std::string resp_address, http_address;  // as bound
  // Per loop: remote store calls sent and not answered before the loop holds
  // further decisions back to send them together (0: no bound).
  int max_store_calls_in_flight = 0;
  std::atomic<int64_t> next_client_id{1};
  // Appends connection metrics (the server's listeners) to a /metrics page.
  std::function<void(std::string*)> render_connections;
};

// Monotonic nanoseconds (CLOCK_MONOTONIC), for request latency and the
// store's deadlines.
int64_t MonotonicNs();

// What one event loop keeps for its sessions. Not thread-safe: one loop only.
class LoopContext {
 public:
  LoopContext(ServiceContext* service, int index)
      : service_(service),
        index_(index),
        batch_(service->limiter->NewBatch(service->max_store_calls_in_flight)) {}
  ServiceContext& service() { return *service_; }
  int index() const { return index_; }

  // Remote decisions of this loop's current round: handlers add to it, the
  // loop flushes it once the round's input has been handled (EndRound), so
  // the decisions of all its connections and pipelines go to the store
  // together. With store calls in flight at the bound, they wait for the
  // round in which an answer arrives.
  store::Batch* batch() { return batch_.get(); }
  void EndRound() {
    const size_t added = batch_->size() - held_;
    // The round's input has been read: what clients send from here on is
    // read in a later round (see WaitForStoreOnly). Only a batch holding
    // decisions can keep any back, so only then is the clock read.
    round_read_ns_ = batch_->size() == 0 ? 0 : MonotonicNs();
    batch_->Flush();
    held_ = batch_->size();
    few_held_ = held_ > 0 && added < kFewDecisions;
  }
  // Whether the loop should wait for the store's answers alone before
  // reading its clients again: the round left decisions held back for a
  // call in flight (they go when it is answered) and brought fewer than
  // kFewDecisions. Clients that each send one request at a time then do
  // not wake the loop once per request for nothing it can send; their
  // requests are read together when the answer comes (docs/design.md).
  // Deep pipelines bring more per round and keep being read meanwhile, so
  // that parsing them overlaps Redis's work.
  //
  // What clients send meanwhile sits unread until the answer comes (or its
  // timeout, if Redis stalls), so the decisions read in the next round
  // count the store's timeout from when this round's input had been read,
  // about the earliest their requests can have come: each is still
  // answered within timeout_ms of its arrival.
  bool WaitForStoreOnly() {
    if (few_held_) batch_->CountTimeoutFrom(round_read_ns_);
    return few_held_;
  }
  // The loop is stopping: whatever the batch holds goes to the store now
  // (whose driver then answers it), not when the batch is destroyed.
  void Stop() { batch_->FlushAll(); }

  // Cached per loop so the hot path takes no lock.
  RuleCounters* CountersFor(std::string_view rule) {
    auto it = counters_.find(absl::string_view(rule.data(), rule.size()));
    if (it != counters_.end()) return it->second;
    RuleCounters* c = service_->metrics->ForRule(rule, index_);
    counters_.emplace(std::string(rule), c);
    return c;
  }

  // Counts a decision's outcome for its rule.
  void CountDecision(std::string_view rule, const Decision& d) {
    RuleCounters* c = CountersFor(rule);
    auto bump = [](std::atomic<int64_t>& a) {
      a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    };
    if (d.shadow_denied) {
      bump(c->shadow_denied);
    } else if (d.allowed) {
      bump(c->allowed);
    } else {
      bump(c->denied);
    }
  }

 private:
  static constexpr size_t kFewDecisions = 8;

  ServiceContext* service_;
  const int index_;
  std::unique_ptr<store::Batch> batch_;
  size_t held_ = 0;  // decisions the batch held after the last round
  bool few_held_ = false;
  int64_t round_read_ns_ = 0;  // when the last round's input had been read (if it held any)
  absl::flat_hash_map<std::string, RuleCounters*> counters_;
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace floodgate::server
