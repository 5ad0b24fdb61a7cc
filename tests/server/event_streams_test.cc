// EventStreams' ticks on a ManualClock: kTickAfterMs (20 ms) past each
// whole second of the clock's wall time, to the millisecond, and only when
// the clock is moved; a tick that the clock jumped past is not made up for.
#include "server/http/event_streams.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "testing/eventually.h"

namespace floodgate::server {
namespace {

// A ManualClock that counts its monotonic readings. A thread waiting on
// it reads it at least every MaxSleepNs, after it has fixed its deadline:
// two readings more than the test has seen tell the test that the thread
// is waiting for a deadline it fixed before them.
class WatchedClock final : public Clock {
 public:
  explicit WatchedClock(int64_t now_ms) : clock_(now_ms) {}
  int64_t NowMs() const override { return clock_.NowMs(); }
  int64_t MonotonicNs() const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    return clock_.MonotonicNs();
  }
  int64_t MaxSleepNs() const override { return clock_.MaxSleepNs(); }

  void AdvanceMs(int64_t ms) { clock_.AdvanceMs(ms); }
  // Returns once the waiting thread has read the clock twice since the
  // call: whatever was due by now has been done.
  bool Settled() const {
    const int64_t seen = reads_.load(std::memory_order_relaxed);
    return testing::Eventually([&] { return reads_.load(std::memory_order_relaxed) >= seen + 2; });
  }

 private:
  ManualClock clock_;
  mutable std::atomic<int64_t> reads_{0};
};

constexpr int64_t kSecond = 1'800'000'000'000;  // a whole second of wall time

class EventStreamsTest : public ::testing::Test {
 protected:
  struct Tick {
    int64_t n;
    int64_t now_ms;
    friend bool operator==(const Tick&, const Tick&) = default;
  };
  std::vector<Tick> ticks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ticks_;
  }

  WatchedClock clock_{kSecond + 500};
  mutable std::mutex mu_;
  std::vector<Tick> ticks_;
  EventStreams streams_{[this](int64_t n, bool streaming) {
                          EXPECT_FALSE(streaming);  // no stream is open
                          std::lock_guard<std::mutex> lock(mu_);
                          ticks_.push_back({n, clock_.NowMs()});
                          return std::string();
                        },
                        clock_};
};

TEST_F(EventStreamsTest, TicksComeJustPastEachWholeSecondWhenTheClockMoves) {
  ASSERT_TRUE(clock_.Settled());
  // Half a second in: the first tick is due 20 ms past the next second.
  clock_.AdvanceMs(519);
  ASSERT_TRUE(clock_.Settled());
  EXPECT_TRUE(ticks().empty());
  clock_.AdvanceMs(1);
  ASSERT_TRUE(testing::Eventually([&] { return ticks().size() == 1; }));
  EXPECT_EQ(ticks()[0], (Tick{0, kSecond + 1'020}));
  // The next, one second later: not a millisecond before.
  ASSERT_TRUE(clock_.Settled());
  clock_.AdvanceMs(999);
  ASSERT_TRUE(clock_.Settled());
  EXPECT_EQ(ticks().size(), 1u);
  clock_.AdvanceMs(1);
  ASSERT_TRUE(testing::Eventually([&] { return ticks().size() == 2; }));
  EXPECT_EQ(ticks()[1], (Tick{1, kSecond + 2'020}));
}

TEST_F(EventStreamsTest, ASecondTheClockJumpedPastIsNotMadeUpFor) {
  ASSERT_TRUE(clock_.Settled());
  // 3.51 s at once: one tick, late, then the next just past the next
  // whole second, not a burst for the seconds skipped.
  clock_.AdvanceMs(3'510);
  ASSERT_TRUE(testing::Eventually([&] { return ticks().size() == 1; }));
  EXPECT_EQ(ticks()[0], (Tick{0, kSecond + 4'010}));
  ASSERT_TRUE(clock_.Settled());
  clock_.AdvanceMs(1'009);
  ASSERT_TRUE(clock_.Settled());
  EXPECT_EQ(ticks().size(), 1u);
  clock_.AdvanceMs(1);
  ASSERT_TRUE(testing::Eventually([&] { return ticks().size() == 2; }));
  EXPECT_EQ(ticks()[1], (Tick{1, kSecond + 5'020}));
}

TEST_F(EventStreamsTest, StopEndsTheWaitWithoutATick) {
  ASSERT_TRUE(clock_.Settled());
  streams_.Stop();
  clock_.AdvanceMs(5'000);
  EXPECT_TRUE(ticks().empty());
}

}  // namespace
}  // namespace floodgate::server
