// EventLoop on a ManualClock: a connection's idle and request timeouts run
// out when the clock says so (ConnectionTimers fed from the clock's
// monotonic reading, swept on it), however much real time passes. Real
// time only bounds the waits for the loop's thread to act.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "floodgate/clock.h"
#include "server/net/event_loop.h"
#include "testing/eventually.h"
#include "testing/line_loop.h"

namespace floodgate::server {
namespace {

using floodgate::testing::Eventually;
using std::chrono::milliseconds;

// Long enough for a loop that reads a ManualClock every millisecond to have
// acted, had it been going to.
constexpr milliseconds kGrace{30};

using floodgate::testing::LineLoop;

// Reads until `n` bytes or EOF (within 10 s of real time).
std::string Read(int fd, size_t n) {
  std::string got;
  while (got.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) break;
    char buf[256];
    const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) break;
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

// Whether the server closed `fd` (EOF), without waiting.
bool ClosedByServer(int fd) {
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

TEST(EventLoopClockTest, AnIdleConnectionIsClosedWhenTheClockSaysSo) {
  ManualClock clock;
  ConnectionPolicy policy;
  policy.idle_timeout_ms = 1000;  // swept every 250 ms of the clock
  LineLoop loop(clock, policy);
  const int fd = loop.Connect();
  ASSERT_EQ(::send(fd, "hi\n", 3, 0), 3);
  ASSERT_EQ(Read(fd, 3), "hi\n");  // active at the clock's start

  std::this_thread::sleep_for(kGrace);
  clock.AdvanceMs(999);
  std::this_thread::sleep_for(kGrace);
  EXPECT_EQ(loop.closed(CloseReason::kIdleTimeout), 0);
  EXPECT_FALSE(ClosedByServer(fd));

  // Idle for 1000 ms; the next sweep (at most 250 ms on) closes it.
  clock.AdvanceMs(250);
  EXPECT_TRUE(Eventually([&] { return loop.closed(CloseReason::kIdleTimeout) == 1; }));
  EXPECT_EQ(Read(fd, 1), "");  // EOF
  ::close(fd);
}

TEST(EventLoopClockTest, APartialRequestTimesOutWhenTheClockSaysSo) {
  ManualClock clock;
  ConnectionPolicy policy;
  policy.request_timeout_ms = 500;  // swept every 125 ms of the clock
  LineLoop loop(clock, policy);
  const int fd = loop.Connect();
  // One line and the start of another, in one segment: once the line's echo
  // is back, the partial request has been read too.
  ASSERT_EQ(::send(fd, "x\nabc", 5, 0), 5);
  ASSERT_EQ(Read(fd, 2), "x\n");

  std::this_thread::sleep_for(kGrace);
  clock.AdvanceMs(499);
  std::this_thread::sleep_for(kGrace);
  EXPECT_EQ(loop.closed(CloseReason::kRequestTimeout), 0);
  EXPECT_FALSE(ClosedByServer(fd));

  clock.AdvanceMs(125);
  EXPECT_EQ(Read(fd, 100), "timeout\n");  // the listener's timeout reply, then EOF
  EXPECT_EQ(loop.closed(CloseReason::kRequestTimeout), 1);
  ::close(fd);
}

}  // namespace
}  // namespace floodgate::server
