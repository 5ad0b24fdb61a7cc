// The Redis client on a ManualClock: a request times out when the clock
// says its timeout has passed, not when real time has; a failed connection
// is retried only once the clock has passed its back-off; an open circuit
// sends its probe only once the clock has passed circuit_open_ms, however
// long the node has been back. Real time only bounds the waits for the I/O
// thread to act (it reads a ManualClock again every millisecond).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "floodgate/clock.h"
#include "redis/client.h"
#include "redis/client_helpers.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

using client_testing::Eventually;
using client_testing::MakeClient;
using client_testing::OptionsFor;
using floodgate::testing::RedisServer;
using std::chrono::milliseconds;

// Long enough for an I/O thread that polls a ManualClock every millisecond
// to have acted many times, had it been going to.
constexpr milliseconds kGrace{30};

// A loopback port that accepts connections and never answers: the kernel
// completes the handshake (the backlog), nobody reads.
class SilentPort {
 public:
  SilentPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 16);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port nobody listens on: connects are refused.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One request's answer, filled in by its callback.
struct Answer {
  std::mutex mu;
  std::optional<Status> status;

  ReplyCallback Callback() {
    return [this](Status s, const redisReply*) {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
    };
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu);
    return status.has_value();
  }
  Status get() {
    std::lock_guard<std::mutex> lock(mu);
    return status.value_or(Status::Ok());
  }
};

TEST(ClientClockTest, ARequestTimesOutWhenTheClockSaysSo) {
  SilentPort silent;
  ManualClock clock(1'700'000'000'000);
  ClientOptions options =
      OptionsFor("redis://127.0.0.1:" + std::to_string(silent.port()), /*timeout_ms=*/20);
  options.clock = &clock;
  options.connections_per_node = 1;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(&client->clock(), &clock);
  ASSERT_TRUE(Eventually([&] { return client->GetStats().connections == 1; }));

  Answer answer;
  client->Send("k", {"GET", "k"}, answer.Callback());
  ASSERT_TRUE(Eventually([&] { return client->GetStats().writes == 1; }));
  // Several times the timeout in real time, and 19 of its 20 ms on the clock.
  std::this_thread::sleep_for(kGrace);
  clock.AdvanceMs(19);
  std::this_thread::sleep_for(kGrace);
  EXPECT_FALSE(answer.done()) << answer.get().ToString();
  EXPECT_EQ(client->GetStats().timeouts, 0u);

  clock.AdvanceMs(1);
  ASSERT_TRUE(Eventually([&] { return answer.done(); }));
  EXPECT_EQ(answer.get().code(), StatusCode::kDeadlineExceeded) << answer.get().ToString();
  EXPECT_NE(answer.get().message().find("within 20 ms"), std::string::npos)
      << answer.get().ToString();
  EXPECT_EQ(client->GetStats().timeouts, 1u);
}

TEST(ClientClockTest, AnEarlierDeadlineFromTheCallerIsOnTheSameClock) {
  SilentPort silent;
  ManualClock clock;
  ClientOptions options =
      OptionsFor("redis://127.0.0.1:" + std::to_string(silent.port()), /*timeout_ms=*/1000);
  options.clock = &clock;
  options.connections_per_node = 1;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Eventually([&] { return client->GetStats().connections == 1; }));

  Answer answer;
  const std::string_view args[] = {"GET", "k"};
  client->Send("k", args, answer.Callback(), clock.MonotonicNs() + 5 * 1'000'000);
  ASSERT_TRUE(Eventually([&] { return client->GetStats().writes == 1; }));
  clock.AdvanceMs(4);
  std::this_thread::sleep_for(kGrace);
  EXPECT_FALSE(answer.done());
  clock.AdvanceMs(1);
  ASSERT_TRUE(Eventually([&] { return answer.done(); }));
  EXPECT_EQ(answer.get().code(), StatusCode::kDeadlineExceeded);
  // The error names the wait that was kept, not the store's timeout.
  EXPECT_NE(answer.get().message().find("within 5 ms"), std::string::npos)
      << answer.get().ToString();
}

TEST(ClientClockTest, AFailedConnectionIsRetriedOnlyAfterItsBackoffOnTheClock) {
  const int port = ClosedPort();
  ManualClock clock;
  ClientOptions options = OptionsFor("redis://127.0.0.1:" + std::to_string(port), 50);
  options.clock = &clock;
  options.connections_per_node = 1;
  options.reconnect_backoff_initial_ms = 100;  // each wait drawn from 50..100 ms
  options.reconnect_backoff_max_ms = 100;
  options.circuit_failure_threshold = 1000;  // about the connection, not the circuit
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  // The first connect (at creation) is refused.
  ASSERT_TRUE(Eventually([&] { return client->GetStats().connect_failures == 1; }));

  // Within the back-off (on the clock; real time passes meanwhile): refused
  // at once, without a connect.
  for (int64_t advance : {0, 49}) {
    clock.AdvanceMs(advance);
    std::this_thread::sleep_for(kGrace);
    const Result<OwnedReply> r = client->Call("k", {"GET", "k"});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(r.status().message().find("retrying in"), std::string::npos) << r.status().ToString();
    EXPECT_EQ(client->GetStats().connect_failures, 1u);
  }

  // Past it: the next request connects again (and is refused again).
  clock.AdvanceMs(51);
  const Result<OwnedReply> r = client->Call("k", {"GET", "k"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message().find("retrying in"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(client->GetStats().connect_failures, 2u);
}

TEST(ClientClockTest, AnOpenCircuitProbesOnlyOnceTheClockHasPassedItsOpenTime) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  redis.Kill();
  ManualClock clock;
  ClientOptions options = OptionsFor(redis.url(), 50);
  options.clock = &clock;
  options.connections_per_node = 1;
  options.reconnect_backoff_initial_ms = 10;  // 5..10 ms
  options.reconnect_backoff_max_ms = 10;
  options.circuit_failure_threshold = 2;
  options.circuit_open_ms = 100;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Eventually([&] { return client->GetStats().connect_failures == 1; }));
  // A request past the back-off connects again: the second failure opens it.
  clock.AdvanceMs(10);
  EXPECT_FALSE(client->Call("k", {"GET", "k"}).ok());
  ASSERT_TRUE(Eventually([&] { return client->GetStats().open_circuits == 1; }));
  EXPECT_EQ(client->GetStats().circuit_opens, 1u);
  EXPECT_EQ(client->GetStats().connect_failures, 2u);

  // Redis comes back; restarting it takes far longer than circuit_open_ms of
  // real time, yet the circuit stays open: requests are refused at once,
  // no probe goes.
  ASSERT_TRUE(redis.RestartSamePort()) << redis.error();
  clock.AdvanceMs(99);
  std::this_thread::sleep_for(kGrace);
  EXPECT_EQ(client->GetStats().open_circuits, 1);
  EXPECT_EQ(client->Health().code(), StatusCode::kUnavailable);
  const Result<OwnedReply> refused = client->Call("k", {"GET", "k"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("circuit open"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(client->GetStats().connects, 0u);

  // The last millisecond: the probe goes, finds Redis, closes the circuit.
  clock.AdvanceMs(1);
  ASSERT_TRUE(Eventually([&] { return client->GetStats().open_circuits == 0; }));
  EXPECT_TRUE(client->Health().ok()) << client->Health().ToString();
  EXPECT_EQ(client->GetStats().connects, 1u);
  const Result<OwnedReply> pong = client->Call("k", {"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
}

}  // namespace
}  // namespace floodgate::redis
