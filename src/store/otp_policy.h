// What both OTP stores (embedded and Redis) are told and answer: the
// per-subject policy in store terms and the outcomes of the three steps
// (issue, attempt, consume). Plain data, shared by engine/, redis/ and
// service/ so that the two stores cannot drift apart in shape. In store/
// because that is the lowest layer all three may include: the seam between
// the OTP feature (service/otp/otp_impl.cc) and the stores that keep its state.
//
// Per subject a store keeps three expiring sets: the live codes (HMACs,
// never the codes), the issue events of the last issue period and the
// verification attempts of the last verify period. Counting live events is
// the sliding log of seed 001: "X times per Y minutes".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace floodgate {

struct OtpPolicy {
  int64_t code_ttl_ms = 300'000;
  int64_t max_live_codes = 3;
  int64_t issue_count = 3;
  int64_t issue_period_ms = 300'000;
  int64_t verify_count = 5;
  int64_t verify_period_ms = 900'000;
};

// Issue: unless the subject has issue_count issues in the last
// issue_period_ms, store the code's HMAC (dropping the oldest live codes
// beyond max_live_codes - 1) and record the issue. A code expires
// code_ttl_ms after its issue, or 1 ms after the subject's latest live code
// if that is later (codes issued in one millisecond), so expiry order is
// issue order.
struct OtpIssueOutcome {
  int64_t now_ms = 0;
  bool issued = false;
  int64_t retry_after_ms = 0;  // refused: until an issue ages out of the window
  int64_t expires_at_ms = 0;   // issued: when the code expires
};

// Attempt: unless the subject has verify_count attempts in the last
// verify_period_ms, record one and return the HMACs of the live codes, for
// the caller to compare. Refused attempts return no codes: nothing is
// compared past the limit.
struct OtpAttemptOutcome {
  int64_t now_ms = 0;
  bool allowed = false;
  int64_t retry_after_ms = 0;
  std::vector<std::string> codes;
};

// Consume: if the HMAC is still a live code, remove every code of the
// subject and its attempts (a success ends the brute-force count) and
// answer true. Of two verifications of one code, one consumes it.

}  // namespace floodgate
