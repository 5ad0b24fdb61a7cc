// sliding_log: exact windows (seed 001's "X times per Y minutes"), shared log
// across limits, retry times, no allocation for denials, the log's heap
// bytes and its claims on a store's room.
#include <gtest/gtest.h>

#include "core/sliding_log.h"
#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

// A room with a budget of bytes: refuses any claim past it.
class BudgetRoom final : public core::MemoryRoom {
 public:
  explicit BudgetRoom(size_t budget) : budget_(budget) {}
  size_t taken() const { return taken_; }

 private:
  bool Grant(size_t bytes) override {
    if (bytes > budget_ - taken_) return false;
    taken_ += bytes;
    return true;
  }

  const size_t budget_;
  size_t taken_ = 0;
};

// What a sliding_log state's log holds (0 without one).
size_t LogBytes(const int64_t* state) {
  const auto* log = reinterpret_cast<const core::SlidingLog*>(state[0]);
  return log != nullptr ? log->HeapBytes() : 0;
}

// A new log: the object (72 bytes, an 80-byte chunk), a ring of 4 events
// (64 bytes, an 80-byte chunk) and one cursor (16 bytes, a 32-byte chunk).
constexpr size_t kNewLogBytes = 80 + 80 + 32;
// The ring grown to 8 events: 128 bytes, a 144-byte chunk.
constexpr size_t kRingOf8Bytes = 144;

