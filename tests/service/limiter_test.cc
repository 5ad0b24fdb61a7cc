// Limiter: the public API's errors, tiers, reset, expiry of every state, the
// store bound, and exactness under concurrency.
#include "floodgate/limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

Config MakeConfig(const std::string& yaml) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;
  return config;
}

std::unique_ptr<Limiter> MakeLimiter(const Config& config, const Clock& clock) {
  auto l = Limiter::Create(config, clock);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

const char* kRules = R"(
rules:
  api:
    algorithm: sliding_window
    limits: [3/minute, 100/day]
    tiers: { pro: [10/minute] }
  login: { algorithm: gcra, limits: 2/s }
)";

TEST(LimiterTest, BadRequestsGetClearErrorsAndChangeNothing) {
  ManualClock clock(1'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  auto expect_error = [&](Result<Decision> r, StatusCode code, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(limiter->Check("nope", "k"), StatusCode::kNotFound, "unknown rule 'nope'");
  expect_error(limiter->Check("api", "k", 1, "gold"), StatusCode::kNotFound, "no tier 'gold'");
  expect_error(limiter->Check("api", ""), StatusCode::kInvalidArgument, "must not be empty");
  expect_error(limiter->Check("api", std::string(513, 'x')), StatusCode::kInvalidArgument,
               "513 bytes");
  expect_error(limiter->Check("api", "k", -1), StatusCode::kInvalidArgument, "cost -1");
  expect_error(limiter->Check("api", "k", kMaxLimitCount + 1), StatusCode::kInvalidArgument,
               "out of range");
  EXPECT_EQ(limiter->GetStats().entries, 0);
  auto ok = limiter->Check("api", std::string(512, 'x'));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->remaining, 2);
}

TEST(LimiterTest, TiersHaveTheirOwnLimitsAndState) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter->Check("api", "u1")->allowed);
  EXPECT_FALSE(limiter->Check("api", "u1")->allowed);
  auto pro = limiter->Check("api", "u1", 1, "pro");
  ASSERT_TRUE(pro.ok());
  EXPECT_TRUE(pro->allowed);
  EXPECT_EQ(pro->limit, 10);
  EXPECT_EQ(pro->remaining, 9);
}

TEST(LimiterTest, ResetForgetsEveryTier) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  for (int i = 0; i < 3; ++i) limiter->Check("api", "u1");
  limiter->Check("api", "u1", 10, "pro");
  EXPECT_TRUE(limiter->Reset("api", "u1").ok());
  EXPECT_EQ(limiter->Check("api", "u1")->remaining, 2);
  EXPECT_EQ(limiter->Check("api", "u1", 1, "pro")->remaining, 9);
  EXPECT_EQ(limiter->Reset("nope", "u1").code(), StatusCode::kNotFound);
  EXPECT_TRUE(limiter->Reset("api", "never-seen").ok());
}

TEST(LimiterTest, EveryAlgorithmsStateExpiresAfterItsLongestWindow) {
  const char* yaml = R"(
rules:
  fw: { algorithm: fixed_window, limits: [5/s, 10/minute] }
  sw: { algorithm: sliding_window, limits: [5/s, 10/minute] }
  sl: { algorithm: sliding_log, limits: [5/s, 10/minute] }
  tb: { algorithm: token_bucket, limits: [5/s, 10/minute] }
  gc: { algorithm: gcra, limits: [5/s, 10/minute] }
)";
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(yaml), clock);
  for (const char* rule : {"fw", "sw", "sl", "tb", "gc"}) {
    for (int k = 0; k < 50; ++k) {
      ASSERT_TRUE(limiter->Check(rule, "key" + std::to_string(k), 1).ok());
    }
  }
  EXPECT_EQ(limiter->GetStats().entries, 250);
  // The longest window is a minute; sliding_window keeps two buckets.
  clock.AdvanceMs(2 * 60'000 + 1'000);
  EXPECT_EQ(limiter->SweepExpired(), 250);
  EXPECT_EQ(limiter->GetStats().entries, 0);
  EXPECT_EQ(limiter->GetStats().expired_freed, 250);
}

TEST(LimiterTest, PeeksAndDenialsOnNewSubjectsStoreNothing) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  EXPECT_TRUE(limiter->Check("api", "peek", 0)->allowed);
  EXPECT_FALSE(limiter->Check("api", "huge", 4)->allowed);
  EXPECT_EQ(limiter->GetStats().entries, 0);
}

TEST(LimiterTest, FullStoreRefusesNewSubjectsButServesKnownOnes) {
  Config config = MakeConfig(kRules);
  config.engine.max_entries = 10;
  ManualClock clock(0);
  auto limiter = MakeLimiter(config, clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter->Check("login", "k" + std::to_string(i)).ok());
  auto refused = limiter->Check("login", "new");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(limiter->GetStats().rejected_full, 1);
  EXPECT_TRUE(limiter->Check("login", "k3").ok());
  clock.AdvanceMs(5'000);
  // Expired entries stop counting once swept (the background sweep runs
  // every engine.sweep_interval_ms; this test drives it by hand).
  EXPECT_EQ(limiter->SweepExpired(), 10);
  EXPECT_TRUE(limiter->Check("login", "new").ok());
}

TEST(LimiterTest, ConcurrentThreadsOnOneKeyAdmitExactlyTheLimit) {
  for (const char* algorithm :
       {"fixed_window", "sliding_window", "sliding_log", "token_bucket", "gcra"}) {
    SCOPED_TRACE(algorithm);
    Config config = MakeConfig(std::string("rules:\n  hot: { algorithm: ") + algorithm +
                               ", limits: [5000/hour] }\n");
    ManualClock clock(1'700'000'000'000);  // frozen: no refill during the test
    auto limiter = MakeLimiter(config, clock);
    std::atomic<int64_t> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        int64_t mine = 0;
        for (int i = 0; i < 2'000; ++i) {
          auto d = limiter->Check("hot", "the-one-key");
          if (d.ok() && d->allowed) ++mine;
        }
        admitted += mine;
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(admitted.load(), 5000);
  }
}

}  // namespace
}  // namespace floodgate
