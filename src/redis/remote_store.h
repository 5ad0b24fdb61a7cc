// RemoteStore: the store (store/store.h) on Redis, a Cluster or Twemproxy.
// Decisions go to the algorithm scripts (RedisStore), several of one rule
// in one script call where the deployment allows; sets, OTP, the leases of
// concurrency rules, the reservations and the alert log to their own
// scripts; denials may be answered from a local cache of subjects known to
// be over their limit (redis.local_cache); the control plane's records to
// their own script (RedisControlStore).
//
// Opened as store::Rooms (RoomsOf): the store is its own Backend (its
// client's I/O, health and nodes); the sets, OTP, leases and reservations
// are its members redis::SetStore, OtpStore, LeaseStore and
// ReservationLedger, on its client; the alert log (AlertStream), the
// control records (RedisControlStore) and the sketch board
// (RedisSketchBoard) open on its client too. It has no Snapshots:
// Redis keeps the state beyond the process.
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
#include "redis/reservation_ledger.h"
#include "redis/set_store.h"
#include "store/backend.h"
#include "store/rooms.h"
#include "store/store.h"

namespace floodgate::redis {

// Thread-safe.
class RemoteStore final : public store::Store, public store::Backend {
 public:
  // Connects (lazily) to `url` with `config`'s settings. INVALID_ARGUMENT
  // for bad settings. `clock` must outlive the store.
  static Result<std::unique_ptr<RemoteStore>> Create(const StoreUrl& url, const RedisConfig& config,
                                                     const Clock& clock);
  // The store with its rooms (store/rooms.h), which own it.
  static store::Rooms RoomsOf(std::unique_ptr<RemoteStore> store);
  ~RemoteStore() override;

  // --- store::Store ---
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
  int64_t SweepExpired(int64_t) override { return 0; }  // Redis expires its own keys
  // Backend errors count the lease and ledger calls' too (LeaseStore::errors,
  // ReservationLedger::errors).
  Usage GetUsage() const override;
  std::vector<store::Metric> Metrics() const override;

  // --- store::Backend: the client's ---
  Status BlockingAllowed() const override;
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver() override;
  Status Health() const override;
  std::vector<store::NodeHealth> ProbeNodes() override;

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
  ReservationLedger reservations_;
  std::unique_ptr<LocalDenyCache> deny_cache_;  // null when disabled
  const int64_t timeout_ns_;
  std::atomic<int64_t> backend_errors_{0};
  std::atomic<int64_t> held_timeouts_{0};
  std::atomic<int64_t> local_cache_denials_{0};
};

}  // namespace floodgate::redis
