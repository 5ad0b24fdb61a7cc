// check_request: the arguments of a rate-limit check as they arrive over
// HTTP — a JSON body (POST /v1/check) or query parameters (GET /v1/check, for
// nginx auth_request and similar hooks) — decoded and validated, with a clear
// detail sentence for the 400 answer when they are wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::http {

struct CheckRequest {
  std::string rule;
  std::string key;
  std::string tier;  // "" = the rule's default limits
  int64_t cost = 1;
  // Held up to this long when it would be denied but could be admitted
  // within it (0: answered at once).
  int64_t wait_ms = 0;
  // The status of a denial: 429, or 401/403 for gateway hooks that only
  // understand those (nginx auth_request). A query parameter (GET, or a
  // POST's query) or a body field.
  int deny_status = 429;
  // Whether the request names the key: a rule with a key template builds
  // it from the request when it does not (docs/keys-from-requests.md).
  bool key_given = true;
  std::string priority;  // the rule's priority class; "" = "default"
};

inline constexpr int64_t kMaxCheckCost = 1'000'000'000'000'000;  // 10^15
inline constexpr size_t kMaxCheckKeyBytes = 512;
inline constexpr int64_t kMaxCheckWaitMs = 300'000;  // LimiterCore::kMaxWaitMs

// Decodes {"rule":"api","key":"user:42","cost":1,"tier":"pro","wait_ms":500}.
// "rule" is a required non-empty string; "key", when present, a non-empty
// string of at most 512 bytes (absent: key_given false);
// "cost" an integer in [0, 10^15] (1 when absent or null); "tier" a string
// (absent, null or "" for none); "priority" likewise; "wait_ms" an integer in [0, 300000] (0 when
// absent or null); "deny_status" 401, 403 or 429 (429 when absent or null). Unknown and repeated
// fields are errors, as is anything that is not a JSON object. Returns true and fills *out, or
// false with *error. Syntax errors carry nlohmann's byte position (counted from 1; one past the end
// when the body stops early).
//
// Parsing stops at the first problem, in document order, and any nested
// object or array is already a problem (every field is a scalar), so nesting
// never goes deeper than one level and no document tree is built: the cost is
// one pass over the body, whose size the request parser bounds.
bool DecodeCheckRequestJson(std::string_view body, CheckRequest* out, std::string* error);

// Decodes "rule=api&key=user%3A42&cost=1&tier=pro" (percent-decoded, '+' as
// space) with the same rules (key may be left out); cost must be decimal digits. Also reads
// "deny_status=401|403|429" and "wait_ms".
bool DecodeCheckRequestQuery(std::string_view query, CheckRequest* out, std::string* error);

// A POST check's query, after its body was decoded into *out: it may hold
// deny_status alone (an nginx or Envoy hook that adds it to a URL whose
// body the caller builds). Anything else there is an error, not ignored; a
// deny_status that disagrees with the body's is one too.
bool DecodeDenyStatusQuery(std::string_view query, CheckRequest* out, std::string* error);

}  // namespace floodgate::http
