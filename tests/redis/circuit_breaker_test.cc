// CircuitBreaker driven by a ManualClock's monotonic reading, as the I/O
// loop drives it: an open circuit refuses until open_ns has passed on the
// clock, to the nanosecond, lets exactly one probe go, and a failed probe
// opens it for another open_ns from the failure; steps of the wall clock
// do not shorten the open period. No sleeping: only the clock moves. (The
// state machine on raw times: wire_test.cc.)
#include "redis/circuit_breaker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "floodgate/clock.h"

namespace floodgate::redis {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(CircuitBreakerClockTest, ProbesOnlyOnceOpenNsHasPassedOnTheClock) {
  ManualClock clock;
  std::atomic<int64_t> gauge{0};
  CircuitBreaker breaker(1, 200 * kMs, &gauge, nullptr);
  ASSERT_TRUE(breaker.RecordFailure(clock.MonotonicNs()));

  clock.AdvanceMs(199);
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));
  clock.AdvanceNs(kMs - 1);  // one nanosecond short
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
  clock.AdvanceNs(1);
  EXPECT_TRUE(breaker.TryStartProbe(clock.MonotonicNs()));
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kHalfOpen);
  EXPECT_FALSE(breaker.Allow());  // requests still wait for the probe
  // Exactly one probe, however often the loops ask.
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));
  clock.AdvanceMs(1'000);
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));

  EXPECT_TRUE(breaker.ProbeSucceeded());
  EXPECT_TRUE(breaker.Allow());
  EXPECT_EQ(gauge.load(), 0);
  EXPECT_FALSE(breaker.ProbeSucceeded());  // closed already
}

TEST(CircuitBreakerClockTest, AFailedProbeOpensItForAnotherPeriodFromTheFailure) {
  ManualClock clock;
  CircuitBreaker breaker(1, 200 * kMs, nullptr, nullptr);
  ASSERT_TRUE(breaker.RecordFailure(clock.MonotonicNs()));
  clock.AdvanceMs(200);
  ASSERT_TRUE(breaker.TryStartProbe(clock.MonotonicNs()));
  // The probe takes 30 ms to fail (a connect timeout, say).
  clock.AdvanceMs(30);
  breaker.ProbeFailed(clock.MonotonicNs());
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(breaker.probe_at_ns(), clock.MonotonicNs() + 200 * kMs);
  clock.AdvanceMs(199);
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));
  clock.AdvanceMs(1);
  EXPECT_TRUE(breaker.TryStartProbe(clock.MonotonicNs()));
}

TEST(CircuitBreakerClockTest, AWallClockStepDoesNotShortenTheOpenPeriod) {
  ManualClock clock(1'700'000'000'000);
  CircuitBreaker breaker(1, 200 * kMs, nullptr, nullptr);
  ASSERT_TRUE(breaker.RecordFailure(clock.MonotonicNs()));
  // The wall clock jumps an hour back and then forward again: only the
  // forward part moved the monotonic reading, and less than the period.
  clock.SetMs(1'700'000'000'000 - 3'600'000);
  clock.SetMs(1'700'000'000'000 - 3'600'000 + 150);
  EXPECT_FALSE(breaker.TryStartProbe(clock.MonotonicNs()));
  clock.SetMs(1'700'000'000'000 - 3'600'000 + 200);
  EXPECT_TRUE(breaker.TryStartProbe(clock.MonotonicNs()));
}

}  // namespace
}  // namespace floodgate::redis
