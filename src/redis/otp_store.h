// OtpStore: the OTP state of each subject on Redis: three sorted sets under
// one hash tag, fg:otp:{subject}:codes, :issues and :attempts, each step of
// store/otp_policy.h one call of src/redis/scripts/otp.lua (atomic on the
// subject; every key it writes gets its expiry in the same call). The Redis
// store's store::OtpStore (store/otp.h).
//
// Thread-safe (the Client is).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "floodgate/status.h"
#include "redis/client.h"
#include "store/otp.h"
#include "store/otp_policy.h"

namespace floodgate::redis {

// The subject's keys: codes, issues, attempts.
std::array<std::string, 3> OtpKeys(std::string_view subject);

class OtpStore final : public store::OtpStore {
 public:
  // `client` must outlive this.
  explicit OtpStore(Client& client) : client_(client) {}

  // The steps below at Redis's TIME: each always answers later.
  store::Answer Issue(std::string_view subject, std::string_view code_hash,
                      std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome* out,
                      Status* status, store::Later<OtpIssueOutcome> later) override;
  store::Answer Attempt(std::string_view subject, std::string_view event_id,
                        const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                        store::Later<OtpAttemptOutcome> later) override;
  store::Answer Consume(std::string_view subject, std::string_view code_hash, bool* consumed,
                        Status* status, store::Later<bool> later) override;

  // The steps, for a subject the caller has checked; now_ms as for SetStore.
  // Each `done` runs exactly once, on a client I/O thread (or on the
  // caller's thread when the client refuses at once). Not OK: Redis failed
  // (UNAVAILABLE, DEADLINE_EXCEEDED) or answered in an unexpected shape
  // (INTERNAL); the outcome is then empty.
  using IssueDone = absl::AnyInvocable<void(const Status& status, const OtpIssueOutcome& out)>;
  using AttemptDone = absl::AnyInvocable<void(const Status& status, const OtpAttemptOutcome& out)>;
  using ConsumeDone = absl::AnyInvocable<void(const Status& status, bool consumed)>;

  void Issue(std::string_view subject, std::string_view code_hash, std::string_view event_id,
             const OtpPolicy& policy, std::optional<int64_t> now_ms, IssueDone done);
  void Attempt(std::string_view subject, std::string_view event_id, const OtpPolicy& policy,
               std::optional<int64_t> now_ms, AttemptDone done);
  void Consume(std::string_view subject, std::string_view code_hash, std::optional<int64_t> now_ms,
               ConsumeDone done);

 private:
  Client& client_;
};

}  // namespace floodgate::redis
