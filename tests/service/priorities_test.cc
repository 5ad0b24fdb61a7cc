// Priority classes (Rule::priorities) and the charge view on the embedded
// store: each class is denied once its share of the limit is used, all
// classes count on one state, an unknown class is an error, the counts per
// class are kept; a charge counts past the limit (debt) on every algorithm
// that counts, and the subject is denied until the debt is covered.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/open_services.h"
#include "service/limiter/blocking.h"
#include "service/limiter/variant_views.h"
#include "service/services.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::LimiterCore;
using testing::MakeConfig;
using testing::MakeServices;

const char* kRules = R"(
rules:
  api:
    algorithm: fixed_window
    limits: [10/minute]
    tiers: { pro: [20/minute] }
    priorities: { critical: 0%, default: 20%, batch: 40% }
  plain: { algorithm: fixed_window, limits: [5/minute] }
  bucket:
    algorithm: token_bucket
    limits: [10/minute]
    priorities: { batch: 50% }
  cell:
    algorithm: gcra
    limits: [10/minute]
    priorities: { batch: 50% }
  sliding: { algorithm: sliding_window, limits: [10/minute], priorities: { batch: 50% } }
  log: { algorithm: sliding_log, limits: [10/minute], priorities: { batch: 50% } }
)";

Decision CheckOf(LimiterCore& core, std::string_view rule, std::string_view key,
                 std::string_view priority, int64_t cost = 1, std::string_view tier = {}) {
  LimiterCore::CheckArgs args{rule, key, cost, tier};
  args.priority = priority;
  Decision d;
  const Status s = core.CheckAndWait(args, &d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return d;
}

int Admitted(LimiterCore& core, std::string_view rule, std::string_view key,
             std::string_view priority, int tries) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += CheckOf(core, rule, key, priority).allowed ? 1 : 0;
  return n;
}

