// The top subjects merged across servers through a real Redis: one Zipf
// stream of 1,000,000 events over 100,000 subjects split at random between
// two servers, each publishing its sketches to the board and reading the
// other's, gives the same top 10 as one server seeing the whole stream,
// each count within its reported error of the truth.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/clock.h"
#include "server/http/visibility.h"
#include "service/top/top_subjects.h"
#include "testing/redis_server.h"
#include "testing/test_config.h"
#include "testing/zipf.h"

namespace floodgate::server {
namespace {

using service::TopBy;
using service::TopEntry;
using service::TopWindow;

TEST(TopThroughRedisTest, TwoServersMergedMatchOneSeeingBoth) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock(1'700'000'000'000);
  const Config config = testing::MakeConfig("store: " + redis.url() +
                                            "\nredis: { timeout_ms: 5000 }\n"
                                            "rules: { api: { limits: [1/second] } }\n");
  auto core_a = testing::MakeServices(config, clock);
  auto core_b = testing::MakeServices(config, clock);
  ASSERT_NE(core_a, nullptr);
  ASSERT_NE(core_b, nullptr);
  Visibility a(config.visibility, false, core_a.get(), 2);
  Visibility b(config.visibility, false, core_b.get(), 2);
  service::TopSubjects both;

  const std::vector<uint32_t> stream = testing::ZipfStream(1'000'000, 100'000, 1.1, 7);
  const int64_t end = clock.NowMs();
  const int64_t start = end - 50 * 60'000;  // the last 50 minutes
  absl::flat_hash_map<std::string, int64_t> truth;
  std::mt19937_64 split(3);
  for (size_t i = 0; i < stream.size(); ++i) {
    const std::string key = "user:" + std::to_string(stream[i]);
    const int64_t at = start + static_cast<int64_t>(i) * 3;
    // As a loop records (loop 0's queue), drained as the recorder's
    // thread would when the queue fills.
    Visibility& server = split() & 1 ? a : b;
    server.recorder()->Record(0, "api", key, 1, true, at);
    if (i % 4096 == 0) server.recorder()->Drain();
    both.Record("api", key, 1, true, at);
    ++truth[key];
  }
  EXPECT_EQ(a.recorder()->dropped() + b.recorder()->dropped(), 0);
  // Each publishes; then a reads b's.
  a.Exchange(end);
  b.Exchange(end);
  a.Exchange(end);
  EXPECT_EQ(a.Servers(), 2u);
  const std::vector<TopEntry> merged = a.Top("api", TopBy::kDenied, TopWindow::k1h, 10, end);
  const std::vector<TopEntry> one = both.Query("api", TopBy::kDenied, TopWindow::k1h, 10, end);
  ASSERT_EQ(merged.size(), 10u);
  std::vector<std::string> got, want, exact;
  for (const TopEntry& e : merged) got.push_back(e.key);
  for (const TopEntry& e : one) want.push_back(e.key);
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [k, c] : truth) ranked.emplace_back(-c, k);
  std::sort(ranked.begin(), ranked.end());
  for (size_t i = 0; i < 10; ++i) exact.push_back(ranked[i].second);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  std::sort(exact.begin(), exact.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, exact);
  // Within the documented bound: units / 128 (the published and the
  // window sketches' capacity).
  for (const TopEntry& e : merged) {
    const int64_t t = truth[e.key];
    EXPECT_LE(e.count - e.error, t) << e.key;
    EXPECT_GE(e.count, t) << e.key;
    EXPECT_LE(e.error, 1'000'000 / 128) << e.key;
  }
}

}  // namespace
}  // namespace floodgate::server
