// LimiterCore::Refund on the embedded store (and on the fake store): units
// come back to every limit of the variant asked for, the answer is the peek
// after and the units each limit gave back, arguments are checked as a
// decision's, and a refund never creates an entry, not even in a full store.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "api/open_services.h"
#include "service/limiter/blocking.h"
#include "service/services.h"
#include "testing/fake_store.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::LimiterCore;

using testing::MakeConfig;

using testing::MakeServices;

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
  auto core = MakeServices(MakeConfig(kRules), clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(core->core->CheckAndWait("api", "k")->allowed);
  EXPECT_FALSE(core->core->CheckAndWait("api", "k")->allowed);
  auto refund = service::RefundAndWait(*core->core, "api", "k", 1);
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_TRUE(refund->after.allowed);
  EXPECT_EQ(refund->after.num_limits, 2);
  EXPECT_EQ(refund->after.limits[0].remaining, 1);
  EXPECT_EQ(refund->after.limits[1].remaining, 98);
  EXPECT_EQ(refund->after.remaining, 1);  // the binding limit: the minute's
  EXPECT_EQ(refund->after.fallback, Fallback::kNone);
  EXPECT_EQ(refund->refunded[0], 1);
  EXPECT_EQ(refund->refunded[1], 1);
  EXPECT_EQ(refund->most_refunded(), 1);
  // The same figures a peek gives.
  auto peek = core->core->CheckAndWait("api", "k", 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->remaining, refund->after.remaining);
  EXPECT_EQ(peek->reset_after_ms, refund->after.reset_after_ms);
  EXPECT_TRUE(core->core->CheckAndWait("api", "k")->allowed);
  EXPECT_FALSE(core->core->CheckAndWait("api", "k")->allowed);
}

TEST(LimiterRefundTest, MoreThanWasUsedFloorsAtTheFullLimit) {
  ManualClock clock(1'000'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->core->CheckAndWait("upload", "k", 3)->allowed);
  auto refund = service::RefundAndWait(*core->core, "upload", "k", 1'000);
  ASSERT_TRUE(refund.ok());
  EXPECT_EQ(refund->after.limit, 4);
  EXPECT_EQ(refund->after.remaining, 4);         // the burst, not more
  EXPECT_EQ(refund->refunded[0], 3);             // what was used, not what was asked
  EXPECT_EQ(core->core->GetStats().entries, 0);  // a full bucket holds nothing
  EXPECT_TRUE(core->core->CheckAndWait("upload", "k", 4)->allowed);
  EXPECT_FALSE(core->core->CheckAndWait("upload", "k")->allowed);
}

TEST(LimiterRefundTest, TiersHaveTheirOwnState) {
  ManualClock clock(600'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->core->CheckAndWait("api", "k", 3)->allowed);
  EXPECT_TRUE(core->core->CheckAndWait("api", "k", 10, "pro")->allowed);
  auto pro = service::RefundAndWait(*core->core, "api", "k", 4, "pro");
  ASSERT_TRUE(pro.ok());
  EXPECT_EQ(pro->after.remaining, 4);
  EXPECT_EQ(core->core->CheckAndWait("api", "k", 0)->remaining,
            0);  // the rule's own limits: untouched
}

TEST(LimiterRefundTest, ASubjectWithoutStateIsLeftWithout) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  auto refund = service::RefundAndWait(*core->core, "login", "nobody", 5);
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_TRUE(refund->after.allowed);
  EXPECT_EQ(refund->after.remaining, 2);
  EXPECT_EQ(refund->after.reset_after_ms, 0);
  EXPECT_EQ(refund->most_refunded(), 0);
  EXPECT_EQ(core->core->GetStats().entries, 0);
}

TEST(LimiterRefundTest, EachLimitGivesBackWhatItCountsAndTheMostIsTheAnswer) {
  ManualClock clock(600'000);
  auto core = MakeServices(
      MakeConfig("rules:\n  two: { algorithm: fixed_window, limits: [5/minute, 10/day] }\n"),
      clock);
  EXPECT_TRUE(core->core->CheckAndWait("two", "k", 2)->allowed);
  clock.AdvanceMs(60'000);  // the next minute: its count is 0, the day's 2
  EXPECT_TRUE(core->core->CheckAndWait("two", "k", 1)->allowed);
  auto refund = service::RefundAndWait(*core->core, "two", "k", 5);
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->refunded[0], 1);
  EXPECT_EQ(refund->refunded[1], 3);
  EXPECT_EQ(refund->most_refunded(), 3);
  EXPECT_EQ(refund->after.limits[0].remaining, 5);
  EXPECT_EQ(refund->after.limits[1].remaining, 10);
}

TEST(LimiterRefundTest, AStateEmptiedByARefundIsFreed) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->core->CheckAndWait("login", "k")->allowed);
  EXPECT_EQ(core->core->GetStats().entries, 1);
  auto refund = service::RefundAndWait(*core->core, "login", "k", 1);
  ASSERT_TRUE(refund.ok());
  EXPECT_EQ(refund->after.remaining, 2);
  EXPECT_EQ(core->core->GetStats().entries, 0);
}

