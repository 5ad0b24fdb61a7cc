// The config tests' two questions about a YAML text: the config it parses
// to (a refusal is a test failure), and the message it is refused with; a
// limit written briefly for their expectations; and SPEC.md's example,
// which both the parser's and the summary's tests read.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "floodgate/config.h"

namespace floodgate::testing {

inline Config Parse(std::string_view yaml) {
  Result<Config> r = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *std::move(r) : Config{};
}

// The error message of a config that must be refused; "(accepted)" if not.
inline std::string Error(std::string_view yaml) {
  Result<Config> r = ParseConfig(yaml, "test.yaml");
  if (r.ok()) return "(accepted)";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// The example of SPEC.md, verbatim.
inline constexpr char kSpecExample[] =
    R"yaml(store: memory                  # or redis://host:port, redis+cluster://h1:p1,h2:p2, redis+proxy://host:port
listen: { http: 127.0.0.1:8080, resp: 127.0.0.1:6479, grpc: 127.0.0.1:8081 }
rules:
  api:
    algorithm: sliding_window
    limits: [60/minute, 5000/day]
    tiers: { pro: [600/minute, 100000/day] }
    on_backend_error: allow
    alerts: { thresholds: [80, 100], webhook: "http://127.0.0.1:9000/quota" }
  otp_issue: { algorithm: sliding_log, limits: [3/5m] }
otp: { digits: 6, ttl: 5m, issue_limit: 3/5m, verify_limit: 5/15m, secret_env: FG_OTP_SECRET }
envoy_ratelimit: [/etc/ratelimit/config.yaml]   # envoyproxy/ratelimit YAML files, served over gRPC
)yaml";

inline Limit L(int64_t count, int64_t multiplier, TimeUnit unit) {
  return Limit{count, multiplier, unit};
}

}  // namespace floodgate::testing
