// The cryptography of one-time passwords: fresh codes from the operating
// system's CSPRNG (OpenSSL RAND_bytes), the HMAC-SHA256 under the server's
// secret that is all a store ever holds of a code, random event ids, a
// constant-time comparison; and what a code and a subject look like.
// Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "floodgate/status.h"

namespace floodgate::service {

// A uniformly random code of `digits` decimal digits (4..10), leading zeros
// included: "004217". Rejection sampling keeps every code equally likely.
// INTERNAL when the CSPRNG fails (it then returns nothing rather than a
// weak code).
Result<std::string> GenerateCode(int digits);

// HMAC-SHA256(secret, "floodgate-otp-v1" 0x00 len(subject) subject code) as
// 64 lowercase hex digits. The subject is in the MAC, so a code's HMAC for
// one subject says nothing about another's; its length is, so no two
// (subject, code) pairs share an input.
std::string CodeHmac(std::string_view secret, std::string_view subject, std::string_view code);

// 16 random hex digits: the id of one issue or verification attempt (a
// member of the subject's event sets). INTERNAL when the CSPRNG fails.
Result<std::string> RandomEventId();

// a == b, in time that depends on the lengths only (CRYPTO_memcmp).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// Whether `code` is exactly `digits` ASCII digits.
bool IsWellFormedCode(std::string_view code, int digits);

// OK for a subject of 1 to kMaxKeyBytes bytes of valid UTF-8 without
// spaces or control characters ("+15550100", "ana@example.com"); else
// INVALID_ARGUMENT saying so. Spaces are refused because "+1 555 0100" and
// "+15550100" would be two subjects with two sets of limits for one phone.
Status CheckSubject(std::string_view subject);

}  // namespace floodgate::service
