// The visibility section (config/visibility_section.h) and redact_keys:
// their values and defaults, and each mistake named.
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"

namespace floodgate {
namespace {

TEST(VisibilityConfigTest, KeysAndDefaults) {
  auto c = ParseConfig("rules: { api: { limits: [1/s] } }\n", "t.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->visibility.top_subjects);
  EXPECT_EQ(c->visibility.top_capacity, 256);
  EXPECT_EQ(c->visibility.denied_log_interval_ms, 60'000);
  EXPECT_EQ(c->visibility.publish_interval_ms, 5'000);
  EXPECT_FALSE(c->redact_keys);
  c = ParseConfig(
      "redact_keys: true\n"
      "visibility: { top_subjects: off, top_capacity: 50, denied_log_interval: off, "
      "publish_interval: 2s }\n",
      "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->redact_keys);
  EXPECT_FALSE(c->visibility.top_subjects);
  EXPECT_EQ(c->visibility.top_capacity, 50);
  EXPECT_EQ(c->visibility.denied_log_interval_ms, 0);
  EXPECT_EQ(c->visibility.publish_interval_ms, 2'000);
}

TEST(VisibilityConfigTest, BadValuesAreNamed) {
  struct Case {
    const char* yaml;
    const char* needle;
  } cases[] = {
      {"visibility: { top_capacity: 5 }\n",
       "'visibility.top_capacity' must be an integer between 10 and 65536"},
      {"visibility: { publish_interval: 10 }\n",
       "'visibility.publish_interval' must be a number and a unit"},
      {"visibility: { publish_interval: 50ms }\n", "must be from 100ms to 10m"},
      {"visibility: { top: 3 }\n", "unknown key 'top' in visibility; expected top_subjects"},
      {"visibility: [1]\n", "visibility"},
      {"redact_keys: maybe\n", "'redact_keys' must be true or false"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseConfig(c.yaml, "t.yaml");
    ASSERT_FALSE(parsed.ok()) << c.yaml;
    EXPECT_NE(parsed.status().message().find(c.needle), std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace floodgate
