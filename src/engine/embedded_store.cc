// EmbeddedStore: see embedded_store.h. Decisions run the core's functions
// on the entry's state under its shard lock; nothing here waits.
#include "engine/embedded_store.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "common/fixed_fields.h"
#include "core/gcra.h"
#include "core/sliding_log.h"
#include "engine/control_file.h"
#include "engine/snapshot.h"

namespace floodgate::engine {
namespace {

constexpr uint32_t kThrottleId = store::kThrottleId;  // CL.THROTTLE: one TAT per key
constexpr uint32_t kSetId = 1;
constexpr uint32_t kOtpId = 2;
constexpr uint32_t kLeaseId = 3;
constexpr uint32_t kReservationId = 4;
static_assert(kReservationId + 1 == store::kFirstRuleId);

void ReleaseSlidingLog(int64_t* state) { core::ReleaseRuleState(Algorithm::kSlidingLog, state); }
// What a sliding_log state owns: its log (the state's first word).
size_t SlidingLogBytes(const int64_t* state) {
  const auto* log = reinterpret_cast<const core::SlidingLog*>(state[0]);
  return log != nullptr ? log->HeapBytes() : 0;
}

// A sliding_log state in a snapshot: the log's bytes (length first), then
// the words after the log's pointer (the alert words) as they are.
void EncodeSlidingLog(const int64_t* state, int words, std::string* out) {
  std::string log;
  if (const auto* l = reinterpret_cast<const core::SlidingLog*>(state[0]); l != nullptr) {
    l->Encode(&log);
  }
  fixed::Put<uint32_t>(out, static_cast<uint32_t>(log.size()));
  *out += log;
  out->append(reinterpret_cast<const char*>(state + 1),
              static_cast<size_t>(words - 1) * sizeof(int64_t));
}

bool DecodeSlidingLog(std::string_view in, int words, int64_t /*now_ms*/, int64_t* state) {
  uint32_t len = 0;
  std::string_view log;
  if (words < 1 || !fixed::Get(&in, &len) || !fixed::Bytes(&in, len, &log) ||
      in.size() != static_cast<size_t>(words - 1) * sizeof(int64_t)) {
    return false;
  }
  if (len > 0) {
    std::unique_ptr<core::SlidingLog> decoded = core::SlidingLog::Decode(log, 0);
    if (decoded == nullptr) return false;
    state[0] = reinterpret_cast<int64_t>(decoded.release());
  }
  std::memcpy(state + 1, in.data(), in.size());
  return true;
}

// What a rule variant's state means, for a snapshot: entries saved under
// one config go back only under a variant with the same identity (name,
// tier, algorithm, zone, limits, alert thresholds, layout). As the Redis
// store's fingerprint, a changed limit starts its subjects afresh.
std::string RuleIdentity(const core::CompiledRule& rule) {
  std::string id = "rule|" + rule.name + '|' + rule.tier + '|' +
                   std::string(AlgorithmName(rule.algorithm)) + '|' +
                   (rule.zone ? rule.zone->name() : std::string("UTC")) + '|' +
                   std::to_string(rule.state_words);
  for (const core::LimitParams& l : rule.limits) {
    id += '|' + std::to_string(l.count) + '/' + std::to_string(l.multiplier) + 'x' +
          std::to_string(static_cast<int>(l.unit)) + '^' + std::to_string(l.capacity);
  }
  for (int j = 0; j < rule.alerts.num_thresholds; ++j) {
    id += j == 0 ? "|alerts:" : ",";
    id += std::to_string(rule.alerts.percents[j]);
  }
  return id;
}

std::vector<VariantLayout> FixedLayouts() {
  std::vector<VariantLayout> layouts(store::kFirstRuleId);
  layouts[kThrottleId].state_words = 1;  // a TAT
  layouts[kThrottleId].ages_itself = true;
  layouts[kSetId] = SetStore::Layout();
  layouts[kOtpId] = OtpStore::Layout();
  layouts[kLeaseId] = LeaseStore::Layout();
  layouts[kReservationId] = ReservationLedger::Layout();
  return layouts;
}

}  // namespace

EmbeddedStore::EmbeddedStore(const EngineConfig& config, const Clock& clock)
    : clock_(clock),
      memory_(config, FixedLayouts(), clock),
      sets_(memory_, kSetId, clock),
      otp_(memory_, kOtpId, clock),
      leases_(memory_, kLeaseId, clock),
      reservations_(memory_, kReservationId, clock) {
  identities_.resize(store::kFirstRuleId);
  identities_[kThrottleId] = "throttle|1";
  identities_[kSetId] = "set|1";
  identities_[kOtpId] = "otp|1";
  identities_[kLeaseId] = "lease|1";
  identities_[kReservationId] = "reservation|1";
}

Result<std::string> EmbeddedStore::Describe(const core::CompiledRule& rule, uint32_t id) {
  VariantLayout layout;
  // A concurrency rule has no state of its own (its leases are LeaseStore's
  // tables) and is never checked: a word that stays zero keeps the ids in
  // step.
  layout.state_words = std::max(1, rule.state_words);
  layout.ages_itself = true;  // every algorithm's state does (see VariantLayout)
  if (rule.algorithm == Algorithm::kSlidingLog) {
    layout.release = &ReleaseSlidingLog;
    layout.owned_bytes = &SlidingLogBytes;
    layout.encode = &EncodeSlidingLog;
    layout.decode = &DecodeSlidingLog;
  }
  auto added = memory_.AddVariant(layout);
  if (!added.ok()) return added.status();
  if (*added != id) return InternalError("variant ids out of step with the store");
  std::lock_guard<std::mutex> lock(identities_mu_);
  if (identities_.size() <= id) identities_.resize(id + 1);
  // A concurrency rule's variant holds nothing (its leases are the lease
  // variant's): nothing to save.
  if (rule.algorithm != Algorithm::kConcurrency) identities_[id] = RuleIdentity(rule);
  return std::string();
}

store::Answer EmbeddedStore::Check(const store::CheckOp& op, Decision* decision, Status* status,
                                   store::CheckLater, store::Batch*) {
  // With a million subjects the entry's table slot is a cache miss, the
  // largest cost of a decision: start it before reading the clock, which
  // then overlaps it (see MemoryStore::Prefetch).
  const MemoryStore::PreparedKey key =
      op.prefetched != 0 ? MemoryStore::PreparedKey{op.variant.id, op.subject, op.prefetched}
                         : memory_.Prepare(op.variant.id, op.subject);
  const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms
                         : op.read_ms > 0    ? op.read_ms
                                             : clock_.NowMs();
  const core::CompiledRule& rule = *op.variant.rule;
  if (op.alerts == nullptr) {
    Status s = memory_.Update(key, now_ms, [&](int64_t* state, bool, core::MemoryRoom* room) {
      return core::EvaluateRule(rule, state, now_ms, op.cost, decision, room);
    });
    // OK onto OK (nearly every decision) moves no message.
    if (!s.ok() || !status->ok()) [[unlikely]] {
      *status = std::move(s);
    }
  } else {
    // The alert bits are decided under the same lock as the count; the
    // caller emits the events after, outside it.
    *status = memory_.Update(key, now_ms, [&](int64_t* state, bool, core::MemoryRoom* room) {
      return core::EvaluateRuleWithAlerts(rule, state, now_ms, op.cost, decision, op.alerts, room);
    });
    op.alerts->at_ms = now_ms;
  }
  return store::Answer::kNow;
}

size_t EmbeddedStore::Prefetch(uint32_t id, std::string_view subject) {
  return memory_.Prefetch(id, subject);
}

std::unique_ptr<store::Batch> EmbeddedStore::NewBatch(int) {
  return std::make_unique<store::ImmediateBatch>();
}

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
  *status = memory_.Update(prepared, now_ms, [&](int64_t* state, bool, core::MemoryRoom*) {
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

store::Answer EmbeddedStore::Reset(const store::ResetOp& op, Status* status, store::Later<>) {
  for (uint32_t id : op.ids) memory_.Erase(id, op.subject);
  *status = Status::Ok();
  return store::Answer::kNow;
}

store::Answer EmbeddedStore::Refund(const store::RefundOp& op, core::RefundResult* result,
                                    Status* status, store::Later<core::RefundResult>) {
  const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
  const core::CompiledRule& rule = *op.variant.rule;
  // An absent entry runs on a zero state, which a refund leaves zero: the
  // peek's expiry is then 0, so Update creates nothing, and is OK even in a
  // full store. An existing entry gets the peek's expiry, never later than
  // the one it had (an expired one's state counts nothing: it is freed).
  // A refund only ever shrinks what a state owns: it claims nothing.
  *status = memory_.Update(op.variant.id, op.subject, now_ms,
                           [&](int64_t* state, bool, core::MemoryRoom*) {
                             return core::RefundRuleAndPeek(rule, state, now_ms, op.cost, result);
                           });
  return store::Answer::kNow;
}

EmbeddedStore::Usage EmbeddedStore::GetUsage() const {
  const MemoryStore::Stats s = memory_.GetStats();
  return Usage{.kind = "memory",
               .entries = s.entries,
               .rejected_full = s.rejected_full,
               .expired_freed = s.expired_freed,
               .bytes = s.bytes};
}

store::Rooms EmbeddedStore::RoomsOf(std::unique_ptr<EmbeddedStore> store) {
  store::Rooms rooms;
  rooms.backend = store.get();
  rooms.leases = &store->leases_;
  rooms.sets = &store->sets_;
  rooms.otp = &store->otp_;
  rooms.reservations = &store->reservations_;
  rooms.snapshots = store.get();
  // The records are the control plane's own, in memory and in
  // options.data_dir when set (engine/control_file.h): nothing of the
  // store's is needed to open them.
  rooms.control = [](const store::ControlStoreOptions& options)
      -> Result<std::unique_ptr<store::ControlStore>> {
    auto opened = LocalControlStore::Open(options.data_dir);
    if (!opened.ok()) return opened.status();
    return std::unique_ptr<store::ControlStore>(std::move(*opened));
  };
  rooms.store = std::move(store);
  return rooms;
}

std::vector<std::string> EmbeddedStore::Identities() const {
  std::lock_guard<std::mutex> lock(identities_mu_);
  return identities_;
}

Result<store::StateFigures> EmbeddedStore::Save(const std::string& path) {
  return WriteSnapshot(memory_, Identities(), path, clock_.NowMs());
}

Result<store::StateFigures> EmbeddedStore::Load(const std::string& path) {
  return LoadSnapshot(memory_, Identities(), path, clock_.NowMs());
}

}  // namespace floodgate::engine