TEST(PrioritiesTest, EachClassStopsAtItsShareAndAllCountOnOneState) {
  ManualClock clock(600'000);
  auto s = MakeServices(MakeConfig(kRules), clock);
  LimiterCore& core = *s->core;
  // batch keeps 4 of 10 back: 6; then default (2 kept) gets 2 more; then
  // critical the last 2.
  EXPECT_EQ(Admitted(core, "api", "k", "batch", 20), 6);
  EXPECT_EQ(Admitted(core, "api", "k", "", 20), 2);
  EXPECT_EQ(Admitted(core, "api", "k", "default", 5), 0);
  EXPECT_EQ(Admitted(core, "api", "k", "critical", 20), 2);
  // A class's decision reports the class's limit.
  const Decision batch = CheckOf(core, "api", "k", "batch");
  EXPECT_FALSE(batch.allowed);
  EXPECT_EQ(batch.limit, 6);
  EXPECT_GT(batch.retry_after_ms, 0);
  const Decision critical = CheckOf(core, "api", "k", "critical", 0);
  EXPECT_EQ(critical.limit, 10);
  EXPECT_EQ(critical.remaining, 0);
}

TEST(PrioritiesTest, CriticalTrafficIsAdmittedUntilTheLimitItself) {
  ManualClock clock(600'000);
  auto s = MakeServices(MakeConfig(kRules), clock);
  EXPECT_EQ(Admitted(*s->core, "api", "k", "critical", 20), 10);
  EXPECT_EQ(Admitted(*s->core, "api", "k", "batch", 5), 0);
}

TEST(PrioritiesTest, TiersKeepTheirShareOfTheirOwnLimits) {
  ManualClock clock(600'000);
  auto s = MakeServices(MakeConfig(kRules), clock);
  int n = 0;
  for (int i = 0; i < 30; ++i) n += CheckOf(*s->core, "api", "k", "batch", 1, "pro").allowed;
  EXPECT_EQ(n, 12);  // 20 - 8
}

TEST(PrioritiesTest, EveryAlgorithmThatCountsKeepsTheShare) {
  for (const char* rule : {"bucket", "cell", "sliding", "log"}) {
    SCOPED_TRACE(rule);
    ManualClock clock(600'000);
    auto s = MakeServices(MakeConfig(kRules), clock);
    EXPECT_EQ(Admitted(*s->core, rule, "k", "batch", 20), 5);
    EXPECT_EQ(Admitted(*s->core, rule, "k", "", 20), 5);
  }
}

TEST(PrioritiesTest, AnUnknownClassIsAClearErrorAndCountsNothing) {
  ManualClock clock(600'000);
  auto s = MakeServices(MakeConfig(kRules), clock);
  LimiterCore::CheckArgs args{"api", "k", 1};
  args.priority = "bulk";
  Decision d;
  Status st = s->core->CheckAndWait(args, &d);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no priority class 'bulk'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("critical, default, batch"), std::string::npos) << st.message();
  // A rule without priorities takes "default" (what no class means) alone.
  args.rule = "plain";
  args.priority = "default";
  EXPECT_TRUE(s->core->CheckAndWait(args, &d).ok());
  args.priority = "batch";
  st = s->core->CheckAndWait(args, &d);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("has no priorities"), std::string::npos) << st.message();
  EXPECT_EQ(CheckOf(*s->core, "api", "k", "critical", 0).remaining, 10);
  EXPECT_EQ(CheckOf(*s->core, "plain", "k", "", 0).remaining, 4);
}

TEST(PrioritiesTest, DecisionsAreCountedPerClassAcrossReloads) {
  ManualClock clock(600'000);
  auto s = MakeServices(MakeConfig(kRules), clock);
  Admitted(*s->core, "api", "k", "batch", 8);  // 6 admitted, 2 denied
  Admitted(*s->core, "api", "k", "", 3);       // 2 and 1
  ASSERT_TRUE(s->Reload(MakeConfig(kRules)).ok());
  Admitted(*s->core, "api", "k", "critical", 1);
  bool seen_batch = false, seen_default = false, seen_critical = false;
  for (const auto& c : s->rules->ClassStats()) {
    if (c.rule != "api") continue;
    if (c.name == "batch") {
      seen_batch = true;
      EXPECT_EQ(c.keep_percent, 40);
      EXPECT_EQ(c.admitted, 6);
      EXPECT_EQ(c.denied, 2);
    } else if (c.name == "default") {
      seen_default = true;
      EXPECT_EQ(c.admitted, 2);
      EXPECT_EQ(c.denied, 1);
    } else if (c.name == "critical") {
      seen_critical = true;
      EXPECT_EQ(c.admitted, 1);
    }
  }
  EXPECT_TRUE(seen_batch && seen_default && seen_critical);
}

TEST(PrioritiesTest, ExactUnderConcurrentClients) {
  ManualClock clock(600'000);
  const char* rules = R"(
rules:
  api:
    algorithm: fixed_window
    limits: [1000/hour]
    priorities: { critical: 0%, default: 20%, batch: 40% }
)";
  auto s = MakeServices(MakeConfig(rules), clock);
  std::atomic<int> batch{0}, others{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const bool is_batch = t % 2 == 0;
        if (CheckOf(*s->core, "api", "k", is_batch ? "batch" : "critical").allowed) {
          (is_batch ? batch : others)++;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // 32 x 60 batch checks, 32 x 60 critical: the limit is spent exactly, and
  // batch never took more than its 600.
  EXPECT_LE(batch.load(), 600);
  EXPECT_EQ(batch.load() + others.load(), 1000);
}

// The charge view: counted whatever the limit, so the subject is in debt.
TEST(ChargeTest, AnOverrunIsCountedPastTheLimitOnEveryAlgorithm) {
  const char* rules = R"(
rules:
  fixed: { algorithm: fixed_window, limits: [10/minute] }
  sliding: { algorithm: sliding_window, limits: [10/minute] }
  log: { algorithm: sliding_log, limits: [10/minute] }
  bucket: { algorithm: token_bucket, limits: [10/minute] }
  cell: { algorithm: gcra, limits: [10/minute] }
)";
  for (const char* rule : {"fixed", "sliding", "log", "bucket", "cell"}) {
    SCOPED_TRACE(rule);
    ManualClock clock(600'000);
    auto s = MakeServices(MakeConfig(rules), clock);
    LimiterCore& core = *s->core;
    EXPECT_TRUE(CheckOf(core, rule, "k", "", 8).allowed);
    std::promise<std::pair<Status, Decision>> charged;
    core.Charge({rule, "k", 7}, [&](const Status& st, const Decision& d) {
      charged.set_value({st, d});
    });
    auto [st, d] = charged.get_future().get();
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(d.allowed);
    const Decision after = CheckOf(core, rule, "k", "", 0);
    EXPECT_LE(after.remaining, 0);
    // Units past the limit, where the algorithm's remaining counts them.
    const std::string name = rule;
    if (name == "fixed" || name == "bucket") EXPECT_EQ(after.remaining, -5);
    EXPECT_FALSE(CheckOf(core, rule, "k", "", 1).allowed);
    // Covered by the window's end or the refill: admitted again.
    clock.AdvanceMs(4 * 60'000);
    EXPECT_TRUE(CheckOf(core, rule, "k", "", 1).allowed);
  }
}

TEST(ChargeTest, KeptBackRoundsUpAndChargedAnywayStaysExact) {
  ManualClock clock(0);
  auto s = MakeServices(MakeConfig(kRules), clock);
  const service::RuleEntry* entry = s->rules->Find("api");
  ASSERT_NE(entry, nullptr);
  const core::CompiledRule batch = service::KeptBack(entry->base.compiled, 25);
  EXPECT_EQ(batch.limits[0].count, 7);  // 10 - ceil(2.5)
  EXPECT_EQ(batch.kept_back, 3);
  const core::CompiledRule anyway = service::ChargedAnyway(entry->base.compiled);
  EXPECT_EQ(anyway.kept_back, core::kChargedAnyway);
  EXPECT_EQ(anyway.limits[0].count, kMaxLimitCount);
}

}  // namespace
}  // namespace floodgate
