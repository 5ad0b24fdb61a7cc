// The envoy_ratelimit section (config/envoy_ratelimit_section.h): the files
// as a list or a map with options, relative paths, and each mistake's exact
// message. The files' own contents: envoy_ratelimit_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Parse;

using ::testing::ElementsAre;

TEST(ParseConfigTest, EnvoyRateLimitListOrMap) {
  Result<Config> list = ParseConfig("envoy_ratelimit: [a.yaml, /abs/b.yaml]\n", "/etc/fg/f.yaml");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_THAT(list->envoy_ratelimit.files, ElementsAre("/etc/fg/a.yaml", "/abs/b.yaml"));

  const Config map = Parse(
      "envoy_ratelimit:\n"
      "  files: rl.yaml\n"
      "  algorithm: sliding_window\n"
      "  on_backend_error: deny\n"
      "  on_store_full: allow\n"
      "  response_headers: true\n");
  EXPECT_THAT(map.envoy_ratelimit.files, ElementsAre("rl.yaml"));
  EXPECT_EQ(map.envoy_ratelimit.algorithm, Algorithm::kSlidingWindow);
  EXPECT_EQ(map.envoy_ratelimit.on_backend_error, OnBackendError::kDeny);
  EXPECT_EQ(map.envoy_ratelimit.on_store_full, OnStoreFull::kAllow);
  EXPECT_EQ(list->envoy_ratelimit.on_store_full, OnStoreFull::kDeny);
  EXPECT_TRUE(map.envoy_ratelimit.response_headers);
}

TEST(ParseConfigTest, EnvoyRateLimitErrors) {
  EXPECT_EQ(ParseConfig("envoy_ratelimit: { files: [a.yaml], algo: gcra }\n", "t.yaml")
                .status()
                .message(),
            "t.yaml:1:37: unknown key 'algo' in envoy_ratelimit; expected files, algorithm, "
            "on_backend_error, on_store_full or response_headers (near 'algo')");
  EXPECT_EQ(ParseConfig("envoy_ratelimit: { algorithm: leaky }\n", "t.yaml").status().message(),
            "t.yaml:1:31: unknown algorithm 'leaky'; expected fixed_window, sliding_window, "
            "sliding_log, token_bucket or gcra (near 'leaky')");
  EXPECT_EQ(ParseConfig("envoy_ratelimit: [[a]]\n", "t.yaml").status().message(),
            "t.yaml:1:19: each envoy_ratelimit file must be a path (near 'envoy_ratelimit')");
}

}  // namespace
}  // namespace floodgate
