// Otp: one-time passwords per subject (a phone number, an e-mail address),
// the service of seeds 000 and 001, on the Limiter's store (embedded or
// Redis) with the same semantics on both. Configured by the otp section:
//
//  - Issue(subject) returns a fresh code of `digits` digits from the
//    system's CSPRNG, valid for `ttl`, unless the subject was issued
//    issue_limit codes in the window (then: not issued, and when to retry).
//    With a delivery URL the code is POSTed there off the request path
//    instead of being returned.
//  - Verify(subject, code) says valid or invalid. Every verification counts
//    against verify_limit first; past it the attempt is refused before any
//    code is compared. A valid code is consumed together with the subject's
//    other codes (single use), and a success clears the attempt count. Of
//    two verifications of one code racing, exactly one is valid. An expired
//    code is invalid.
//  - Stores keep only HMAC-SHA256(secret, subject, code), compared in
//    constant time; the secret comes from the environment (secret_env).
//  - At most max_live_codes codes of a subject are valid at once; issuing
//    past it drops the oldest.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/status.h"

namespace floodgate {

struct OtpIssueResult {
  bool issued = false;
  std::string code;            // issued and no delivery URL: the code
  bool queued = false;         // issued with a delivery URL: queued for the gateway
  int64_t expires_in_ms = 0;   // issued: how long the code is valid
  int64_t retry_after_ms = 0;  // not issued: when the issue limit has room again
};

struct OtpVerifyResult {
  bool valid = false;
  bool limited = false;        // refused by the verify limit (nothing was compared)
  int64_t retry_after_ms = 0;  // limited: when an attempt has room again
};

// Thread-safe.
class Otp {
 public:
  struct Stats {
    int64_t issued = 0;
    int64_t issue_limited = 0;  // issues refused by the issue limit
    int64_t verified_valid = 0;
    int64_t verified_invalid = 0;
    int64_t verify_limited = 0;  // attempts refused by the verify limit
    int64_t backend_errors = 0;  // steps the store failed (Redis down or late)
    // The delivery hook (zero without one):
    int64_t delivered = 0;         // POSTs the gateway answered 2xx
    int64_t delivery_failed = 0;   // POSTs that failed or timed out
    int64_t delivery_dropped = 0;  // codes not queued (queue full) or left at shutdown
    int64_t delivery_queued = 0;   // waiting now (gauge)
  };

  // Whether the config has an otp section; every call below is NOT_FOUND
  // without one.
  bool enabled() const;

  // Errors: NOT_FOUND (no otp section); INVALID_ARGUMENT for an empty or too
  // long subject (kMaxKeyBytes), or a code that is not `digits` digits;
  // RESOURCE_EXHAUSTED for a new subject in a full embedded store;
  // UNAVAILABLE when the store failed or the delivery queue is full. A
  // refusal by a limit is not an error: see the results. An error changes
  // nothing (except that a verification the store failed may have counted
  // as an attempt). Block for up to two store round trips on Redis.
  Result<OtpIssueResult> Issue(std::string_view subject);
  Result<OtpVerifyResult> Verify(std::string_view subject, std::string_view code);

  // Without blocking: `done` runs exactly once, before the call returns on
  // the embedded store or for an invalid request, else on a Redis I/O
  // thread. It must be quick and must not block.
  using IssueCallback = std::function<void(const Status&, const OtpIssueResult&)>;
  using VerifyCallback = std::function<void(const Status&, const OtpVerifyResult&)>;
  void IssueAsync(std::string_view subject, IssueCallback done);
  void VerifyAsync(std::string_view subject, std::string_view code, VerifyCallback done);

  // The configured limits as text ("3/5m"), for messages.
  std::string IssueLimitText() const;
  std::string VerifyLimitText() const;

  Stats GetStats() const;

  struct Impl;
  explicit Otp(std::unique_ptr<Impl> impl);
  ~Otp();
  Otp(const Otp&) = delete;
  Otp& operator=(const Otp&) = delete;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate
