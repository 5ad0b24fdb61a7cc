// The Reservations room on the embedded store: an estimate admitted only if
// it fits, settled once by charging or giving back the difference, debt
// past the limit, an unsettled reservation keeping its estimate at its
// TTL, errors that change nothing, and a ledger that cannot keep the
// record giving the estimate back.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <utility>

#include "service/limiter/limiter_core.h"
#include "service/reservations/reservations.h"
#include "service/services.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::LimiterCore;
using service::Reservations;
using testing::MakeConfig;
using testing::MakeServices;

const char* kRules = R"(
rules:
  tokens: { algorithm: fixed_window, limits: [100/hour], tiers: { pro: [1000/hour] } }
  api:
    algorithm: fixed_window
    limits: [100/hour]
    priorities: { batch: 40% }
  shadowed: { algorithm: fixed_window, limits: [10/hour], shadow: true }
  leases: { algorithm: concurrency, max_in_flight: 2 }
)";

std::pair<Status, Reservations::Reserved> Reserve(Reservations& r,
                                                  const Reservations::ReserveArgs& args) {
  std::promise<std::pair<Status, Reservations::Reserved>> p;
  r.Reserve(args, [&](const Status& s, const Reservations::Reserved& v) { p.set_value({s, v}); });
  return p.get_future().get();
}

std::pair<Status, Reservations::Settled> Settle(Reservations& r, std::string_view rule,
                                                std::string_view key, std::string_view id,
                                                int64_t actual) {
  std::promise<std::pair<Status, Reservations::Settled>> p;
  r.Settle({rule, key, id, actual}, [&](const Status& s, const Reservations::Settled& v) {
    p.set_value({s, v});
  });
  return p.get_future().get();
}

int64_t Used(LimiterCore& core, std::string_view rule, std::string_view key,
             std::string_view tier = {}) {
  LimiterCore::CheckArgs args{rule, key, 0, tier};
  args.whole_limit = true;
  Decision d;
  EXPECT_TRUE(core.CheckAndWait(args, &d).ok());
  return d.limit - d.remaining;
}

struct World {
  ManualClock clock{3'600'000};
  std::unique_ptr<service::Services> s = MakeServices(MakeConfig(kRules), clock);
  Reservations& r = *s->reservations;
  LimiterCore& core = *s->core;
};

TEST(ReservationsTest, SettleChargesTheDifferenceOrGivesItBack) {
  World w;
  auto [s1, less] = Reserve(w.r, {"tokens", "k", 30});
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(less.decision.allowed);
  EXPECT_EQ(less.id.size(), 32u);
  auto [s2, more] = Reserve(w.r, {"tokens", "k", 20});
  ASSERT_TRUE(s2.ok());
  EXPECT_NE(less.id, more.id);
  EXPECT_EQ(Used(w.core, "tokens", "k"), 50);

  auto [s3, settled] = Settle(w.r, "tokens", "k", less.id, 12);
  ASSERT_TRUE(s3.ok()) << s3.ToString();
  EXPECT_EQ(settled.estimate, 30);
  EXPECT_EQ(settled.actual, 12);
  EXPECT_EQ(settled.charged, 12);
  EXPECT_EQ(settled.after.remaining, 100 - 32);
  auto [s4, over] = Settle(w.r, "tokens", "k", more.id, 25);
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ(over.charged, 25);
  EXPECT_EQ(over.after.remaining, 100 - 37);
  EXPECT_EQ(Used(w.core, "tokens", "k"), 37);
}

TEST(ReservationsTest, AnOverrunPastTheLimitIsDebt) {
  World w;
  auto [s1, a] = Reserve(w.r, {"tokens", "k", 90});
  ASSERT_TRUE(s1.ok());
  auto [s2, settled] = Settle(w.r, "tokens", "k", a.id, 130);
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(settled.charged, 130);
  EXPECT_EQ(settled.after.remaining, -30);
  EXPECT_FALSE(w.core.CheckAndWait("tokens", "k")->allowed);
  auto [s3, denied] = Reserve(w.r, {"tokens", "k", 1});
  ASSERT_TRUE(s3.ok());
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_TRUE(denied.id.empty());
  // The window covers it: a new hour starts from nothing.
  w.clock.AdvanceMs(3'600'000);
  EXPECT_TRUE(w.core.CheckAndWait("tokens", "k")->allowed);
}

TEST(ReservationsTest, EachSettlesOnceAndOnlyForItsOwnSubject) {
  World w;
  auto [s1, a] = Reserve(w.r, {"tokens", "k", 10});
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(Settle(w.r, "tokens", "other", a.id, 1).first.code(), StatusCode::kNotFound);
  EXPECT_EQ(Settle(w.r, "api", "k", a.id, 1).first.code(), StatusCode::kNotFound);
  EXPECT_EQ(Settle(w.r, "tokens", "k", std::string(32, '0'), 1).first.code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Used(w.core, "tokens", "k"), 10);
  ASSERT_TRUE(Settle(w.r, "tokens", "k", a.id, 4).first.ok());
  const Status twice = Settle(w.r, "tokens", "k", a.id, 1).first;
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.message().find("settled already"), std::string::npos) << twice.message();
  EXPECT_EQ(Used(w.core, "tokens", "k"), 4);
}

