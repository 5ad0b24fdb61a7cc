// EmbeddedStore: the store (store/store.h) in this process's memory. Every
// operation answers now; state lives in one MemoryStore: CL.THROTTLE's
// TATs, the expiring sets and the OTP subjects in fixed variants, each rule
// (or tier) definition in one of its own from kFirstRuleId up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

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
  // The first id Describe takes: the ones below hold CL.THROTTLE, the sets
  // and OTP.
  static constexpr uint32_t kFirstRuleId = 3;

  // `clock` must outlive the store.
  EmbeddedStore(const EngineConfig& config, const Clock& clock);

  Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) override;
  store::Answer Check(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, store::Batch* batch) override;
  void Prefetch(uint32_t id, std::string_view subject) override;
  std::unique_ptr<store::Batch> NewBatch(int max_calls_in_flight) override;
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* result, Status* status,
                         store::Later<ThrottleResult> later) override;
  void PrefetchThrottle(std::string_view key) override;
  store::Answer Reset(const store::ResetOp& op, Status* status, store::Later<> later) override;
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

 private:
  const Clock& clock_;
  MemoryStore memory_;
  SetStore sets_;
  OtpStore otp_;
};

}  // namespace floodgate::engine
