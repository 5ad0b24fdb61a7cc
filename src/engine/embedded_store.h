// EmbeddedStore: the store (store/store.h) in this process's memory. Every
// operation answers now; state lives in one MemoryStore: CL.THROTTLE's
// TATs, the expiring sets, the OTP subjects and the lease tables in fixed
// variants, each rule (or tier) definition in one of its own from
// store::kFirstRuleId up.
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
#include "engine/set_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "store/store.h"

namespace floodgate::engine {

// Thread-safe.
class EmbeddedStore final : public store::Store {
 public:
  // `clock` must outlive the store.
  EmbeddedStore(const EngineConfig& config, const Clock& clock);

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
  // Under the table's shard lock (engine/lease_store.h).
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
  Status BlockingAllowed() const override { return Status::Ok(); }
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver() override {
    return std::unique_ptr<LoopDriver>();
  }
  Status Health() const override { return Status::Ok(); }
  int64_t SweepExpired(int64_t now_ms) override { return memory_.SweepExpired(now_ms); }
  Usage GetUsage() const override;
  std::vector<store::Metric> Metrics() const override { return {}; }
  std::unique_ptr<store::AlertLog> NewAlertLog(const AlertLogOptions&) override { return nullptr; }
  // In memory, and in options.data_dir when set (engine/control_file.h).
  Result<std::unique_ptr<store::ControlStore>> NewControlStore(
      const store::ControlStoreOptions& options) override;
  // A snapshot of every entry (engine/snapshot.h).
  bool KeepsStateInProcess() const override { return true; }
  Result<store::StateFigures> SaveState(const std::string& path) override;
  Result<store::StateFigures> LoadState(const std::string& path) override;

 private:
  std::vector<std::string> Identities() const;

  const Clock& clock_;
  // What each variant id's state means, for snapshots: written by Describe
  // (also while serving: rules changed at run time), read by SaveState.
  mutable std::mutex identities_mu_;
  std::vector<std::string> identities_ ABSL_GUARDED_BY(identities_mu_);
  MemoryStore memory_;
  SetStore sets_;
  OtpStore otp_;
  LeaseStore leases_;
};

}  // namespace floodgate::engine
