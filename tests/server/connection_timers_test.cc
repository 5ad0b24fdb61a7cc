// ConnectionTimers: each timeout at its exact edge (999 ms open, 1000 ms
// closed), on a clock the test moves.
#include "server/net/connection_timers.h"

#include <gtest/gtest.h>

namespace floodgate::server {
namespace {

ConnectionPolicy Policy() {
  ConnectionPolicy p;
  p.request_timeout_ms = 1000;
  p.idle_timeout_ms = 5000;
  p.output_soft_limit = 100;
  p.output_soft_timeout_ms = 2000;
  p.output_hard_limit = 1000;
  return p;
}

TEST(ConnectionTimersTest, APartialRequestTimesOutFromItsFirstByte) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  t.AfterInput(100, /*completed=*/false, /*partial=*/true);
  t.AfterInput(900, false, true);  // more bytes of the same request: no reset
  EXPECT_EQ(t.Due(p, 1099, false), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 1100, false), CloseReason::kRequestTimeout);
  EXPECT_TRUE(t.mid_request());
}

TEST(ConnectionTimersTest, ACompletedRequestStopsTheClock) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  t.AfterInput(100, false, true);
  t.AfterInput(1000, true, false);  // complete, nothing left
  EXPECT_FALSE(t.mid_request());
  EXPECT_EQ(t.Due(p, 5999, false), CloseReason::kNone);
  EXPECT_EQ(t.last_active_ms(), 1000);
}

TEST(ConnectionTimersTest, ARequestLeftPartialAfterOthersCompletedStartsNow) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  t.AfterInput(100, false, true);
  t.AfterInput(800, true, true);  // one completed, the next one begun
  EXPECT_EQ(t.Due(p, 1100, false), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 1799, false), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 1800, false), CloseReason::kRequestTimeout);
}

TEST(ConnectionTimersTest, IdleOnlyWithNothingPending) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  EXPECT_EQ(t.Due(p, 4999, false), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 5000, false), CloseReason::kIdleTimeout);
  // In flight or unsent output: not idle, however long.
  EXPECT_EQ(t.Due(p, 60'000, true), CloseReason::kNone);
  // Output read to the end counts as activity.
  EXPECT_EQ(t.AfterOutput(p, 3000, 0), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 7999, false), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 8000, false), CloseReason::kIdleTimeout);
}

TEST(ConnectionTimersTest, SoftLimitHeldTooLongCloses) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  EXPECT_EQ(t.AfterOutput(p, 100, 100), CloseReason::kNone);  // at the limit: not over
  EXPECT_EQ(t.Due(p, 10'000, true), CloseReason::kNone);
  EXPECT_EQ(t.AfterOutput(p, 10'000, 101), CloseReason::kNone);
  EXPECT_EQ(t.AfterOutput(p, 11'000, 500), CloseReason::kNone);  // still over: no restart
  EXPECT_EQ(t.Due(p, 11'999, true), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 12'000, true), CloseReason::kOutputSoftLimit);
}

TEST(ConnectionTimersTest, DippingUnderTheSoftLimitRestartsItsClock) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  t.AfterOutput(p, 0, 200);
  t.AfterOutput(p, 1500, 50);  // the client read
  t.AfterOutput(p, 1600, 200);
  EXPECT_EQ(t.Due(p, 3599, true), CloseReason::kNone);
  EXPECT_EQ(t.Due(p, 3600, true), CloseReason::kOutputSoftLimit);
}

TEST(ConnectionTimersTest, HardLimitClosesAtOnce) {
  const ConnectionPolicy p = Policy();
  ConnectionTimers t(0);
  EXPECT_EQ(t.AfterOutput(p, 0, 1000), CloseReason::kNone);
  EXPECT_EQ(t.AfterOutput(p, 0, 1001), CloseReason::kOutputHardLimit);
}

TEST(ConnectionTimersTest, ZeroIsOff) {
  ConnectionPolicy off;
  off.output_soft_limit = 0;
  off.output_hard_limit = 0;
  ConnectionTimers t(0);
  t.AfterInput(0, false, true);
  EXPECT_EQ(t.AfterOutput(off, 0, size_t{1} << 40), CloseReason::kNone);
  EXPECT_EQ(t.Due(off, int64_t{1} << 40, true), CloseReason::kNone);
  EXPECT_EQ(off.read_limit(), SIZE_MAX);
  off.output_hard_limit = 500;
  EXPECT_EQ(off.read_limit(), 500u);  // no soft limit: reading stops at the hard one
}

TEST(ConnectionTimersTest, NamesForMetricsAndLogs) {
  EXPECT_EQ(CloseReasonName(CloseReason::kRequestTimeout), "request_timeout");
  EXPECT_EQ(CloseReasonName(CloseReason::kOutputSoftLimit), "output_soft_limit");
  EXPECT_EQ(CloseReasonName(CloseReason::kEvicted), "evicted");
  EXPECT_EQ(CloseReasonName(CloseReason::kShutdown), "shutdown");
}

}  // namespace
}  // namespace floodgate::server
