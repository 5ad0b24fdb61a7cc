// Limiter: the public API's errors, tiers, reset, expiry of every state, the
// store bound, and exactness under concurrency.
#include "floodgate/limiter.h"
#include "testing/test_config.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

using testing::MakeConfig;

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

// A state past its expiry that no sweep has freed yet is not reset on access
// (VariantLayout::ages_itself): the algorithms read time from the state, so
// it must decide exactly as a fresh one would.
TEST(LimiterTest, AnExpiredStateNotYetSweptDecidesExactlyAsAFreshOne) {
  const char* yaml = R"(
rules:
  fw: { algorithm: fixed_window, limits: [2/s] }
  sw: { algorithm: sliding_window, limits: [2/s] }
  sl: { algorithm: sliding_log, limits: [2/s] }
  tb: { algorithm: token_bucket, limits: [2/s] }
  gc: { algorithm: gcra, limits: [2/s] }
)";
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(yaml), clock);
  const int64_t t0 = 1'700'000'000'000;
  const int64_t later = t0 + 10'000;  // long past every state's expiry
  auto same = [](const Decision& a, const Decision& b) {
    EXPECT_EQ(a.allowed, b.allowed);
    EXPECT_EQ(a.remaining, b.remaining);
    EXPECT_EQ(a.retry_after_ms, b.retry_after_ms);
    EXPECT_EQ(a.reset_after_ms, b.reset_after_ms);
  };
  for (const char* rule : {"fw", "sw", "sl", "tb", "gc"}) {
    SCOPED_TRACE(rule);
    Decision d;
    for (const char* key : {"old", "old2"}) {
      for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE((clock.SetMs(t0), limiter)->Check(rule, key, 1, "", &d).ok());
        EXPECT_TRUE(d.allowed);
      }
      ASSERT_TRUE((clock.SetMs(t0), limiter)->Check(rule, key, 1, "", &d).ok());
      EXPECT_FALSE(d.allowed);
    }

    // Later, the expired subjects answer exactly as ones never seen: a peek,
    // then the whole limit at once, then one more.
    Decision old_d, new_d;
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "old", 0, "", &old_d).ok());
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "new", 0, "", &new_d).ok());
    same(old_d, new_d);
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "old2", 2, "", &old_d).ok());
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "new2", 2, "", &new_d).ok());
    EXPECT_TRUE(new_d.allowed);
    same(old_d, new_d);
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "old2", 1, "", &old_d).ok());
    ASSERT_TRUE((clock.SetMs(later), limiter)->Check(rule, "new2", 1, "", &new_d).ok());
    EXPECT_FALSE(new_d.allowed);
    same(old_d, new_d);
  }
}

TEST(LimiterTest, PeeksAndDenialsOnNewSubjectsStoreNothing) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  EXPECT_TRUE(limiter->Check("api", "peek", 0)->allowed);
  EXPECT_FALSE(limiter->Check("api", "huge", 4)->allowed);
  EXPECT_EQ(limiter->GetStats().entries, 0);
}

TEST(LimiterTest, FullStoreDecidesNewSubjectsByOnStoreFullButServesKnownOnes) {
  Config config = MakeConfig(kRules);
  config.engine.max_entries = 10;
  ManualClock clock(0);
  auto limiter = MakeLimiter(config, clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter->Check("login", "k" + std::to_string(i)).ok());
  auto refused = limiter->Check("login", "new");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_FALSE(refused->allowed);  // on_store_full: deny, the default
  EXPECT_EQ(refused->fallback, Fallback::kStoreFull);
  EXPECT_EQ(limiter->GetStats().rejected_full, 1);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 1);
  auto known = limiter->Check("login", "k3");
  ASSERT_TRUE(known.ok());
  EXPECT_EQ(known->fallback, Fallback::kNone);
  clock.AdvanceMs(5'000);
  // Expired entries stop counting once swept (the background sweep runs
  // every engine.sweep_interval_ms; this test drives it by hand).
  EXPECT_EQ(limiter->SweepExpired(), 10);
  auto later = limiter->Check("login", "new");
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->allowed);
  EXPECT_EQ(later->fallback, Fallback::kNone);
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