TEST(ReservationsTest, AnUnsettledReservationKeepsItsEstimateAtItsTtl) {
  World w;
  auto [s1, a] = Reserve(w.r, {"tokens", "k", 25, 1000});
  ASSERT_TRUE(s1.ok());
  w.clock.AdvanceMs(1000);
  const Status late = Settle(w.r, "tokens", "k", a.id, 0).first;
  EXPECT_EQ(late.code(), StatusCode::kNotFound);
  EXPECT_NE(late.message().find("past its TTL"), std::string::npos) << late.message();
  EXPECT_EQ(Used(w.core, "tokens", "k"), 25);
}

TEST(ReservationsTest, TiersAndClassesAreThoseOfTheCheck) {
  World w;
  auto [s1, pro] = Reserve(w.r, {"tokens", "k", 500, 60'000, "pro"});
  ASSERT_TRUE(s1.ok());
  EXPECT_TRUE(pro.decision.allowed);
  ASSERT_TRUE(Settle(w.r, "tokens", "k", pro.id, 700).first.ok());
  EXPECT_EQ(Used(w.core, "tokens", "k", "pro"), 700);
  EXPECT_EQ(Used(w.core, "tokens", "k"), 0);
  // batch keeps 40 of 100 back: 61 does not fit for it, but does for default.
  Reservations::ReserveArgs batch{"api", "k", 61};
  batch.priority = "batch";
  auto [s2, refused] = Reserve(w.r, batch);
  ASSERT_TRUE(s2.ok());
  EXPECT_FALSE(refused.decision.allowed);
  EXPECT_EQ(refused.decision.limit, 60);
  batch.priority = "default";
  EXPECT_TRUE(Reserve(w.r, batch).second.decision.allowed);
  batch.priority = "bulk";
  EXPECT_EQ(Reserve(w.r, batch).first.code(), StatusCode::kInvalidArgument);
}

TEST(ReservationsTest, WhatIsNotCountedHoldsNoReservation) {
  World w;
  auto [s1, big] = Reserve(w.r, {"tokens", "k", 101});
  ASSERT_TRUE(s1.ok());
  EXPECT_FALSE(big.decision.allowed);
  EXPECT_EQ(big.decision.retry_after_ms, -1);
  EXPECT_TRUE(big.id.empty());
  auto [s2, shadow] = Reserve(w.r, {"shadowed", "k", 11});
  ASSERT_TRUE(s2.ok());
  EXPECT_TRUE(shadow.decision.allowed);
  EXPECT_TRUE(shadow.decision.shadow_denied);
  EXPECT_TRUE(shadow.id.empty());
  EXPECT_EQ(Used(w.core, "tokens", "k"), 0);
}

TEST(ReservationsTest, BadArgumentsChangeNothing) {
  World w;
  for (const Reservations::ReserveArgs& bad :
       {Reservations::ReserveArgs{"tokens", "k", 0}, Reservations::ReserveArgs{"tokens", "k", -3},
        Reservations::ReserveArgs{"tokens", "k", kMaxLimitCount + 1},
        Reservations::ReserveArgs{"tokens", "k", 5, 0},
        Reservations::ReserveArgs{"tokens", "k", 5, store::kMaxReservationTtlMs + 1},
        Reservations::ReserveArgs{"tokens", "", 5}, Reservations::ReserveArgs{"nope", "k", 5},
        Reservations::ReserveArgs{"tokens", "k", 5, 1000, "gold"},
        Reservations::ReserveArgs{"leases", "k", 1}}) {
    const Status s = Reserve(w.r, bad).first;
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(s.message().empty());
  }
  auto [s1, a] = Reserve(w.r, {"tokens", "k", 10});
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(Settle(w.r, "tokens", "k", a.id, -1).first.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Settle(w.r, "tokens", "k", a.id, kMaxLimitCount + 1).first.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Settle(w.r, "tokens", "k", "", 1).first.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Settle(w.r, "tokens", "k", std::string(65, 'a'), 1).first.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Settle(w.r, "nope", "k", a.id, 1).first.code(), StatusCode::kNotFound);
  EXPECT_EQ(Used(w.core, "tokens", "k"), 10);
  ASSERT_TRUE(Settle(w.r, "tokens", "k", a.id, 10).first.ok());  // still there
}

TEST(ReservationsTest, AReservationTheLedgerCannotKeepGivesItsEstimateBack) {
  ManualClock clock(3'600'000);
  Config config = MakeConfig(kRules);
  config.engine.max_entries = 1;  // the subject's state, and no room for a record
  auto s = MakeServices(config, clock);
  auto [st, r] = Reserve(*s->reservations, {"tokens", "k", 30});
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_TRUE(r.id.empty());
  EXPECT_EQ(Used(*s->core, "tokens", "k"), 0);
}

}  // namespace
}  // namespace floodgate
