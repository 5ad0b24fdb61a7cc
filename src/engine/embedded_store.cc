// EmbeddedStore: see embedded_store.h. Decisions run the core's functions
// on the entry's state under its shard lock; nothing here waits.
#include "engine/embedded_store.h"

#include "core/gcra.h"

namespace floodgate::engine {
namespace {

constexpr uint32_t kThrottleId = 0;  // CL.THROTTLE: one TAT per key
constexpr uint32_t kSetId = 1;
constexpr uint32_t kOtpId = 2;

void ReleaseSlidingLog(int64_t* state) { core::ReleaseRuleState(Algorithm::kSlidingLog, state); }

std::vector<VariantLayout> FixedLayouts() {
  std::vector<VariantLayout> layouts(EmbeddedStore::kFirstRuleId);
  layouts[kThrottleId].state_words = 1;  // a TAT
  layouts[kThrottleId].ages_itself = true;
  layouts[kSetId] = SetStore::Layout();
  layouts[kOtpId] = OtpStore::Layout();
  return layouts;
}

// Nothing is ever held back here: every answer is known at once.
class NoBatch final : public store::Batch {
 public:
  void Flush() override {}
  void FlushAll() override {}
  size_t size() const override { return 0; }
  void CountTimeoutFrom(int64_t) override {}
};

}  // namespace

EmbeddedStore::EmbeddedStore(const EngineConfig& config, const Clock& clock)
    : clock_(clock),
      memory_(config, FixedLayouts(), clock),
      sets_(memory_, kSetId),
      otp_(memory_, kOtpId) {}

Result<std::string> EmbeddedStore::Describe(const core::CompiledRule& rule, uint32_t id) {
  VariantLayout layout;
  layout.state_words = rule.state_words;
  layout.ages_itself = true;  // every algorithm's state does (see VariantLayout)
  if (rule.algorithm == Algorithm::kSlidingLog) layout.release = &ReleaseSlidingLog;
  auto added = memory_.AddVariant(layout);
  if (!added.ok()) return added.status();
  if (*added != id) return InternalError("variant ids out of step with the store");
  return std::string();
}

store::Answer EmbeddedStore::Check(const store::CheckOp& op, Decision* decision, Status* status,
                                   store::CheckLater, store::Batch*) {
  // With a million subjects the entry's table slot is a cache miss, the
  // largest cost of a decision: start it before reading the clock, which
  // then overlaps it (see MemoryStore::Prefetch).
  const MemoryStore::PreparedKey key = memory_.Prepare(op.variant.id, op.subject);
  const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms
                         : op.read_ms > 0    ? op.read_ms
                                             : clock_.NowMs();
  const core::CompiledRule& rule = *op.variant.rule;
  if (op.alerts == nullptr) {
    *status = memory_.Update(key, now_ms, [&](int64_t* state, bool /*fresh*/) {
      return core::EvaluateRule(rule, state, now_ms, op.cost, decision);
    });
  } else {
    // The alert bits are decided under the same lock as the count; the
    // caller emits the events after, outside it.
    *status = memory_.Update(key, now_ms, [&](int64_t* state, bool /*fresh*/) {
      return core::EvaluateRuleWithAlerts(rule, state, now_ms, op.cost, decision, op.alerts);
    });
    op.alerts->at_ms = now_ms;
  }
  return store::Answer::kNow;
}

void EmbeddedStore::Prefetch(uint32_t id, std::string_view subject) {
  memory_.Prefetch(id, subject);
}

std::unique_ptr<store::Batch> EmbeddedStore::NewBatch(int) { return std::make_unique<NoBatch>(); }

store::Answer EmbeddedStore::Throttle(const store::ThrottleOp& op, ThrottleResult* result,
                                      Status* status, store::Later<ThrottleResult>) {
  auto params = core::ThrottleParams(op.max_burst, op.count, op.period_s, op.quantity);
  if (!params.ok()) {
    *status = params.status();
    return store::Answer::kNow;
  }
  const core::LimitParams& p = *params;
  // As in Check: hash once and prefetch before the clock read.
  const MemoryStore::PreparedKey prepared = memory_.Prepare(kThrottleId, op.key);
  const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms
                         : op.read_ms > 0    ? op.read_ms
                                             : clock_.NowMs();
  core::GcraFigures f;
  *status = memory_.Update(prepared, now_ms, [&](int64_t* state, bool) {
    auto* gcra = reinterpret_cast<core::GcraState*>(state);
    f = core::GcraStep(p, *gcra, now_ms, op.quantity);
    return gcra->tat_us > now_ms * 1000 ? (gcra->tat_us + 999) / 1000 : 0;
  });
  if (!status->ok()) {
    // A full store: the caller decides (its figures are left unknown).
    result->limit = f.limit;
    return store::Answer::kNow;
  }
  result->limited = !f.allowed;
  result->limit = f.limit;
  result->remaining = f.remaining;
  // redis-cell reports -1 both for "not limited" and for "never".
  result->retry_after_s = f.allowed ? -1 : core::CellSeconds(f.retry_after_us);
  result->reset_after_s = core::CellSeconds(f.ttl_us);
  return store::Answer::kNow;
}

void EmbeddedStore::PrefetchThrottle(std::string_view key) { memory_.Prefetch(kThrottleId, key); }

store::Answer EmbeddedStore::Reset(const store::ResetOp& op, Status* status, store::Later<>) {
  for (uint32_t id : op.ids) memory_.Erase(id, op.subject);
  *status = Status::Ok();
  return store::Answer::kNow;
}

store::Answer EmbeddedStore::RunSet(const SetRequest& request, int64_t max_members, SetReply* reply,
                                    Status* status, store::Later<SetReply>) {
  *status = sets_.Run(request, max_members, clock_.NowMs(), reply);
  return store::Answer::kNow;
}

store::Answer EmbeddedStore::OtpIssue(std::string_view subject, std::string_view code_hash,
                                      std::string_view event_id, const OtpPolicy& policy,
                                      OtpIssueOutcome* out, Status* status,
                                      store::Later<OtpIssueOutcome>) {
  *status = otp_.Issue(subject, code_hash, event_id, policy, clock_.NowMs(), out);
  return store::Answer::kNow;
}

store::Answer EmbeddedStore::OtpAttempt(std::string_view subject, std::string_view event_id,
                                        const OtpPolicy& policy, OtpAttemptOutcome* out,
                                        Status* status, store::Later<OtpAttemptOutcome>) {
  *status = otp_.Attempt(subject, event_id, policy, clock_.NowMs(), out);
  return store::Answer::kNow;
}

store::Answer EmbeddedStore::OtpConsume(std::string_view subject, std::string_view code_hash,
                                        bool* consumed, Status* status, store::Later<bool>) {
  *status = otp_.Consume(subject, code_hash, clock_.NowMs(), consumed);
  return store::Answer::kNow;
}

EmbeddedStore::Usage EmbeddedStore::GetUsage() const {
  const MemoryStore::Stats s = memory_.GetStats();
  return Usage{s.entries, s.rejected_full, s.expired_freed, s.bytes};
}

}  // namespace floodgate::engine
