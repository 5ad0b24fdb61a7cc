// EventLoop on a ManualClock: a connection's idle and request timeouts run
// out when the clock says so (ConnectionTimers fed from the clock's
// monotonic reading, swept on it), however much real time passes. Real
// time only bounds the waits for the loop's thread to act.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "server/net/event_loop.h"
#include "server/net/listener.h"
#include "server/net/session.h"
#include "testing/eventually.h"

namespace floodgate::server {
namespace {

using floodgate::testing::Eventually;
using std::chrono::milliseconds;

// Long enough for a loop that reads a ManualClock every millisecond to have
// acted, had it been going to.
constexpr milliseconds kGrace{30};

// Echoes each complete line; a line without its '\n' is a partial request.
class LineSession final : public Session {
 public:
  size_t OnInput(std::string_view input, std::string* output, bool*) override {
    const size_t end = input.find('\n');
    if (end == std::string_view::npos) return 0;
    output->append(input.substr(0, end + 1));
    return end + 1;
  }
};

class LineFactory final : public SessionFactory {
 public:
  std::unique_ptr<Session> NewSession(int, ConnectionRef) override {
    return std::make_unique<LineSession>();
  }
  std::string RefusalMessage() const override { return ""; }
};

// One loop on one loopback listener, on `clock`.
class LoopOnClock {
 public:
  LoopOnClock(ManualClock& clock, const ConnectionPolicy& policy) : clock_(clock) {
    Endpoint endpoint{"127.0.0.1", 0};
    Result<int> fd = Listen(&endpoint);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    port_ = endpoint.port;
    std::vector<ListenerSpec> listeners;
    listeners.push_back(
        ListenerSpec{fd.ok() ? *fd : -1, &factory_, &counters_, "", "timeout\n", "line", policy});
    LoopLimits limits;
    limits.idle_polls = 0;
    loop_ = std::make_unique<EventLoop>(0, std::move(listeners), limits, &open_, clock);
    thread_ = std::thread([this] { loop_->Run(); });
  }
  ~LoopOnClock() {
    loop_->Stop();
    clock_.AdvanceMs(3'600'000);  // whatever is still busy, the drain ends
    thread_.join();
  }

  // A connected client socket (blocking), accepted by the loop.
  int Connect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_TRUE(Eventually([&] { return counters_.accepted.load() == 1; }));
    return fd;
  }
  int64_t closed(CloseReason reason) const {
    return counters_.closed[static_cast<int>(reason)].load();
  }

 private:
  ManualClock& clock_;
  LineFactory factory_;
  ListenerCounters counters_;
  std::atomic<int64_t> open_{0};
  int port_ = 0;
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

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
  LoopOnClock loop(clock, policy);
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
  LoopOnClock loop(clock, policy);
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
