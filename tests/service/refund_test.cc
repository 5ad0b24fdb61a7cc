// LimiterCore::Refund on the embedded store (and on the fake store): units
// come back to every limit of the variant asked for, the answer is the peek
// after, arguments are checked as a decision's, and a refund never creates
// an entry, not even in a full store.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "api/open_store.h"
#include "service/limiter_core.h"
#include "testing/fake_store.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::LimiterCore;

using testing::MakeConfig;

using testing::MakeCore;

const char* kRules = R"(
rules:
  api:
    algorithm: sliding_window
    limits: [3/minute, 100/day]
    tiers: { pro: [10/minute] }
  login: { algorithm: gcra, limits: 2/s }
  upload: { algorithm: token_bucket, limits: 10/s, burst: 4 }
)";

TEST(LimiterRefundTest, GivesBackUnitsAndAnswersWithThePeekAfter) {
  ManualClock clock(600'000);
  auto core = MakeCore(MakeConfig(kRules), clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(core->CheckAndWait("api", "k")->allowed);
  EXPECT_FALSE(core->CheckAndWait("api", "k")->allowed);
  auto after = core->RefundAndWait("api", "k", 1);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->allowed);
  EXPECT_EQ(after->num_limits, 2);
  EXPECT_EQ(after->limits[0].remaining, 1);
  EXPECT_EQ(after->limits[1].remaining, 98);
  EXPECT_EQ(after->remaining, 1);  // the binding limit: the minute's
  EXPECT_EQ(after->fallback, Fallback::kNone);
  // The same figures a peek gives.
  auto peek = core->CheckAndWait("api", "k", 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->remaining, after->remaining);
  EXPECT_EQ(peek->reset_after_ms, after->reset_after_ms);
  EXPECT_TRUE(core->CheckAndWait("api", "k")->allowed);
  EXPECT_FALSE(core->CheckAndWait("api", "k")->allowed);
}

TEST(LimiterRefundTest, MoreThanWasUsedFloorsAtTheFullLimit) {
  ManualClock clock(1'000'000);
  auto core = MakeCore(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->CheckAndWait("upload", "k", 3)->allowed);
  auto after = core->RefundAndWait("upload", "k", 1'000);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->limit, 4);
  EXPECT_EQ(after->remaining, 4);          // the burst, not more
  EXPECT_EQ(core->GetStats().entries, 0);  // a full bucket holds nothing
  EXPECT_TRUE(core->CheckAndWait("upload", "k", 4)->allowed);
  EXPECT_FALSE(core->CheckAndWait("upload", "k")->allowed);
}

TEST(LimiterRefundTest, TiersHaveTheirOwnState) {
  ManualClock clock(600'000);
  auto core = MakeCore(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->CheckAndWait("api", "k", 3)->allowed);
  EXPECT_TRUE(core->CheckAndWait("api", "k", 10, "pro")->allowed);
  auto pro = core->RefundAndWait("api", "k", 4, "pro");
  ASSERT_TRUE(pro.ok());
  EXPECT_EQ(pro->remaining, 4);
  EXPECT_EQ(core->CheckAndWait("api", "k", 0)->remaining, 0);  // the rule's own limits: untouched
}

TEST(LimiterRefundTest, ASubjectWithoutStateIsLeftWithout) {
  ManualClock clock(0);
  auto core = MakeCore(MakeConfig(kRules), clock);
  auto after = core->RefundAndWait("login", "nobody", 5);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->allowed);
  EXPECT_EQ(after->remaining, 2);
  EXPECT_EQ(after->reset_after_ms, 0);
  EXPECT_EQ(core->GetStats().entries, 0);
}

TEST(LimiterRefundTest, AStateEmptiedByARefundIsFreed) {
  ManualClock clock(0);
  auto core = MakeCore(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->CheckAndWait("login", "k")->allowed);
  EXPECT_EQ(core->GetStats().entries, 1);
  auto after = core->RefundAndWait("login", "k", 1);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->remaining, 2);
  EXPECT_EQ(core->GetStats().entries, 0);
}

TEST(LimiterRefundTest, AFullStoreStillRefundsAndCreatesNothing) {
  Config config = MakeConfig(kRules);
  config.engine.max_entries = 2;
  ManualClock clock(0);
  auto core = MakeCore(config, clock);
  EXPECT_TRUE(core->CheckAndWait("api", "a")->allowed);
  EXPECT_TRUE(core->CheckAndWait("api", "b")->allowed);
  EXPECT_EQ(core->CheckAndWait("api", "c")->fallback, Fallback::kStoreFull);
  auto known = core->RefundAndWait("api", "a", 1);
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_EQ(known->remaining, 3);
  auto unknown = core->RefundAndWait("api", "c", 1);
  ASSERT_TRUE(unknown.ok()) << unknown.status().ToString();
  EXPECT_EQ(unknown->fallback, Fallback::kNone);
  EXPECT_EQ(unknown->remaining, 3);
  EXPECT_EQ(core->GetStats().entries, 1);  // "a" was emptied and freed; "c" never made
}

TEST(LimiterRefundTest, BadRequestsGetClearErrorsAndChangeNothing) {
  ManualClock clock(1'000'000);
  auto core = MakeCore(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->CheckAndWait("api", "k", 2)->allowed);
  auto expect_error = [&](Result<Decision> r, StatusCode code, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(core->RefundAndWait("nope", "k", 1), StatusCode::kNotFound, "unknown rule 'nope'");
  expect_error(core->RefundAndWait("api", "k", 1, "gold"), StatusCode::kNotFound, "no tier 'gold'");
  expect_error(core->RefundAndWait("api", "", 1), StatusCode::kInvalidArgument,
               "must not be empty");
  expect_error(core->RefundAndWait("api", std::string(513, 'x'), 1), StatusCode::kInvalidArgument,
               "513 bytes");
  expect_error(core->RefundAndWait("api", "k", 0), StatusCode::kInvalidArgument,
               "cost must be at least 1");
  expect_error(core->RefundAndWait("api", "k", -3), StatusCode::kInvalidArgument,
               "cost must be at least 1");
  expect_error(core->RefundAndWait("api", "k", kMaxLimitCount + 1), StatusCode::kInvalidArgument,
               "is above");
  EXPECT_EQ(core->CheckAndWait("api", "k", 0)->remaining, 1);
  // The largest cost is fine.
  auto most = core->RefundAndWait("api", "k", kMaxLimitCount);
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->remaining, 3);
}

TEST(LimiterRefundTest, TheCallbackFormAnswersAtOnceOnTheEmbeddedStore) {
  ManualClock clock(0);
  auto core = MakeCore(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->CheckAndWait("login", "k", 2)->allowed);
  bool answered = false;
  core->Refund("login", "k", 1, "", [&](const Status& s, const Decision& after) {
    answered = true;
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(after.remaining, 1);
  });
  EXPECT_TRUE(answered);
  answered = false;
  core->Refund("login", "k", 0, "", [&](const Status& s, const Decision&) {
    answered = true;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(answered);
}

TEST(LimiterRefundTest, AnExplicitInstant) {
  ManualClock clock(0);
  auto core = MakeCore(MakeConfig(kRules), clock);
  const int64_t t = 5'000;
  Decision d;
  ASSERT_TRUE(core->CheckAndWait({"login", "k", 2, "", &t}, &d).ok());
  EXPECT_TRUE(d.allowed);
  // The TAT is t + 1 s; 250 ms later, one unit back moves it to t + 500 ms.
  const int64_t later = t + 250;
  auto after = core->RefundAndWait({"login", "k", 1, "", &later});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->remaining, 1);
  EXPECT_EQ(after->reset_after_ms, 250);
  // At t + 400 ms, one more unit brings it to now, not below.
  const int64_t last = t + 400;
  after = core->RefundAndWait({"login", "k", 1, "", &last});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->remaining, 2);
  EXPECT_EQ(after->reset_after_ms, 0);
}

TEST(LimiterRefundTest, OnTheFakeStore) {
  ManualClock clock(0);
  auto core =
      LimiterCore::Create(MakeConfig(kRules), clock, std::make_unique<testing::FakeStore>(clock));
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_TRUE((*core)->CheckAndWait("login", "k", 2)->allowed);
  auto after = (*core)->RefundAndWait("login", "k", 1);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->remaining, 1);
  auto nobody = (*core)->RefundAndWait("login", "nobody", 1);
  ASSERT_TRUE(nobody.ok());
  EXPECT_EQ(nobody->remaining, 2);
  EXPECT_EQ((*core)->GetStats().entries, 1);  // the fake made no state for "nobody"
}

}  // namespace
}  // namespace floodgate
