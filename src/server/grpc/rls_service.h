// Envoy's RateLimitService answered on floodgate's Limiter: a
// ShouldRateLimit call (protocol/grpc/rls_messages.h) matched against the
// Envoy rules (service/envoy/envoy_rules.h), each matched limit decided by the
// Limiter, and the answer built as envoyproxy/ratelimit builds it.
//
// Answers: unknown domains and unmatched descriptors are OK, with no limit.
// `unlimited` is OK and never counted; `replaces` drops the named limits
// from the request; `shadow_mode` counts but always answers OK. A decision
// made by a rule's fallback policy (on_backend_error, on_store_full) is
// named in a "floodgate-fallback" header ("backend_error", "store_full"),
// and the answer then has no RateLimit-* headers (their figures would be
// made up).
//
// Counting: over-limit requests are not counted (envoyproxy/ratelimit's
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, always on): a denied decision
// consumes nothing, and when a request has several limited descriptors they
// are first checked without consuming; if any is over its limit, none is
// counted. Each check is atomic on its own subject; two concurrent requests
// sharing one descriptor can still both pass the first check and one be
// denied in the second, after its other descriptors were counted.
//
// Decisions go through LimiterCore::CheckAsync, into the caller's batch
// when it has one: the same calls the RESP and HTTP fronts make, so
// decisions of many calls to a remote store travel together.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"
#include "protocol/grpc/rls_messages.h"
#include "service/envoy/envoy_rules.h"
#include "service/limiter/limiter_core.h"
#include "store/store.h"

namespace floodgate::server {

// The Envoy rules in force and the Limiter deciding them: what every thread
// answering ShouldRateLimit shares. Thread-safe. `limiter` and `clock`
// (the limiter's) must outlive it.
class RlsService {
 public:
  RlsService(service::LimiterCore* limiter, const Clock& clock)
      : limiter_(limiter), clock_(clock) {}

  // Publishes new rules; calls already matched finish with the old ones.
  void SetRules(std::shared_ptr<const envoy::Rules> rules);
  std::shared_ptr<const envoy::Rules> rules() const;

  service::LimiterCore& limiter() const { return *limiter_; }
  const Clock& clock() const { return clock_; }

 private:
  service::LimiterCore* const limiter_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const envoy::Rules> rules_ ABSL_GUARDED_BY(mu_);
};

// One ShouldRateLimit call being decided, in at most two rounds of Limiter
// decisions (a check round, then a count round: see the file comment).
// Reusable: Start begins the next call, keeping the storage of the last.
//
// Not thread-safe: its owner's thread calls Start and Continue. A store's
// answers may arrive on another thread; the call then asks its owner to go
// on (Owner::Resume), and the owner calls Continue on its own thread.
class RlsCall {
 public:
  class Owner {
   public:
    // Every answer of `call`'s current round has arrived, the last one on
    // the thread calling this: a store's I/O thread, or the owner's own
    // (inside store::Batch::Flush, which may answer decisions it holds).
    // Thread-safe; the owner queues the call and calls Continue later, on
    // its own thread, never from inside Resume. Not called for a round
    // whose answers all came before Start or Continue returned.
    virtual void Resume(RlsCall* call) = 0;

   protected:
    ~Owner() = default;
  };

  // `owner` must outlive the call (null: only for a store that answers
  // every decision inline, the embedded one).
  explicit RlsCall(Owner* owner) : owner_(owner) {}
  RlsCall(const RlsCall&) = delete;
  RlsCall& operator=(const RlsCall&) = delete;

  // Starts deciding `request` with `service`'s rules. True: decided (see
  // status() and response()); false: waiting for the store, and
  // Owner::Resume will come. The request's views are read only here.
  // Decisions for a remote store go into `batch` if given (its owner
  // flushes it), else straight to the store.
  bool Start(RlsService& service, const rls::Request& request, store::Batch* batch);
  // After Owner::Resume, on the owner's thread: the next round, or the
  // answer. Returns as Start does.
  bool Continue(store::Batch* batch);

  // --- Once decided ---

  // OK, or the error the call fails with: INVALID_ARGUMENT for no domain or
  // no descriptors (envoyproxy/ratelimit's messages), the Limiter's error
  // for a decision it could not make. The response is empty then.
  const Status& status() const { return status_; }
  const rls::Response& response() const { return response_; }
  // The fallback policy that decided request descriptor `i` (kNone: the
  // store counted, or the Limiter was not asked).
  Fallback fallback(size_t i) const { return fallbacks_[i]; }
  // One per descriptor that matched a limit (other than unlimited), for
  // metrics. Views into the call, valid until the next Start.
  struct Outcome {
    std::string_view metric;  // as envoyproxy/ratelimit names its stats
    rls::Code code;
    bool shadow_over = false;  // over the limit, answered OK by shadow_mode
  };
  const std::vector<Outcome>& outcomes() const { return outcomes_; }
  const std::string& domain() const { return domain_; }

 private:
  // A descriptor the Limiter decides.
  struct Item {
    size_t index = 0;  // into the request's descriptors
    const envoy::MatchedLimit* limit = nullptr;
    std::string key;
    int64_t hits = 0;
    std::string_view priority;  // the descriptor's `priority` entry (a class), or empty
    Status status;              // of the Limiter call
    Decision decision;
  };
  Item& AddItem();
  // The entries descriptor i is matched and keyed by: its own, or without
  // its `priority` entry (stripped_).
  const std::vector<DescriptorEntry>& Entries(const rls::Request& request, size_t i) const;
  // Issues the current round; true when every answer came inline.
  bool Issue(store::Batch* batch);
  // The current round is complete: on to the next, or the answer.
  bool Advance(store::Batch* batch);
  void Finish(bool peek);

  Owner* const owner_;
  service::LimiterCore* limiter_ = nullptr;
  std::shared_ptr<const envoy::Rules> rules_;  // keeps the items' `limit` valid
  std::string domain_;
  int64_t now_ms_ = 0;
  bool peek_ = false;          // the current round is the check round
  bool locally_over_ = false;  // a non-shadow descriptor is over without the Limiter
  std::atomic<int> pending_{0};
  // Per request descriptor:
  std::vector<const envoy::MatchedLimit*> matched_;
  // A descriptor's entries less its `priority` entry, when it has one
  // (matched and keyed without it: the class is not part of the subject).
  std::vector<std::vector<DescriptorEntry>> stripped_;
  std::vector<std::string_view> priorities_;
  std::vector<std::string> metrics_;
  std::vector<Fallback> fallbacks_;
  std::vector<size_t> local_;  // descriptors decided without the Limiter (zero limits)
  std::vector<std::string_view> replaced_;
  // items_[0, num_items_) are this call's; the rest keep their storage.
  std::vector<Item> items_;
  size_t num_items_ = 0;
  Status status_;
  rls::Response response_;
  std::vector<Outcome> outcomes_;
};

}  // namespace floodgate::server
