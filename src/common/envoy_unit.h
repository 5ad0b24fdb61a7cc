// EnvoyUnit: the unit of an Envoy rate limit, RateLimitResponse.RateLimit.Unit
// with its wire numbers. Plain data, shared by envoyproxy/ratelimit's files
// (config/envoy_ratelimit.h), whose `rate_limit` names one, and the
// RateLimitService messages (protocol/grpc/rls_messages.h), whose answer
// carries one in a descriptor's current limit, so that neither knows the
// other and a unit passes from one to the other as it is.
#pragma once

namespace floodgate {

enum class EnvoyUnit : int {
  kUnknown = 0,
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,
  kYear = 6
};

}  // namespace floodgate
