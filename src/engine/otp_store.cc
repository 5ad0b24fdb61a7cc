// OtpStore: see otp_store.h. The entry's one state word points at an
// OtpState (null until the subject has one).
#include "engine/otp_store.h"

#include <algorithm>
#include <memory>
#include <string>

#include "engine/expiring_set.h"

namespace floodgate::engine {
namespace {

struct OtpState {
  ExpiringSet codes;     // HMACs of the live codes
  ExpiringSet issues;    // one member per issue, living issue_period_ms
  ExpiringSet attempts;  // one member per verification attempt, living verify_period_ms

  void Prune(int64_t now_ms) {
    codes.Prune(now_ms);
    issues.Prune(now_ms);
    attempts.Prune(now_ms);
  }
  // When the last of it expires; 0 (keep nothing) when it is empty.
  int64_t Expiry() const {
    return std::max({codes.LastExpiry(), issues.LastExpiry(), attempts.LastExpiry()});
  }
};

// The OtpState's own chunk.
constexpr size_t kStateBytes = core::MallocChunkSize(sizeof(OtpState));

OtpState* StateOf(int64_t* state) { return reinterpret_cast<OtpState*>(state[0]); }

void ReleaseOtp(int64_t* state) {
  delete StateOf(state);
  state[0] = 0;
}

OtpState* Ensure(int64_t* state) {
  if (state[0] == 0) state[0] = reinterpret_cast<int64_t>(new OtpState());
  return StateOf(state);
}

// VariantLayout's owned_bytes: the OtpState and its sets' members.
size_t OtpBytes(const int64_t* state) {
  const auto* otp = reinterpret_cast<const OtpState*>(state[0]);
  if (otp == nullptr) return 0;
  return kStateBytes + otp->codes.HeapBytes() + otp->issues.HeapBytes() + otp->attempts.HeapBytes();
}

// What adding `member` to `set` (null: a set still to be made) takes.
size_t AddBytes(const ExpiringSet* set, std::string_view member) {
  return set == nullptr || set->ExpiryOf(member) == 0 ? ExpiringSet::MemberBytes(member) : 0;
}

// With `count` per window and `live` events in it, how long until one more
// fits: the (live - count)-th earliest event must age out.
int64_t RetryAfter(const ExpiringSet& events, int64_t count, int64_t now_ms) {
  const size_t live = events.size();
  const size_t index = live >= static_cast<size_t>(count) ? live - static_cast<size_t>(count) : 0;
  return std::max<int64_t>(1, events.NthExpiry(index) - now_ms);
}

// The subject's state (null: none yet), its aged-out members dropped: where
// every step starts.
OtpState* Pruned(int64_t* state, int64_t now_ms) {
  OtpState* s = StateOf(state);
  if (s != nullptr) s->Prune(now_ms);
  return s;
}

// What Update keeps of `s` (null: nothing).
int64_t Keep(const OtpState* s) { return s != nullptr ? s->Expiry() : 0; }

// Whether a counted step (an issue, an attempt) finds `events` already at
// `count`; *retry_after_ms then says when one more fits.
bool AtCount(const OtpState* s, ExpiringSet OtpState::*events, int64_t count, int64_t now_ms,
             int64_t* retry_after_ms) {
  if (s == nullptr || static_cast<int64_t>((s->*events).size()) < count) return false;
  *retry_after_ms = RetryAfter(s->*events, count, now_ms);
  return true;
}

// Claims the `bytes` a step adds to `s`, and the OtpState itself for a new
// subject, before anything changes.
bool ClaimStep(core::MemoryRoom* room, const OtpState* s, size_t bytes) {
  return core::Claim(room, (s == nullptr ? kStateBytes : 0) + bytes);
}

// A step the store has no room for (a new subject, or more codes or events
// for a known one): it did not happen (what the step wrote is reset by the
// caller), and the message says which.
Status NoRoom(const Status& s, std::string_view step, bool new_subject) {
  if (s.code() != StatusCode::kResourceExhausted) return s;
  return ResourceExhaustedError("cannot " + std::string(step) +
                                (new_subject ? " for a new OTP subject: " : ": ") + s.message());
}

// Issue's and Attempt's step on `subject`'s state at `now_ms`: *out starts
// as the empty answer at now_ms; `step(state, s, room)` runs on the pruned
// state `s` (null: a subject with nothing live) and returns the state's
// expiry, as MemoryStore::Update's callback does. A step the store
// refuses leaves *out the empty answer; NoRoom words the refusal with
// `what`.
template <typename Outcome, typename Step>
Status StepOn(MemoryStore& store, uint32_t variant, std::string_view subject, int64_t now_ms,
              std::string_view what, Outcome* out, Step step) {
  *out = Outcome{};
  out->now_ms = now_ms;
  bool new_subject = true;
  const Status s = store.Update(variant, subject, now_ms,
                                [&](int64_t* state, bool, core::MemoryRoom* room) -> int64_t {
                                  OtpState* pruned = Pruned(state, now_ms);
                                  new_subject = pruned == nullptr;
                                  return step(state, pruned, room);
                                });
  if (!s.ok()) {
    *out = Outcome{};
    out->now_ms = now_ms;
  }
  return NoRoom(s, what, new_subject);
}

// For a snapshot: the three sets, in order.
void EncodeOtp(const int64_t* state, int /*words*/, std::string* out) {
  const OtpState* otp = reinterpret_cast<const OtpState*>(state[0]);
  const OtpState empty;
  if (otp == nullptr) otp = &empty;
  otp->codes.Encode(out);
  otp->issues.Encode(out);
  otp->attempts.Encode(out);
}

bool DecodeOtp(std::string_view in, int words, int64_t now_ms, int64_t* state) {
  if (words != 1) return false;
  auto otp = std::make_unique<OtpState>();
  if (!otp->codes.Decode(&in, now_ms) || !otp->issues.Decode(&in, now_ms) ||
      !otp->attempts.Decode(&in, now_ms) || !in.empty()) {
    return false;
  }
  if (otp->Expiry() > now_ms) state[0] = reinterpret_cast<int64_t>(otp.release());
  return true;
}

}  // namespace

VariantLayout OtpStore::Layout() {
  return VariantLayout{.state_words = 1,
                       .release = &ReleaseOtp,
                       .owned_bytes = &OtpBytes,
                       .encode = &EncodeOtp,
                       .decode = &DecodeOtp};
}

store::Answer OtpStore::Issue(std::string_view subject, std::string_view code_hash,
                              std::string_view event_id, const OtpPolicy& policy,
                              OtpIssueOutcome* out, Status* status, store::Later<OtpIssueOutcome>) {
  *status = Issue(subject, code_hash, event_id, policy, clock_.NowMs(), out);
  return store::Answer::kNow;
}

store::Answer OtpStore::Attempt(std::string_view subject, std::string_view event_id,
                                const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                                store::Later<OtpAttemptOutcome>) {
  *status = Attempt(subject, event_id, policy, clock_.NowMs(), out);
  return store::Answer::kNow;
}

store::Answer OtpStore::Consume(std::string_view subject, std::string_view code_hash,
                                bool* consumed, Status* status, store::Later<bool>) {
  *status = Consume(subject, code_hash, clock_.NowMs(), consumed);
  return store::Answer::kNow;
}

Status OtpStore::Issue(std::string_view subject, std::string_view code_hash,
                       std::string_view event_id, const OtpPolicy& policy, int64_t now_ms,
                       OtpIssueOutcome* out) {
  return StepOn(
      store_, variant_, subject, now_ms, "issue a code", out,
      [&](int64_t* state, OtpState* s, core::MemoryRoom* room) -> int64_t {
        if (AtCount(s, &OtpState::issues, policy.issue_count, now_ms, &out->retry_after_ms)) {
          return Keep(s);
        }
        // Dropping the oldest code frees memory, but only after the new one
        // is known to fit.
        if (!ClaimStep(room, s,
                       AddBytes(s != nullptr ? &s->codes : nullptr, code_hash) +
                           AddBytes(s != nullptr ? &s->issues : nullptr, event_id))) {
          return Keep(s);
        }
        s = Ensure(state);
        // Room for the new code: the oldest go first (codes share one TTL, so
        // the earliest expiry is the oldest issue).
        while (static_cast<int64_t>(s->codes.size()) >= policy.max_live_codes)
          s->codes.EraseFirst();
        // Codes share one TTL, so expiry order is issue order, except for codes
        // issued in the same millisecond: a later one expires 1 ms later, so
        // that "the oldest goes first" stays exact.
        out->expires_at_ms = std::max(now_ms + policy.code_ttl_ms, s->codes.LastExpiry() + 1);
        s->codes.Upsert(code_hash, out->expires_at_ms);
        s->issues.Upsert(event_id, now_ms + policy.issue_period_ms);
        out->issued = true;
        return s->Expiry();
      });
}

Status OtpStore::Attempt(std::string_view subject, std::string_view event_id,
                         const OtpPolicy& policy, int64_t now_ms, OtpAttemptOutcome* out) {
  return StepOn(
      store_, variant_, subject, now_ms, "record a verification attempt", out,
      [&](int64_t* state, OtpState* s, core::MemoryRoom* room) -> int64_t {
        if (AtCount(s, &OtpState::attempts, policy.verify_count, now_ms, &out->retry_after_ms)) {
          return Keep(s);
        }
        if (!ClaimStep(room, s, AddBytes(s != nullptr ? &s->attempts : nullptr, event_id))) {
          return Keep(s);
        }
        // Recorded even when the subject has no code: probing costs attempts too.
        s = Ensure(state);
        s->attempts.Upsert(event_id, now_ms + policy.verify_period_ms);
        out->allowed = true;
        out->codes.reserve(s->codes.size());
        s->codes.ForEach([&](std::string_view code, int64_t) { out->codes.emplace_back(code); });
        return s->Expiry();
      });
}

Status OtpStore::Consume(std::string_view subject, std::string_view code_hash, int64_t now_ms,
                         bool* consumed) {
  *consumed = false;
  // Consuming only frees: it claims nothing.
  const Status s = store_.Update(variant_, subject, now_ms,
                                 [&](int64_t* state, bool, core::MemoryRoom*) -> int64_t {
                                   OtpState* st = Pruned(state, now_ms);
                                   if (st == nullptr) return 0;
                                   if (st->codes.ExpiryOf(code_hash) != 0) {
                                     *consumed = true;
                                     st->codes.Clear();
                                     st->attempts.Clear();
                                   }
                                   return st->Expiry();
                                 });
  // A subject the store does not hold has no code to consume: that keeps
  // nothing, which a full store does not refuse.
  return s;
}

}  // namespace floodgate::engine