TEST(LimiterRefundTest, AFullStoreStillRefundsAndCreatesNothing) {
  Config config = MakeConfig(kRules);
  config.engine.max_entries = 2;
  ManualClock clock(0);
  auto core = MakeServices(config, clock);
  EXPECT_TRUE(core->core->CheckAndWait("api", "a")->allowed);
  EXPECT_TRUE(core->core->CheckAndWait("api", "b")->allowed);
  EXPECT_EQ(core->core->CheckAndWait("api", "c")->fallback, Fallback::kStoreFull);
  auto known = service::RefundAndWait(*core->core, "api", "a", 1);
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_EQ(known->after.remaining, 3);
  auto unknown = service::RefundAndWait(*core->core, "api", "c", 1);
  ASSERT_TRUE(unknown.ok()) << unknown.status().ToString();
  EXPECT_EQ(unknown->after.fallback, Fallback::kNone);
  EXPECT_EQ(unknown->after.remaining, 3);
  EXPECT_EQ(core->core->GetStats().entries, 1);  // "a" was emptied and freed; "c" never made
}

TEST(LimiterRefundTest, BadRequestsGetClearErrorsAndChangeNothing) {
  ManualClock clock(1'000'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->core->CheckAndWait("api", "k", 2)->allowed);
  auto expect_error = [&](Result<core::RefundResult> r, StatusCode code,
                          const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(service::RefundAndWait(*core->core, "nope", "k", 1), StatusCode::kNotFound,
               "unknown rule 'nope'");
  expect_error(service::RefundAndWait(*core->core, "api", "k", 1, "gold"), StatusCode::kNotFound,
               "no tier 'gold'");
  expect_error(service::RefundAndWait(*core->core, "api", "", 1), StatusCode::kInvalidArgument,
               "must not be empty");
  expect_error(service::RefundAndWait(*core->core, "api", std::string(513, 'x'), 1),
               StatusCode::kInvalidArgument, "513 bytes");
  expect_error(service::RefundAndWait(*core->core, "api", "k", 0), StatusCode::kInvalidArgument,
               "cost must be at least 1");
  expect_error(service::RefundAndWait(*core->core, "api", "k", -3), StatusCode::kInvalidArgument,
               "cost must be at least 1");
  expect_error(service::RefundAndWait(*core->core, "api", "k", kMaxLimitCount + 1),
               StatusCode::kInvalidArgument, "is above");
  EXPECT_EQ(core->core->CheckAndWait("api", "k", 0)->remaining, 1);
  // The largest cost is fine.
  auto most = service::RefundAndWait(*core->core, "api", "k", kMaxLimitCount);
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->after.remaining, 3);
}

TEST(LimiterRefundTest, TheCallbackFormAnswersAtOnceOnTheEmbeddedStore) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  EXPECT_TRUE(core->core->CheckAndWait("login", "k", 2)->allowed);
  bool answered = false;
  core->core->Refund({"login", "k", 1}, [&](const Status& s, const core::RefundResult& r) {
    answered = true;
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.after.remaining, 1);
    EXPECT_EQ(r.refunded[0], 1);
  });
  EXPECT_TRUE(answered);
  answered = false;
  core->core->Refund({"login", "k", 0}, [&](const Status& s, const core::RefundResult&) {
    answered = true;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(answered);
}

TEST(LimiterRefundTest, AnExplicitInstant) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  const int64_t t = 5'000;
  Decision d;
  ASSERT_TRUE(core->core->CheckAndWait({"login", "k", 2, "", &t}, &d).ok());
  EXPECT_TRUE(d.allowed);
  // The TAT is t + 1 s; 250 ms later, one unit back moves it to t + 500 ms.
  const int64_t later = t + 250;
  auto refund = service::RefundAndWait(*core->core, {"login", "k", 1, "", &later});
  ASSERT_TRUE(refund.ok());
  EXPECT_EQ(refund->after.remaining, 1);
  EXPECT_EQ(refund->after.reset_after_ms, 250);
  // At t + 400 ms, one more unit brings it to now, not below.
  const int64_t last = t + 400;
  refund = service::RefundAndWait(*core->core, {"login", "k", 1, "", &last});
  ASSERT_TRUE(refund.ok());
  EXPECT_EQ(refund->after.remaining, 2);
  EXPECT_EQ(refund->after.reset_after_ms, 0);
}

TEST(LimiterRefundTest, OnTheFakeStore) {
  ManualClock clock(0);
  auto opened = service::Services::Open(MakeConfig(kRules), clock,
                                        testing::FakeStore::RoomsOf(std::make_unique<testing::FakeStore>(clock)));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  service::Services* const core = opened->get();
  EXPECT_TRUE(core->core->CheckAndWait("login", "k", 2)->allowed);
  auto refund = service::RefundAndWait(*core->core, "login", "k", 1);
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->after.remaining, 1);
  EXPECT_EQ(refund->refunded[0], 1);
  auto nobody = service::RefundAndWait(*core->core, "login", "nobody", 1);
  ASSERT_TRUE(nobody.ok());
  EXPECT_EQ(nobody->after.remaining, 2);
  EXPECT_EQ(nobody->refunded[0], 0);
  EXPECT_EQ(core->core->GetStats().entries, 1);  // the fake made no state for "nobody"
}

}  // namespace
}  // namespace floodgate
