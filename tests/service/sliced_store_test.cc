// SlicedStore (service/slices/sliced_store.h) on the fake store: the layer
// proved without Redis (tests/integration/test_slices.py runs real servers
// on a real redis-server). The fake decides exactly and keeps the shared
// count, so "never over" is an equality here: what was admitted plus what
// is held in slices is the shared count, and never more than the limit.
#include "service/slices/sliced_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/rule_eval.h"
#include "service/slices/slice_sizing.h"
#include "testing/fake_store.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::SlicedStore;
using testing::FakeStore;

// The fake, lent to the sliced store (which owns what it is given), so that
// the test still sees it once the sliced store is gone.
class Lent final : public store::Store {
 public:
  explicit Lent(store::Store& s) : s_(s) {}
  Result<std::string> Describe(const core::CompiledRule& r, uint32_t id) override {
    return s_.Describe(r, id);
  }
  store::Answer Check(const store::CheckOp& op, Decision* d, Status* s, store::CheckLater later,
                      store::Batch* b) override {
    return s_.Check(op, d, s, later, b);
  }
  size_t Prefetch(uint32_t id, std::string_view k) override { return s_.Prefetch(id, k); }
  std::unique_ptr<store::Batch> NewBatch(int n) override { return s_.NewBatch(n); }
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* r, Status* s,
                         store::Later<ThrottleResult> later) override {
    return s_.Throttle(op, r, s, later);
  }
  store::Answer Reset(const store::ResetOp& op, Status* s, store::Later<> later) override {
    return s_.Reset(op, s, later);
  }
  store::Answer Refund(const store::RefundOp& op, core::RefundResult* r, Status* s,
                       store::Later<core::RefundResult> later) override {
    return s_.Refund(op, r, s, later);
  }
  int64_t SweepExpired(int64_t now_ms) override { return s_.SweepExpired(now_ms); }
  Usage GetUsage() const override { return s_.GetUsage(); }
  std::vector<store::Metric> Metrics() const override { return s_.Metrics(); }

 private:
  store::Store& s_;
};

struct Fixture {
  explicit Fixture(const std::string& rule_yaml, int64_t now_ms = 1'800'000'000'000)
      : clock(now_ms) {
    Config config = testing::MakeConfig("rules:\n  hot: " + rule_yaml + "\n");
    auto compiled = core::CompileRule(config.rules.at(0), "", config.rules.at(0).limits);
    EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
    rule = *compiled;
    fake = std::make_unique<FakeStore>(clock);
    sliced = std::make_unique<SlicedStore>(std::make_unique<Lent>(*fake), clock);
    tag = *sliced->Describe(rule, store::kFirstRuleId);
  }

  store::VariantRef Ref() const { return {&rule, store::kFirstRuleId, tag}; }

  // One decision, waited for when it comes later.
  std::pair<Status, Decision> Check(std::string_view subject, int64_t cost = 1) {
    store::CheckOp op{Ref(), subject, cost};
    Decision d;
    Status s;
    std::mutex mu;
    std::condition_variable cv;
    bool answered = false;
    if (sliced->Check(
            op, &d, &s,
            [&]() -> store::CheckDone {
              return [&](const Status& st, const Decision& dd, const core::AlertOutcome*) {
                std::lock_guard<std::mutex> lock(mu);
                s = st;
                d = dd;
                answered = true;
                cv.notify_all();
              };
            },
            nullptr) == store::Answer::kLater) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return answered; });
    }
    return {s, d};
  }

  // The shared count of the subject's first limit: a peek, which passes
  // through (asked of the fake itself once the sliced store is gone).
  int64_t Shared(std::string_view subject) {
    Decision d;
    Status s;
    if (sliced != nullptr) {
      std::tie(s, d) = Check(subject, 0);
    } else {
      store::CheckOp op{Ref(), subject, 0};
      EXPECT_EQ(fake->Check(
                    op, &d, &s, [] { return store::CheckDone(); }, nullptr),
                store::Answer::kNow);
    }
    EXPECT_TRUE(s.ok()) << s.ToString();
    return d.limits[0].limit - d.limits[0].remaining;
  }

  ManualClock clock;
  core::CompiledRule rule;
  std::unique_ptr<FakeStore> fake;
  std::unique_ptr<SlicedStore> sliced;
  std::string tag;
};

