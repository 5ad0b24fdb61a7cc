// EmbeddedStore: the store (store/store.h) in this process's memory. Every
// operation answers now; state lives in one MemoryStore: CL.THROTTLE's
// TATs, the expiring sets, the OTP subjects, the lease tables and the
// reservations in fixed variants, each rule (or tier) definition in one of
// its own from store::kFirstRuleId up.
//
// Opened as store::Rooms (RoomsOf): the store is its own Backend (no I/O,
// no nodes) and its own Snapshots (engine/snapshot.h); the sets, OTP,
// leases and reservations are its members engine::SetStore, OtpStore,
// LeaseStore and ReservationLedger; the control records open as
// engine/control_file.h. It has no alert log and
// no sketch board: its state is this process's alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"

#include "engine/lease_store.h"
#include "engine/memory_store.h"
#include "engine/otp_store.h"
#include "engine/reservation_ledger.h"
#include "engine/set_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "store/backend.h"
#include "store/rooms.h"
#include "store/snapshots.h"
#include "store/store.h"

namespace floodgate::engine {

// Thread-safe.
class EmbeddedStore final : public store::Store, public store::Backend, public store::Snapshots {
 public:
  // `clock` must outlive the store.
  EmbeddedStore(const EngineConfig& config, const Clock& clock);

  // The store with its rooms (store/rooms.h), which own it.
  static store::Rooms RoomsOf(std::unique_ptr<EmbeddedStore> store);

  // --- store::Store ---
  Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) override;
  store::Answer Check(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, store::Batch* batch) override;
  // Returns the key's hash, which a Check given it does not compute again.
  size_t Prefetch(uint32_t id, std::string_view subject) override;
  std::unique_ptr<store::Batch> NewBatch(int max_calls_in_flight) override;
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* result, Status* status,
                         store::Later<ThrottleResult> later) override;
  store::Answer Reset(const store::ResetOp& op, Status* status, store::Later<> later) override;
  // Under the entry's shard lock, as a decision; an absent entry stays absent.
  store::Answer Refund(const store::RefundOp& op, core::RefundResult* result, Status* status,
                       store::Later<core::RefundResult> later) override;
  int64_t SweepExpired(int64_t now_ms) override { return memory_.SweepExpired(now_ms); }
  Usage GetUsage() const override;
  std::vector<store::Metric> Metrics() const override { return {}; }

  // --- store::Backend: nothing runs elsewhere, nothing to probe ---
  Status BlockingAllowed() const override { return Status::Ok(); }
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver() override {
    return std::unique_ptr<LoopDriver>();
  }
  Status Health() const override { return Status::Ok(); }
  std::vector<store::NodeHealth> ProbeNodes() override { return {}; }

  // --- store::Snapshots: every entry (engine/snapshot.h) ---
  Result<store::StateFigures> Save(const std::string& path) override;
  Result<store::StateFigures> Load(const std::string& path) override;

 private:
  std::vector<std::string> Identities() const;

  const Clock& clock_;
  // What each variant id's state means, for snapshots: written by Describe
  // (also while serving: rules changed at run time), read by Save.
  mutable std::mutex identities_mu_;
  std::vector<std::string> identities_ ABSL_GUARDED_BY(identities_mu_);
  MemoryStore memory_;
  SetStore sets_;
  OtpStore otp_;
  LeaseStore leases_;
  ReservationLedger reservations_;
};

}  // namespace floodgate::engine
