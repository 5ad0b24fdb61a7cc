// A restart without dropped requests (docs/operations.md, "Graceful
// restart"): a second server joins the ports of a running one only when
// asked (ServerOptions::replace), before_serving runs with every socket
// bound, and the drain answers what clients send on open connections,
// telling HTTP clients to reconnect ("Connection: close").
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/open_services.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "server/net/event_loop.h"
#include "server/net/listener.h"
#include "server/server.h"
#include "service/services.h"
#include "testing/eventually.h"

namespace floodgate::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// A blocking client connection to 127.0.0.1:port (-1 on failure).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until `done(got)` or the peer closes (*closed) or 5 s pass.
template <typename Done>
std::string ReadUntil(int fd, Done done, bool* closed) {
  std::string got;
  *closed = false;
  const auto give_up = steady_clock::now() + std::chrono::seconds(5);
  while (!done(got) && steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      *closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Whether `fd` is connected to itself: with nothing listening on a port in
// the ephemeral range, a connect can be given that port as its own source and
// "succeed" by simultaneous open.
bool SelfConnected(int fd) {
  sockaddr_in local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

// Until a connection to `port` is refused: the drain has begun (its first
// step closes the listeners), for up to 2 s. Only for a server of one loop:
// while one loop closes its SO_REUSEPORT socket, a connect can be reset
// although another loop's socket still listens (and that loop has not begun
// to drain).
void WaitUntilRefused(int port) {
  const bool refused = testing::Eventually(
      [port] {
        const int probe = Connect(port);
        if (probe < 0) return true;
        const bool self = SelfConnected(probe);
        ::close(probe);
        return self;
      },
      milliseconds(2000));
  EXPECT_TRUE(refused) << "port " << port << " still accepts";
}

// Whether the peer closes `fd` within `within` (reading what comes).
bool ClosedWithin(int fd, milliseconds within) {
  const auto give_up = steady_clock::now() + within;
  while (steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[256];
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

// One whole HTTP response with a Content-Length body.
bool WholeResponse(const std::string& s) {
  const size_t end = s.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const size_t cl = s.find("Content-Length: ");
  if (cl == std::string::npos || cl > end) return true;
  return s.size() >= end + 4 + std::stoul(s.substr(cl + 16));
}

std::string Get(const char* path) {
  return std::string("GET ") + path + " HTTP/1.1\r\nHost: t\r\n\r\n";
}

class GracefulRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config =
        ParseConfig("rules:\n  api: { algorithm: fixed_window, limits: [5/minute] }\n", "test");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto limiter_services = api::OpenServices(*config, SystemClock::Default());
    ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
    services_ = std::move(*limiter_services);
  }

  ServerOptions Options(const std::string& http, const std::string& resp = "",
                        int threads = 2) const {
    ServerOptions options;
    options.http_address = http;
    options.resp_address = resp;
    options.threads = threads;
    options.limits.idle_polls = 0;
    return options;
  }

  std::unique_ptr<service::Services> services_;
};

TEST_F(GracefulRestartTest, AHeldPortIsJoinedOnlyWithReplace) {
  auto first = Server::Start(Options("127.0.0.1:0"), services_.get());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string address = (*first)->http_address();

  auto refused = Server::Start(Options(address), services_.get());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("in use"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(kReplaceHint), std::string::npos)
      << refused.status().message();

  ServerOptions replace = Options(address);
  replace.replace = true;
  auto second = Server::Start(replace, services_.get());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)->http_address(), address);
  // The first one stops; the port stays served, by the second.
  (*first)->Stop();
  (*first)->Wait();
  for (int i = 0; i < 20; ++i) {
    const int fd = Connect(PortOf(address));
    ASSERT_GE(fd, 0) << "connection " << i << " refused after the first server stopped";
    const std::string request = Get("/readyz");
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    bool closed = false;
    const std::string got = ReadUntil(fd, WholeResponse, &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
    ::close(fd);
  }
}

TEST_F(GracefulRestartTest, BeforeServingRunsWithTheSocketsBoundAndCanStopTheStart) {
  // A port free now, named explicitly (port 0 would not be checkable).
  Endpoint probe{"127.0.0.1", 0};
  auto fd = Listen(&probe);
  ASSERT_TRUE(fd.ok());
  ::close(*fd);
  const Endpoint endpoint = probe;

  int calls = 0;
  ServerOptions options = Options(endpoint.ToString());
  options.before_serving = [&] {
    ++calls;
    // Bound already: another bind of the port fails.
    EXPECT_FALSE(CheckPortFree(endpoint).ok());
    return UnavailableError("the old process's state could not be read");
  };
  auto failed = Server::Start(options, services_.get());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "the old process's state could not be read");
  EXPECT_EQ(calls, 1);
  // Its sockets were closed.
  EXPECT_TRUE(CheckPortFree(endpoint).ok()) << CheckPortFree(endpoint).message();

  options.before_serving = [&] {
    ++calls;
    return Status::Ok();
  };
  auto started = Server::Start(options, services_.get());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(calls, 2);
}

TEST_F(GracefulRestartTest, TheDrainAnswersKeepAliveRequestsWithConnectionClose) {
  auto server = Server::Start(Options("127.0.0.1:0", "", 1), services_.get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = PortOf((*server)->http_address());
  const int busy = Connect(port);  // sends again soon after the drain began
  const int idle = Connect(port);  // sends nothing more
  ASSERT_GE(busy, 0);
  ASSERT_GE(idle, 0);
  bool closed = false;
  steady_clock::time_point idle_sent;
  for (const int fd : {busy, idle}) {
    const std::string request = Get("/readyz");
    idle_sent = steady_clock::now();  // the idle one's last: it is sent second
    ASSERT_GT(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), 0);
    const std::string got = ReadUntil(fd, WholeResponse, &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
    EXPECT_EQ(got.find("Connection: close"), std::string::npos) << got;
  }
  const auto stop_at = steady_clock::now();
  (*server)->Stop();
  // A request on the wire as the drain begins (here: once the listener is
  // gone, well within the grace) is answered, not dropped: 503 from
  // /readyz, and the connection closes after it.
  WaitUntilRefused(port);
  const std::string request = Get("/readyz");
  ASSERT_GT(::send(busy, request.data(), request.size(), MSG_NOSIGNAL), 0);
  const std::string got = ReadUntil(busy, WholeResponse, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_NE(got.find("draining"), std::string::npos) << got;
  EXPECT_TRUE(ClosedWithin(busy, milliseconds(2000)));
  // The idle one is closed once it has been quiet for the grace.
  EXPECT_TRUE(ClosedWithin(idle, milliseconds(3000)));
  // Not before the grace: quiet counts from its last request.
  EXPECT_GE(steady_clock::now() - idle_sent, milliseconds(EventLoop::kDrainGraceMs));
  (*server)->Wait();
  EXPECT_LT(steady_clock::now() - stop_at, milliseconds(4000));
  ::close(busy);
  ::close(idle);
}

TEST_F(GracefulRestartTest, TheDrainClosesARespConnectionAfterItsNextReply) {
  auto server = Server::Start(Options("", "127.0.0.1:0", 1), services_.get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = PortOf((*server)->resp_address());
  const int fd = Connect(port);
  ASSERT_GE(fd, 0);
  auto pong = [](const std::string& s) { return s.find("\r\n") != std::string::npos; };
  const std::string ping = "*1\r\n$4\r\nPING\r\n";
  bool closed = false;
  ASSERT_GT(::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL), 0);
  EXPECT_EQ(ReadUntil(fd, pong, &closed), "+PONG\r\n");
  (*server)->Stop();
  WaitUntilRefused(port);
  // Two commands pipelined: both answered, then the connection closes.
  const std::string two = ping + ping;
  ASSERT_GT(::send(fd, two.data(), two.size(), MSG_NOSIGNAL), 0);
  auto both = [](const std::string& s) { return s.size() >= 14; };
  EXPECT_EQ(ReadUntil(fd, both, &closed), "+PONG\r\n+PONG\r\n");
  EXPECT_TRUE(ClosedWithin(fd, milliseconds(800)));
  (*server)->Wait();
  ::close(fd);
}

}  // namespace
}  // namespace floodgate::server