TEST(SliceSizingTest, StartsSmallFollowsDemandAndStaysWithinItsBounds) {
  // 100,000 at 5 %: at most 5,000 a slice, a first one of 5,000 / 16.
  EXPECT_EQ(service::MaxSliceUnits(100'000, 50'000), 5'000);
  EXPECT_EQ(service::MaxSliceUnits(10, 50'000), 1);  // never 0
  EXPECT_EQ(service::NextSliceUnits(1, 100'000, 50'000, 0, 0, 0), 312);
  // 312 spent in 100 ms: 1,560 for the next 500 ms.
  EXPECT_EQ(service::NextSliceUnits(1, 100'000, 50'000, 312, 312, 100), 1'560);
  // Demand beyond max_share is capped; a trickle still gets the cost.
  EXPECT_EQ(service::NextSliceUnits(1, 100'000, 50'000, 5'000, 5'000, 1), 5'000);
  EXPECT_EQ(service::NextSliceUnits(7, 100'000, 50'000, 100, 1, 60'000), 7);
  // A cost above a slice asks for just the cost, never more than the limit.
  EXPECT_EQ(service::NextSliceUnits(9'000, 100'000, 50'000, 0, 0, 0), 9'000);
  EXPECT_EQ(service::NextSliceUnits(200'000, 100'000, 1'000'000, 0, 0, 0), 100'000);
}

TEST(SlicedStoreTest, DecidesFromASliceWithOneStoreCallPerSlice) {
  Fixture f("{ algorithm: fixed_window, limits: [1000/minute], slices: { max_share: 10% } }");
  auto [s, d] = f.Check("k");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(d.allowed);
  // The first slice is 100 / 16 = 6 units: the shared count holds them all.
  EXPECT_EQ(f.fake->checks(), 1);
  EXPECT_EQ(f.Shared("k"), 6);
  EXPECT_EQ(f.sliced->HeldFor(store::kFirstRuleId, "k").held, 5);
  EXPECT_EQ(d.remaining, 1000 - 6 + 5);  // what the fleet has, as far as this server knows
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.fake->checks(), 2);  // the peek's, no take
  EXPECT_EQ(f.sliced->GetCounters().local_decisions, 5);
  EXPECT_TRUE(f.Check("k").second.allowed);  // a new slice
  EXPECT_EQ(f.sliced->GetCounters().slices_taken, 2);
}

TEST(SlicedStoreTest, ManyThreadsNeverAdmitMoreThanTheLimitAndUseItAll) {
  Fixture f("{ algorithm: fixed_window, limits: [20000/minute], slices: { max_share: 5% } }");
  std::atomic<int64_t> admitted{0}, denied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      // Uneven demand: thread 0 makes half the decisions.
      const int n = t == 0 ? 25'000 : 5'000;
      for (int i = 0; i < n; ++i) {
        auto [s, d] = f.Check("hot");
        ASSERT_TRUE(s.ok());
        (d.allowed ? admitted : denied).fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const SlicedStore::Counters c = f.sliced->GetCounters();
  // Exact: the shared count is what was admitted plus what is still held.
  EXPECT_EQ(f.Shared("hot"), admitted.load() + c.units_held);
  EXPECT_LE(f.Shared("hot"), 20'000);
  EXPECT_EQ(admitted.load() + denied.load(), 50'000);
  // Demand (50,000) exceeds the limit: all but the held units were used,
  // and the held ones are at most a slice per thread.
  EXPECT_LE(c.units_held, 6 * 1'000);
  EXPECT_GE(admitted.load(), 20'000 - c.units_held);
  // A call per slice, not per decision.
  EXPECT_LT(static_cast<double>(c.take_calls) / 50'000, 0.01);
}

TEST(SlicedStoreTest, IdleUnitsGoBackAndWindowsEndingStrandTheRest) {
  Fixture f("{ algorithm: fixed_window, limits: [1600/minute], slices: { idle_return: 2s } }");
  ASSERT_TRUE(f.Check("k").second.allowed);  // a slice of 80 / 16 = 5
  EXPECT_EQ(f.Shared("k"), 5);
  f.clock.AdvanceMs(1'000);
  f.sliced->Sweep(f.clock.MonotonicNs() / 1'000'000);
  EXPECT_EQ(f.Shared("k"), 5);  // not idle for 2 s yet
  f.clock.AdvanceMs(1'000);
  f.sliced->Sweep(f.clock.MonotonicNs() / 1'000'000);
  EXPECT_EQ(f.Shared("k"), 1);  // the 4 unspent came back
  EXPECT_EQ(f.sliced->GetCounters().units_returned, 4);
  EXPECT_EQ(f.sliced->GetCounters().units_held, 0);

  // Held when its window ends: stranded, and the next window starts afresh.
  ASSERT_TRUE(f.Check("k").second.allowed);
  const int64_t held = f.sliced->GetCounters().units_held;
  EXPECT_GT(held, 0);
  f.clock.AdvanceMs(60'000);
  ASSERT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.sliced->GetCounters().units_stranded, held);
  EXPECT_EQ(f.Shared("k"), f.sliced->GetCounters().units_held + 1);
}

TEST(SlicedStoreTest, ExhaustedSubjectsAreDeniedLocallyAndAskedAgainNowAndThen) {
  Fixture f("{ algorithm: fixed_window, limits: [100/minute], slices: { max_share: 50% } }");
  int admitted = 0;
  for (int i = 0; i < 150; ++i) admitted += f.Check("k").second.allowed ? 1 : 0;
  EXPECT_EQ(admitted, 100);
  const int64_t calls = f.sliced->GetCounters().take_calls;
  auto [s, d] = f.Check("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after_ms, 0);
  EXPECT_EQ(f.sliced->GetCounters().take_calls, calls);  // answered here
  f.clock.AdvanceMs(service::kExhaustedRecheckMs);
  EXPECT_FALSE(f.Check("k").second.allowed);
  EXPECT_EQ(f.sliced->GetCounters().take_calls, calls + 1);  // asked once again
}

TEST(SlicedStoreTest, TheLastUnitsAreTakenEvenWhenLessThanASliceIsLeft) {
  Fixture f("{ algorithm: fixed_window, limits: [10/minute], slices: { max_share: 100% } }");
  // A first slice of 10 / 16 -> 1, then demand sizes them; whatever the
  // sizes, all 10 are admitted and the 11th is not.
  int admitted = 0;
  for (int i = 0; i < 11; ++i) admitted += f.Check("k").second.allowed ? 1 : 0;
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(f.Shared("k"), 10);
  // A cost of 3 with 2 left elsewhere: all-or-nothing as without slices.
  Fixture g("{ algorithm: fixed_window, limits: [10/minute], slices: { max_share: 100% } }");
  EXPECT_TRUE(g.Check("k", 8).second.allowed);
  EXPECT_FALSE(g.Check("k", 3).second.allowed);
  EXPECT_TRUE(g.Check("k", 2).second.allowed);
}

TEST(SlicedStoreTest, DecisionsWaitingForATakeAreAnsweredInOrderWhenItComes) {
  // "later:" subjects are answered by the fake's own thread.
  Fixture f("{ algorithm: fixed_window, limits: [64/minute], slices: { max_share: 25% } }");
  std::vector<std::pair<Status, Decision>> answers(40);
  std::vector<std::thread> threads;
  // One thread, many decisions in flight: the way an event loop sends them.
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  for (int i = 0; i < 40; ++i) {
    store::CheckOp op{f.Ref(), "later:k", 1};
    Decision d;
    Status s;
    if (f.sliced->Check(
            op, &d, &s,
            [&, i]() -> store::CheckDone {
              return [&, i](const Status& st, const Decision& dd, const core::AlertOutcome*) {
                std::lock_guard<std::mutex> lock(mu);
                answers[i] = {st, dd};
                ++answered;
                cv.notify_all();
              };
            },
            nullptr) == store::Answer::kNow) {
      std::lock_guard<std::mutex> lock(mu);
      answers[i] = {s, d};
      ++answered;
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return answered == 40; }));
  int admitted = 0;
  for (const auto& [s, d] : answers) {
    ASSERT_TRUE(s.ok()) << s.ToString();
    admitted += d.allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 40);
  // Far fewer store calls than decisions: they waited for the takes.
  EXPECT_LT(f.fake->checks(), 20);
  lock.unlock();
  EXPECT_EQ(f.Shared("later:k"), 40 + f.sliced->GetCounters().units_held);
}

TEST(SlicedStoreTest, ShutdownGivesEveryHeldUnitBack) {
  Fixture f("{ algorithm: fixed_window, limits: [16000/minute], slices: {} }");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Check("k").second.allowed);
  const int64_t held = f.sliced->GetCounters().units_held;
  EXPECT_EQ(held, 50 - 3);                             // 800 / 16 taken, 3 spent
  f.sliced->Sweep(f.clock.MonotonicNs() / 1'000'000);  // nothing idle yet
  EXPECT_EQ(f.fake->refunds(), 0);
  f.sliced.reset();
  EXPECT_EQ(f.fake->refunds(), 1);
  EXPECT_EQ(f.Shared("k"), 3);
}

TEST(SlicedStoreTest, PeeksResetsAndRulesWithoutSlicesGoToTheSharedStore) {
  Fixture f("{ algorithm: fixed_window, limits: [1600/minute], slices: {} }");
  ASSERT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.Shared("k"), 5);  // a peek shows the shared count, units out included
  // A reset forgets the shared count and the units held here.
  const std::vector<std::string> tiers;
  const std::vector<uint32_t> ids = {store::kFirstRuleId};
  store::ResetOp reset{"hot", tiers, ids, "k"};
  Status s;
  ASSERT_EQ(f.sliced->Reset(reset, &s, [] { return store::Done<>(); }), store::Answer::kNow);
  EXPECT_EQ(f.sliced->HeldFor(store::kFirstRuleId, "k").held, 0);
  EXPECT_EQ(f.Shared("k"), 0);
  EXPECT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.Shared("k"), 5);
  // Without slices every decision is a store call.
  Fixture plain("{ algorithm: fixed_window, limits: [1600/minute] }");
  plain.rule.slices = SliceConfig{};
  const int64_t before = plain.fake->checks();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(plain.Check("k").second.allowed);
  EXPECT_EQ(plain.fake->checks(), before + 3);
}

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

TEST(SlicedStoreTest, AReloadOfTheOptionAloneKeepsTheStateAndTakesTheNewShare) {
  Fixture f("{ algorithm: fixed_window, limits: [1600/minute], slices: { max_share: 5% } }");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.Shared("k"), 5);  // one first slice of 80 / 16
  // The same variant (same id: the state is kept) with max_share 100 %:
  // the next slice may be the whole rest (no time passed: demand is high).
  f.rule.slices.max_share_ppm = kSliceShareScale;
  ASSERT_TRUE(f.Check("k").second.allowed);
  EXPECT_EQ(f.Shared("k"), 1600);  // with 5 % it would have been 5 + 80
}

}  // namespace
}  // namespace floodgate
