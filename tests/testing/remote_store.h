// A Redis store for the tests that drive its parts directly (control
// records, leases, the top-subjects board): the local over-limit cache off,
// and one timeout for connecting and for each request. A failure is a test
// failure, and null.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/store_url.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "redis/remote_store.h"

namespace floodgate::testing {

inline std::unique_ptr<redis::RemoteStore> OpenRemoteStore(const std::string& url,
                                                           const Clock& clock, int64_t timeout_ms) {
  auto parsed = ParseStoreUrl(url);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return nullptr;
  RedisConfig config;
  config.timeout_ms = timeout_ms;
  config.connect_timeout_ms = timeout_ms;
  config.local_cache = false;
  auto store = redis::RemoteStore::Create(*parsed, config, clock);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

}  // namespace floodgate::testing
