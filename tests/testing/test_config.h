// Configs and limiters for tests: a YAML text parsed (a failure is a test
// failure) with the background sweep off, so that only the test moves
// time and frees entries; and every room (service::Services) on the store
// it names.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "api/open_services.h"
#include "floodgate/config.h"
#include "service/services.h"

namespace floodgate::testing {

inline Config MakeConfig(const std::string& yaml) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;
  return config;
}

inline std::unique_ptr<service::Services> MakeServices(const Config& config, const Clock& clock) {
  auto services = api::OpenServices(config, clock);
  EXPECT_TRUE(services.ok()) << services.status().ToString();
  return services.ok() ? std::move(*services) : nullptr;
}

}  // namespace floodgate::testing
