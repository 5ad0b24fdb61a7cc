// OtpStore: the OTP state of each subject in the embedded store: one
// MemoryStore entry per subject, of its own variant, whose state points at
// the subject's three expiring sets (codes, issues, attempts; see
// store/otp_policy.h). The entry expires with the latest of them, so a
// subject's state disappears by itself, and counts against
// engine.max_entries like any other. The embedded store's store::OtpStore
// (store/otp.h).
//
// Thread-safe: each step runs under the subject's shard lock, so steps on
// one subject are atomic with respect to each other (of two consumes of one
// code, exactly one finds it).
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"
#include "store/otp.h"
#include "store/otp_policy.h"

namespace floodgate::engine {

class OtpStore final : public store::OtpStore {
 public:
  // The layout of the OTP variant: register it with the MemoryStore.
  static VariantLayout Layout();

  // `store` and `clock` (the store's) must outlive this; `variant` was
  // registered with Layout().
  OtpStore(MemoryStore& store, uint32_t variant, const Clock& clock)
      : store_(store), variant_(variant), clock_(clock) {}

  // The steps below at the clock's now; each answers now.
  store::Answer Issue(std::string_view subject, std::string_view code_hash,
                      std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome* out,
                      Status* status, store::Later<OtpIssueOutcome> later) override;
  store::Answer Attempt(std::string_view subject, std::string_view event_id,
                        const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                        store::Later<OtpAttemptOutcome> later) override;
  store::Answer Consume(std::string_view subject, std::string_view code_hash, bool* consumed,
                        Status* status, store::Later<bool> later) override;

  // The steps of store/otp_policy.h at `now_ms`, for a subject the caller
  // has checked. `code_hash` is the code's HMAC; `event_id` names the issue
  // or attempt, unique per event. RESOURCE_EXHAUSTED when a new subject
  // does not fit in the store.
  Status Issue(std::string_view subject, std::string_view code_hash, std::string_view event_id,
               const OtpPolicy& policy, int64_t now_ms, OtpIssueOutcome* out);
  Status Attempt(std::string_view subject, std::string_view event_id, const OtpPolicy& policy,
                 int64_t now_ms, OtpAttemptOutcome* out);
  Status Consume(std::string_view subject, std::string_view code_hash, int64_t now_ms,
                 bool* consumed);

 private:
  MemoryStore& store_;
  const uint32_t variant_;
  const Clock& clock_;
};

}  // namespace floodgate::engine
