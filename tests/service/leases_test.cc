// LimiterCore's leases and waiting forms on the embedded store: a
// concurrency rule's max_in_flight (its tier's), TTLs, release and renew of
// live leases only, checks refused on a concurrency rule and acquires on a
// rate rule, the ledger's counts, and requests held until they can succeed.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "api/open_services.h"
#include "service/services.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::Leases;
using service::LimiterCore;
using service::Waiting;
using LeaseKind = store::LeaseOpKind;

using testing::MakeConfig;

using testing::MakeServices;

const char* kRules = R"(
rules:
  exports: { algorithm: concurrency, max_in_flight: 2, lease_ttl: 10s, tiers: { pro: 3 } }
  api: { algorithm: gcra, limits: [10/s], max_waiters: 2 }
)";

Leases::LeaseAnswer Must(Result<Leases::LeaseAnswer> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Leases::LeaseAnswer{};
}

TEST(LeasesTest, AtMostMaxInFlightLiveLeasesEachWithItsTtl) {
  ManualClock clock(1'000'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  const auto a = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k"}));
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.lease.size(), 32u);
  EXPECT_EQ(a.in_flight, 1);
  EXPECT_EQ(a.limit, 2);
  EXPECT_EQ(a.ms, 10'000);  // the rule's lease_ttl
  clock.AdvanceMs(4000);
  const auto b = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, 2000}));
  EXPECT_TRUE(b.ok);
  EXPECT_EQ(b.ms, 2000);
  EXPECT_NE(a.lease, b.lease);
  const auto full = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k"}));
  EXPECT_FALSE(full.ok);
  EXPECT_TRUE(full.lease.empty());
  EXPECT_EQ(full.in_flight, 2);
  EXPECT_EQ(full.ms, 2000);  // b expires first
  // Another subject is apart; the tier allows three.
  EXPECT_TRUE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "other"})).ok);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "p", "pro"})).ok);
  }
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "p", "pro"})).ok);
  // b's TTL ends at +6000: live at 5999, gone at 6000.
  clock.AdvanceMs(1999);
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k"})).ok);
  clock.AdvanceMs(1);
  EXPECT_TRUE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k"})).ok);
}

TEST(LeasesTest, ReleaseAndRenewOnlyALiveLeaseOfTheSubject) {
  ManualClock clock(1'000'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  const auto a = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, 1000}));
  ASSERT_TRUE(a.ok);
  EXPECT_FALSE(
      Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "other", {}, a.lease})).ok);
  EXPECT_FALSE(
      Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, "made-up"})).ok);
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, ""})).ok);
  const auto renewed =
      Must(core->leases->AndWait(LeaseKind::kRenew, {"exports", "k", {}, a.lease, 5000}));
  EXPECT_TRUE(renewed.ok);
  EXPECT_EQ(renewed.ms, 5000);
  clock.AdvanceMs(4999);
  const auto released =
      Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, a.lease}));
  EXPECT_TRUE(released.ok);
  EXPECT_EQ(released.in_flight, 0);
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, a.lease})).ok);
  // An expired lease is neither renewed nor released.
  const auto b = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, 100}));
  clock.AdvanceMs(100);
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kRenew, {"exports", "k", {}, b.lease})).ok);
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, b.lease})).ok);
}

TEST(LeasesTest, ClearErrors) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  auto r = core->leases->AndWait(LeaseKind::kAcquire, {"api", "k"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a concurrency rule"), std::string::npos);
  r = core->leases->AndWait(LeaseKind::kAcquire, {"nope", "k"});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  r = core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", "gold"});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  r = core->leases->AndWait(LeaseKind::kAcquire, {"exports", std::string(600, 'k')});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, kMaxLeaseTtlMs + 1});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  auto check = core->core->CheckAndWait("exports", "k");
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.status().message().find("is a concurrency rule"), std::string::npos);
}

TEST(LeasesTest, IdsAreUnguessable) {
  ManualClock clock(0);
  auto core = MakeServices(MakeConfig(R"(
rules:
  many: { algorithm: concurrency, max_in_flight: 1000 }
)"),
                           clock);
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    const auto a = Must(core->leases->AndWait(LeaseKind::kAcquire, {"many", "k"}));
    ASSERT_TRUE(a.ok);
    ASSERT_EQ(a.lease.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(a.lease);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(LeasesTest, TheLedgerCountsGrantsReleasesAndExpirations) {
  ManualClock clock(1'000'000);
  auto core = MakeServices(MakeConfig(kRules), clock);
  const auto a = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, 100}));
  const auto b = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k", {}, {}, 100}));
  EXPECT_FALSE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "k"})).ok);
  EXPECT_TRUE(Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "k", {}, a.lease})).ok);
  auto stats = core->leases->Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].first, "exports");
  EXPECT_EQ(stats[0].second.acquired, 2);
  EXPECT_EQ(stats[0].second.refused, 1);
  EXPECT_EQ(stats[0].second.released, 1);
  EXPECT_EQ(stats[0].second.held, 1);
  clock.AdvanceMs(200);  // b was never released: the room's tick counts it
  for (int i = 0; i < 200 && core->leases->Stats()[0].second.expired == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stats = core->leases->Stats();
  EXPECT_EQ(stats[0].second.expired, 1);
  EXPECT_EQ(stats[0].second.held, 0);
  (void)b;
}