TEST(SlidingLogTest, UnitAdmittedAtTCountsStrictlyBeforeTPlusWindow) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"3/5m"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(1'000).allowed);
  EXPECT_TRUE(s.At(2'000).allowed);
  Decision d = s.At(3'000);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 297'000);
  EXPECT_FALSE(s.At(299'999).allowed);
  Decision ok = s.At(300'000);
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.remaining, 0);
  Decision next = s.At(300'001);
  EXPECT_FALSE(next.allowed);
  EXPECT_EQ(next.retry_after_ms, 999);  // the unit from t=1000 leaves at 301000
}

TEST(SlidingLogTest, ResetAndExpiryFollowTheNewestEvent) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"5/s"}));
  s.At(100);
  Decision d = s.At(400);
  EXPECT_EQ(d.remaining, 3);
  EXPECT_EQ(d.reset_after_ms, 1'000);
  EXPECT_EQ(s.expires_at_ms(), 1'400);
  Decision later = s.At(1'200, 0);
  EXPECT_EQ(later.remaining, 4);
  EXPECT_EQ(later.reset_after_ms, 200);
}

TEST(SlidingLogTest, RetryWalksUntilEnoughUnitsAgeOut) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"10/s"}));
  EXPECT_TRUE(s.At(0, 4).allowed);
  EXPECT_TRUE(s.At(200, 3).allowed);
  EXPECT_TRUE(s.At(400, 3).allowed);
  Decision d = s.At(500, 6);
  EXPECT_FALSE(d.allowed);
  // 6 more fit once 6 have left: the 4 at 0 (t=1000) and the 3 at 200 (t=1200).
  EXPECT_EQ(d.retry_after_ms, 700);
  EXPECT_FALSE(s.At(1'199, 6).allowed);
  EXPECT_TRUE(s.At(1'200, 6).allowed);
}

TEST(SlidingLogTest, AllLimitsShareOneLogAllOrNothing) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"2/s", "3/minute"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(1).allowed);
  Decision per_second = s.At(2);
  EXPECT_FALSE(per_second.allowed);
  EXPECT_EQ(per_second.binding, 0);
  EXPECT_EQ(per_second.retry_after_ms, 998);
  EXPECT_EQ(per_second.limits[1].remaining, 1);  // the minute limit was not charged
  EXPECT_TRUE(s.At(1'000).allowed);
  Decision per_minute = s.At(2'000);
  EXPECT_FALSE(per_minute.allowed);
  EXPECT_EQ(per_minute.binding, 1);
  EXPECT_EQ(per_minute.retry_after_ms, 58'000);
}

TEST(SlidingLogTest, AStepBackToAnAgedOutInstantDoesNotLockOut) {
  // The 1/s window saw the event at 0 age out (peek at 1500); the clock then
  // steps back to 0. The new unit must be logged so that the short window
  // can see it leave again: merged into the old event, the 1/s cursor (past
  // it) would count it forever.
  Subject s(MakeRule(Algorithm::kSlidingLog, {"1/s", "5/minute"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(1'500, 0).allowed);
  EXPECT_TRUE(s.At(0).allowed);  // clamped to the newest event, t = 0
  Decision d = s.At(1'000, 0);
  EXPECT_EQ(d.limits[0].remaining, 1);  // both units at 0 have left the 1/s window
  EXPECT_EQ(d.limits[0].reset_after_ms, 0);
  EXPECT_TRUE(s.At(200'000).allowed);
}

TEST(SlidingLogTest, DenialOnNewSubjectAllocatesNothing) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"2/s"}));
  EXPECT_FALSE(s.At(0, 3).allowed);
  EXPECT_EQ(s.state()[0], 0);
  EXPECT_TRUE(s.At(0, 0).allowed);
  EXPECT_EQ(s.state()[0], 0);
  EXPECT_TRUE(s.At(0, 1).allowed);
  EXPECT_NE(s.state()[0], 0);
}

TEST(SlidingLogTest, ClockSteppingBackNeverRefunds) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"2/s"}));
  EXPECT_TRUE(s.At(10'000).allowed);
  EXPECT_TRUE(s.At(10'500).allowed);
  EXPECT_FALSE(s.At(9'000).allowed);
  EXPECT_FALSE(s.At(10'999).allowed);
  EXPECT_TRUE(s.At(11'000).allowed);
}

TEST(SlidingLogTest, LogStaysBoundedByTheLongestLimit) {
  core::SlidingLog log(1);
  core::LimitParams p;
  p.count = 100;
  p.period_ms = 1'000;
  p.capacity = 100;
  core::Outcome out[1];
  for (int64_t t = 0; t < 100'000; ++t) log.Apply(std::span(&p, 1), t, 1, out);
  EXPECT_LE(log.size(), 100u);
}

TEST(SlidingLogTest, HeapBytesFollowTheRing) {
  const core::CompiledRule rule =
      testing::Compile(MakeRule(Algorithm::kSlidingLog, {"100/minute"}));
  int64_t state[1] = {0};
  Decision d;
  EXPECT_EQ(LogBytes(state), 0u);
  for (int64_t t = 0; t < 4; ++t) {
    core::EvaluateRule(rule, state, t, 1, &d);
    EXPECT_EQ(LogBytes(state), kNewLogBytes) << t;
  }
  core::EvaluateRule(rule, state, 4, 1, &d);  // the fifth event: the ring doubles
  EXPECT_EQ(LogBytes(state), kNewLogBytes - 80 + kRingOf8Bytes);
  core::ReleaseRuleState(Algorithm::kSlidingLog, state);
  EXPECT_EQ(LogBytes(state), 0u);
}

TEST(SlidingLogTest, AnAdmissionClaimsWhatItAddsAndNothingWhenRefused) {
  const core::CompiledRule rule =
      testing::Compile(MakeRule(Algorithm::kSlidingLog, {"100/minute"}));
  int64_t state[1] = {0};
  Decision d;
  {
    // A new subject whose log does not fit: nothing kept, nothing admitted.
    BudgetRoom room(kNewLogBytes - 1);
    EXPECT_EQ(core::EvaluateRule(rule, state, 0, 1, &d, &room), 0);
    EXPECT_TRUE(room.refused());
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(state[0], 0);
  }
  {
    BudgetRoom room(kNewLogBytes);
    EXPECT_EQ(core::EvaluateRule(rule, state, 0, 1, &d, &room), 60'000);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(room.taken(), kNewLogBytes);
  }
  for (int64_t t = 1; t < 4; ++t) {
    BudgetRoom none(0);  // the ring has room: nothing to claim
    EXPECT_TRUE(core::EvaluateRule(rule, state, t, 1, &d, &none) > 0 && d.allowed) << t;
    EXPECT_FALSE(none.refused());
  }
  {
    // The fifth event needs a ring of 8: one byte short, and nothing changes.
    BudgetRoom room(kRingOf8Bytes - 1);
    core::EvaluateRule(rule, state, 4, 1, &d, &room);
    EXPECT_TRUE(room.refused());
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(LogBytes(state), kNewLogBytes);
  }
  {
    // A peek, and a unit merged into the newest event's instant, add no
    // event: they claim nothing.
    BudgetRoom none(0);
    core::EvaluateRule(rule, state, 4, 0, &d, &none);
    EXPECT_EQ(d.remaining, 96);                        // the refused unit was not counted
    core::EvaluateRule(rule, state, 3, 1, &d, &none);  // clamped to t = 3
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 95);
    EXPECT_FALSE(none.refused());
  }
  {
    BudgetRoom room(kRingOf8Bytes);
    core::EvaluateRule(rule, state, 5, 1, &d, &room);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 94);
    EXPECT_EQ(room.taken(), kRingOf8Bytes);
  }
  core::ReleaseRuleState(Algorithm::kSlidingLog, state);
}

}  // namespace
}  // namespace floodgate
