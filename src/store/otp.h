// OtpStore: where the one-time codes of each subject live (floodgate/otp.h):
// the steps of store/otp_policy.h, each one atomic step on the subject's
// state (of two consumes of one code, exactly one finds it).
//
// Apart from the decisions (store/store.h) because OTP keeps state of its
// own (codes, issues, attempts), under no rule and in no batch. Each step
// answers now or later as the decisions do (store.h: Answer, Later).
// Implemented by the embedded store's engine/otp_store.h and the Redis
// store's redis/otp_store.h.
//
// Thread-safe.
#pragma once

#include <string_view>

#include "floodgate/status.h"
#include "store/otp_policy.h"
#include "store/store.h"

namespace floodgate::store {

class OtpStore {
 public:
  virtual ~OtpStore() = default;
  // The steps of store/otp_policy.h at the store's instant, for a subject
  // checked above. `code_hash` is the code's HMAC; `event_id` names the
  // issue or attempt, unique per event. RESOURCE_EXHAUSTED when a new
  // subject does not fit in the embedded store; UNAVAILABLE /
  // DEADLINE_EXCEEDED / INTERNAL when Redis failed (the outcome is then
  // empty).
  virtual Answer Issue(std::string_view subject, std::string_view code_hash,
                       std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome* out,
                       Status* status, Later<OtpIssueOutcome> later) = 0;
  virtual Answer Attempt(std::string_view subject, std::string_view event_id,
                         const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                         Later<OtpAttemptOutcome> later) = 0;
  virtual Answer Consume(std::string_view subject, std::string_view code_hash, bool* consumed,
                         Status* status, Later<bool> later) = 0;
};

}  // namespace floodgate::store
