// RemoteStore: the store (store/store.h) on Redis, a Cluster or Twemproxy.
// Decisions go to the algorithm scripts (RedisStore), several of one rule
// in one script call where the deployment allows; sets, OTP, the leases of
// concurrency rules and the alert log to their own scripts; denials may be
// answered from a local cache of subjects known to be over their limit
// (redis.local_cache); the control plane's records to their own script
// (RedisControlStore).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/store_url.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "redis/lease_store.h"
#include "redis/local_deny_cache.h"
#include "redis/otp_store.h"
#include "redis/redis_store.h"
#include "redis/set_store.h"
#include "store/store.h"

namespace floodgate::redis {

// Thread-safe.
class RemoteStore final : public store::Store {
 public:
  // Connects (lazily) to `url` with `config`'s settings. INVALID_ARGUMENT
  // for bad settings. `clock` must outlive the store.
  static Result<std::unique_ptr<RemoteStore>> Create(const StoreUrl& url, const RedisConfig& config,
                                                     const Clock& clock);
  ~RemoteStore() override;

  Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) override;
  store::Answer Check(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, store::Batch* batch) override;
  size_t Prefetch(uint32_t, std::string_view) override { return 0; }
  std::unique_ptr<store::Batch> NewBatch(int max_calls_in_flight) override;
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* result, Status* status,
                         store::Later<ThrottleResult> later) override;
  store::Answer Reset(const store::ResetOp& op, Status* status, store::Later<> later) override;
  // One script call of its own, sent at once; forgets the subject in the
  // local over-limit cache first.
  store::Answer Refund(const store::RefundOp& op, core::RefundResult* result, Status* status,
                       store::Later<core::RefundResult> later) override;
  // One script call of its own (scripts/concurrency.lua), sent at once.
  store::Answer Lease(const store::LeaseOp& op, store::LeaseResult* result, Status* status,
                      store::Later<store::LeaseResult> later) override;
  store::Answer RunSet(const SetRequest& request, int64_t max_members, SetReply* reply,
                       Status* status, store::Later<SetReply> later) override;
  store::Answer OtpIssue(std::string_view subject, std::string_view code_hash,
                         std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome* out,
                         Status* status, store::Later<OtpIssueOutcome> later) override;
  store::Answer OtpAttempt(std::string_view subject, std::string_view event_id,
                           const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                           store::Later<OtpAttemptOutcome> later) override;
  store::Answer OtpConsume(std::string_view subject, std::string_view code_hash, bool* consumed,
                           Status* status, store::Later<bool> later) override;
  Status BlockingAllowed() const override;
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver() override;
  Status Health() const override;
  int64_t SweepExpired(int64_t) override { return 0; }  // Redis expires its own keys
  Usage GetUsage() const override;
  std::vector<store::Metric> Metrics() const override;
  std::unique_ptr<store::AlertLog> NewAlertLog(const AlertLogOptions& options) override;
  Result<std::unique_ptr<store::ControlStore>> NewControlStore(
      const store::ControlStoreOptions& options) override;

  std::unique_ptr<store::SketchBoard> NewSketchBoard() override;
  std::vector<NodeHealth> ProbeNodes() override;

  Client& client() { return redis_->client(); }

  struct Pending;  // a decision held in a batch
  class HeldBatch;

 private:
  RemoteStore(std::unique_ptr<RedisStore> redis, const RedisConfig& config, const Clock& clock);
  // Queues a decision known to need Redis (or answers it from the local
  // cache); sends the batch it went into unless `batch`.
  store::Answer Queue(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, HeldBatch* batch);

  const Clock& clock_;
  std::unique_ptr<RedisStore> redis_;
  SetStore sets_;
  OtpStore otp_;
  LeaseStore leases_;
  std::unique_ptr<LocalDenyCache> deny_cache_;  // null when disabled
  const int64_t timeout_ns_;
  std::atomic<int64_t> backend_errors_{0};
  std::atomic<int64_t> held_timeouts_{0};
  std::atomic<int64_t> local_cache_denials_{0};
};

}  // namespace floodgate::redis
