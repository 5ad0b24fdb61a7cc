// The config tests' two questions about a YAML text: the config it parses
// to (a refusal is a test failure), and the message it is refused with; and
// a limit written briefly for their expectations.
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

inline Limit L(int64_t count, int64_t multiplier, TimeUnit unit) {
  return Limit{count, multiplier, unit};
}

}  // namespace floodgate::testing