namespace floodgate {
namespace {

TEST(LimiterReloadTest, UnchangedRulesKeepStateChangedOnesStartFresh) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(R"(
rules:
  keep: { algorithm: fixed_window, limits: [3/minute] }
  change: { algorithm: fixed_window, limits: [3/minute] }
  gone: { algorithm: fixed_window, limits: [3/minute] }
)"),
                             clock);
  for (const char* rule : {"keep", "change", "gone"}) {
    ASSERT_EQ(limiter->Check(rule, "u", 2)->remaining, 1) << rule;
  }
  Config next = MakeConfig(R"(
rules:
  keep: { algorithm: fixed_window, limits: [3/minute], shadow: true }
  change: { algorithm: fixed_window, limits: [5/minute] }
  added: { algorithm: gcra, limits: [1/s] }
)");
  ASSERT_TRUE(limiter->Reload(next).ok());
  EXPECT_EQ(limiter->Check("keep", "u")->remaining, 0);    // state kept
  EXPECT_EQ(limiter->Check("change", "u")->remaining, 4);  // new definition: fresh
  EXPECT_TRUE(limiter->Check("added", "u")->allowed);
  EXPECT_EQ(limiter->Check("gone", "u").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(limiter->config().rules.size(), 3u);
  // Back to the first definition of "change": its old state is still there.
  ASSERT_TRUE(limiter
                  ->Reload(MakeConfig(R"(
rules:
  change: { algorithm: fixed_window, limits: [3/minute] }
)"))
                  .ok());
  EXPECT_EQ(limiter->Check("change", "u")->remaining, 0);
}

TEST(LimiterReloadTest, InvalidConfigChangesNothing) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  limiter->Check("login", "u");
  // Built by hand: the config parser already refuses such a rule, and
  // Reload must refuse it too for callers that build configs themselves.
  Config bad = MakeConfig(R"(
rules:
  ok: { algorithm: fixed_window, limits: [3/minute] }
)");
  Rule broken;
  broken.name = "broken";
  broken.algorithm = Algorithm::kGcra;
  broken.limits.push_back(Limit{100'000'000, 1, TimeUnit::kMillisecond});
  bad.rules.push_back(broken);
  const Status s = limiter->Reload(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("broken"), std::string::npos) << s.message();
  EXPECT_EQ(limiter->Check("ok", "u").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(limiter->Check("login", "u")->remaining, 0);  // old rules and state serve on
}

TEST(LimiterReloadTest, ReloadWhileCheckingFromOtherThreads) {
  ManualClock clock(1'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        auto d = limiter->Check("api", "k" + std::to_string(clock.NowMs() % 100));
        if (!d.ok()) ++errors;
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(limiter
                    ->Reload(MakeConfig(i % 2 ? kRules : R"(
rules:
  api: { algorithm: sliding_log, limits: [7/minute] }
)"))
                    .ok());
    clock.AdvanceMs(1);
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST(LimiterThrottleTest, RedisCellTableInSecondsAsClThrottleReportsIt) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig("rules: {}\n"), clock);
  struct Step {
    int64_t offset_ms, quantity;
    bool limited;
    int64_t remaining, retry_s, reset_s;
  };
  // redis-cell's it_rate_limits (max_burst 4, 1 per second), rounded to
  // whole seconds as CL.THROTTLE replies: up when a millisecond or more is cut.
  const Step steps[] = {
      {0, 6, true, 5, -1, 0},     {0, 1, false, 4, -1, 1},    {0, 1, false, 3, -1, 2},
      {0, 1, false, 2, -1, 3},    {0, 1, false, 1, -1, 4},    {0, 1, false, 0, -1, 5},
      {0, 1, true, 0, 1, 5},      {3000, 1, false, 2, -1, 3}, {3100, 1, false, 1, -1, 4},
      {4000, 1, false, 1, -1, 4}, {8000, 1, false, 4, -1, 1}, {9500, 1, false, 4, -1, 1},
      {9500, 0, false, 4, -1, 1}, {9500, 2, false, 2, -1, 3}, {9500, 5, true, 2, 3, 3}};
  const int64_t start = clock.NowMs();
  for (size_t i = 0; i < std::size(steps); ++i) {
    SCOPED_TRACE(i);
    clock.SetMs(start + steps[i].offset_ms);
    auto r = limiter->Throttle("cell", 4, 1, 1, steps[i].quantity);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->limited, steps[i].limited);
    EXPECT_EQ(r->limit, 5);
    EXPECT_EQ(r->remaining, steps[i].remaining);
    EXPECT_EQ(r->retry_after_s, steps[i].retry_s);
    EXPECT_EQ(r->reset_after_s, steps[i].reset_s);
  }
}

TEST(LimiterThrottleTest, SubSecondFiguresRoundUpFromOneMillisecond) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig("rules: {}\n"), clock);
  // 3 per second, no burst: T = 333333 us.
  auto first = limiter->Throttle("k", 0, 3, 1, 1);
  EXPECT_EQ(first->reset_after_s, 1);  // 0.333 s rounds up
  auto denied = limiter->Throttle("k", 0, 3, 1, 1);
  EXPECT_TRUE(denied->limited);
  EXPECT_EQ(denied->retry_after_s, 1);
  clock.SetMs(334);
  EXPECT_FALSE(limiter->Throttle("k", 0, 3, 1, 1)->limited);
}

TEST(LimiterThrottleTest, BadArgumentsAreClearErrors) {
  ManualClock clock(0);
  auto limiter = MakeLimiter(MakeConfig("rules: {}\n"), clock);
  auto expect = [&](Result<Limiter::ThrottleResult> r, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect(limiter->Throttle("k", -1, 1, 1, 1), "max_burst");
  expect(limiter->Throttle("k", 0, 0, 1, 1), "count");
  expect(limiter->Throttle("k", 0, 1, 0, 1), "period");
  expect(limiter->Throttle("k", 0, 1, 1, -1), "quantity");
  expect(limiter->Throttle("k", 0, 10'000'000, 1, 1), "rate too high");
  expect(limiter->Throttle("", 0, 1, 1, 1), "key");
  EXPECT_EQ(limiter->GetStats().entries, 0);
}

}  // namespace
}  // namespace floodgate
