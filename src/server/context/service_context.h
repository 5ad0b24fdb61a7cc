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
#include "server/observability/denied_log.h"
#include "server/observability/metrics.h"
#include "server/observability/top_recorder.h"
#include "service/limiter/limiter_core.h"
#include "service/services.h"
#include "store/store.h"

namespace floodgate::server {

class Visibility;

// Replays `log` through `rule` (and `tier`) of `config` and writes the
// answer's JSON (api/simulation.h); INVALID_ARGUMENT naming the line.
using SimulateFn =
    std::function<Status(const Config& config, std::string_view rule, std::string_view tier,
                         std::string_view log, std::string* json)>;

// Thread-safe (every member is, or is immutable after start).
struct ServiceContext {
  // Every room (service/services.h); `limiter` is its decisions' room, the
  // one most requests use.
  service::Services* services = nullptr;
  service::LimiterCore* limiter = nullptr;
  Metrics* metrics = nullptr;
  // Empty: no authentication. Else RESP AUTH / HTTP "Bearer" must match.
  std::string auth_token;
  // The control plane's tokens (server/context/admin_access.h); empty admin_token:
  // loopback clients only.
  std::string admin_token;
  std::string read_token;
  // admin.client_names: verified client certificate names that are admins.
  std::vector<std::string> admin_client_names;
  bool admin_allow_plaintext = false;  // admin.allow_plaintext
  int64_t started_at_ns = 0;           // clock().MonotonicNs() when the server started
  int threads = 1;
  std::string version;                     // as ServerOptions::version
  std::string resp_address, http_address;  // as bound
  // Per loop: remote store calls sent and not answered before the loop holds
  // further decisions back to send them together (0: no bound).
  int max_store_calls_in_flight = 0;
  std::atomic<int64_t> next_client_id{1};
  // Appends connection metrics (the server's listeners) to a /metrics page.
  std::function<void(std::string*)> render_connections;
  // The open connections per front as JSON: {"http":{"open":N,"accepted":N},…}.
  std::function<std::string()> connections_json;
  // POST /v1/admin/simulate's replay (api::SimulateToJson); null: none.
  SimulateFn simulate;
  // The largest traffic log POST /v1/admin/simulate takes (its body
  // bound, set where the HTTP parser's limits are), for the dashboard.
  size_t simulate_max_body_bytes = 0;
  // Who is being limited (docs/visibility.md); `top` null: not kept.
  Visibility* visibility = nullptr;
  TopRecorder* top = nullptr;
  DeniedLog* denied_log = nullptr;
  bool redact_keys = false;
  // Set once Server::Stop has begun the drain: /readyz answers 503 and HTTP
  // responses say "Connection: close" (docs/operations.md, "Graceful restart").
  std::atomic<bool> draining{false};

  // The server's one clock, the rooms': its decisions and the store's
  // deadlines read it, and so do the loops (their rounds' time, their
  // connections' timers), request latency and the uptime, so that every
  // part of a request reads one time.
  const Clock& clock() const { return services->clock; }
};

// What one event loop keeps for its sessions. Not thread-safe: one loop only.
class LoopContext {
 public:
  LoopContext(ServiceContext* service, int index)
      : service_(service),
        index_(index),
        batch_(service->limiter->NewBatch(service->max_store_calls_in_flight)),
        now_ms_(service->clock().NowMs()) {}
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
    round_read_ns_ = batch_->size() == 0 ? 0 : service_->clock().MonotonicNs();
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

  // A round of the loop begins: the time its decisions are counted at
  // (one clock reading per round, not per decision).
  void BeginRound() { now_ms_ = service_->clock().NowMs(); }

  // Counts a decision's outcome for its rule: the totals, the per-second
  // series, the top subjects (`cost` units of `key`) and the sampled log
  // of denials.
  void CountDecision(std::string_view rule, std::string_view key, int64_t cost, const Decision& d) {
    RuleCounters* c = CountersFor(rule);
    const int64_t now_s = now_ms_ / 1000;
    if (d.shadow_denied) {
      Bump(c->shadow_denied);
      c->series.Add(now_s, SeriesOutcome::kShadowDenied);
    } else if (d.allowed) {
      Bump(c->allowed);
      c->series.Add(now_s, SeriesOutcome::kAdmitted);
    } else {
      Bump(c->denied);
      c->series.Add(now_s, SeriesOutcome::kDenied);
    }
    const bool denied = !d.allowed || d.shadow_denied;
    if (service_->top != nullptr && cost > 0) {
      service_->top->Record(index_, rule, key, cost, denied, now_ms_);
    }
    if (denied && service_->denied_log != nullptr) {
      service_->denied_log->Denied(rule, key, d, now_ms_);
    }
  }

  // Counts an acquisition's answer for its concurrency rule, granted or
  // refused: the totals, the per-second series and the top subjects (one
  // unit of `key`). A request that waited is counted once, by its answer.
  void CountAcquire(std::string_view rule, std::string_view key, bool acquired) {
    RuleCounters* c = CountersFor(rule);
    Bump(acquired ? c->acquired : c->refused);
    c->series.Add(now_ms_ / 1000, acquired ? SeriesOutcome::kAcquired : SeriesOutcome::kRefused);
    if (service_->top != nullptr) service_->top->Record(index_, rule, key, 1, !acquired, now_ms_);
  }

 private:
  static constexpr size_t kFewDecisions = 8;

  // One loop writes a counter: no read-modify-write needed.
  static void Bump(std::atomic<int64_t>& a) {
    a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  ServiceContext* service_;
  const int index_;
  std::unique_ptr<store::Batch> batch_;
  size_t held_ = 0;  // decisions the batch held after the last round
  bool few_held_ = false;
  int64_t round_read_ns_ = 0;  // when the last round's input had been read (if it held any)
  absl::flat_hash_map<std::string, RuleCounters*> counters_;
  int64_t now_ms_;  // unix ms, read when the loop's round began
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace floodgate::server