TEST(WaitingTest, HeldUntilItCanBeAdmitted) {
  SystemClock clock;
  auto core = MakeServices(MakeConfig(kRules), clock);
  // gcra 10/s with a burst of 10: spend it, then the next one waits for
  // the emission interval, 100 ms after the first (measured from there, so
  // that a slow burst does not shorten the wait below the bound).
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(core->core->CheckAndWait("api", "w")->allowed);
  std::promise<Decision> answered;
  core->waiting->Check({"api", "w"}, {1000, 1},
                       [&](const Status& s, const Decision& d) { answered.set_value(d); });
  auto future = answered.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto waited = std::chrono::steady_clock::now() - start;
  // Admitted (a wait given up would be denied, at the 1 s deadline).
  EXPECT_TRUE(future.get().allowed);
  EXPECT_GE(waited, std::chrono::milliseconds(90));
  // The room counts the outcome just after the answer went out.
  auto stats = core->waiting->Stats();
  for (int i = 0; i < 100 && (stats.empty() || stats[0].second.waiting != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = core->waiting->Stats();
  }
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].second.admitted, 1);
  EXPECT_EQ(stats[0].second.waiting, 0);
}

TEST(WaitingTest, ATooShortWaitFullRoomAndCancelAnswerOrDrop) {
  SystemClock clock;
  auto core = MakeServices(MakeConfig(kRules), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(core->core->CheckAndWait("api", "x")->allowed);
  // 10 ms cannot cover the ~100 ms retry: answered at once, denied.
  std::promise<Decision> at_once;
  core->waiting->Check({"api", "x"}, {10, 1},
                       [&](const Status&, const Decision& d) { at_once.set_value(d); });
  auto f = at_once.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::milliseconds(50)), std::future_status::ready);
  EXPECT_FALSE(f.get().allowed);
  // max_waiters 2: two held, the third answered at once.
  std::atomic<int> answers{0};
  for (int i = 0; i < 3; ++i) {
    core->waiting->Check({"api", "x", 10}, {5000, 7},
                         [&](const Status&, const Decision&) { answers.fetch_add(1); });
  }
  EXPECT_EQ(answers.load(), 1);
  core->waiting->Cancel(7);  // their client went away
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(answers.load(), 1);  // never answered, never decided
  const auto stats = core->waiting->Stats();
  EXPECT_EQ(stats[0].second.full, 1);
  EXPECT_EQ(stats[0].second.cancelled, 2);
  EXPECT_EQ(stats[0].second.waiting, 0);
  // Nothing was spent for them: a full burst of 10 is back after 1 s.
  EXPECT_EQ(core->core->CheckAndWait("api", "x", 0)->remaining, 10);
}

TEST(WaitingTest, AnAcquireWaitsForARelease) {
  SystemClock clock;
  auto core = MakeServices(MakeConfig(kRules), clock);
  const auto a = Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "r"}));
  ASSERT_TRUE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "r"})).ok);
  std::promise<Leases::LeaseAnswer> got;
  core->waiting->Acquire({"exports", "r"}, {5000, 3},
                         [&](const Status&, const Leases::LeaseAnswer& x) { got.set_value(x); });
  auto f = got.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(150)), std::future_status::timeout);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Must(core->leases->AndWait(LeaseKind::kRelease, {"exports", "r", {}, a.lease})).ok);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  // Woken by the release itself: otherwise only the lease's expiry (10 s,
  // past the 5 s deadline) would have let it in.
  EXPECT_LE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  const auto x = f.get();
  EXPECT_TRUE(x.ok);
  EXPECT_EQ(x.in_flight, 2);
}

TEST(WaitingTest, AWaitingAcquireIsRefusedAtItsDeadlineNotAPollBefore) {
  SystemClock clock;
  auto core = MakeServices(MakeConfig(kRules), clock);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Must(core->leases->AndWait(LeaseKind::kAcquire, {"exports", "d"})).ok);
  }
  // Both leases outlive the wait, and nobody releases one: refused, at the
  // 500 ms deadline (the room polls every 100 ms; it used to give up at
  // the last poll whose next one would pass the deadline, ~400 ms).
  std::promise<Leases::LeaseAnswer> got;
  const auto start = std::chrono::steady_clock::now();
  core->waiting->Acquire({"exports", "d"}, {500, 3},
                         [&](const Status&, const Leases::LeaseAnswer& x) { got.set_value(x); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto waited = std::chrono::steady_clock::now() - start;
  const auto x = f.get();
  EXPECT_FALSE(x.ok);
  EXPECT_EQ(x.in_flight, 2);
  EXPECT_GT(x.ms, 8000);  // the first lease's expiry, as of the answer
  // The deadline is read on the limiter's clock (milliseconds): at most one
  // short of 500 by the steady clock.
  EXPECT_GE(waited, std::chrono::milliseconds(499));
  EXPECT_LE(waited, std::chrono::milliseconds(2000));
}

}  // namespace
}  // namespace floodgate
