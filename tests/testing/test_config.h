// Configs and limiters for tests: a YAML text parsed (a failure is a test
// failure) with the background sweep off, so that only the test moves
// time and frees entries; and the LimiterCore on the store it names.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "api/open_store.h"
#include "floodgate/config.h"
#include "service/limiter_core.h"

namespace floodgate::testing {

inline Config MakeConfig(const std::string& yaml) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;
  return config;
}

inline std::unique_ptr<service::LimiterCore> MakeCore(const Config& config, const Clock& clock) {
  auto core = api::OpenLimiterCore(config, clock);
  EXPECT_TRUE(core.ok()) << core.status().ToString();
  return core.ok() ? std::move(*core) : nullptr;
}

}  // namespace floodgate::testing
