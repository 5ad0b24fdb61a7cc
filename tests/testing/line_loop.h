// An event loop for tests of the loop itself: one loopback listener whose
// sessions echo each complete line (a line without its '\n' is a partial
// request, so the request timeout runs on it), on a ManualClock, with TLS
// when given a context.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "server/net/event_loop.h"
#include "server/net/listener.h"
#include "server/net/session.h"
#include "server/net/tls_context.h"
#include "testing/eventually.h"

namespace floodgate::testing {

class LineSession final : public server::Session {
 public:
  size_t OnInput(std::string_view input, std::string* output, bool*) override {
    const size_t end = input.find('\n');
    if (end == std::string_view::npos) return 0;
    output->append(input.substr(0, end + 1));
    return end + 1;
  }
};

class LineFactory final : public server::SessionFactory {
 public:
  std::unique_ptr<server::Session> NewSession(int, server::ConnectionRef) override {
    return std::make_unique<LineSession>();
  }
  std::string RefusalMessage() const override { return ""; }
};

// One loop of LineSessions on one loopback listener, on `clock`; TLS with
// `tls` (which must outlive the loop).
class LineLoop {
 public:
  LineLoop(ManualClock& clock, const server::ConnectionPolicy& policy,
           server::TlsContextHolder* tls = nullptr)
      : clock_(clock) {
    server::Endpoint endpoint{"127.0.0.1", 0};
    Result<int> fd = server::Listen(&endpoint);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    port_ = endpoint.port;
    std::vector<server::ListenerSpec> listeners;
    listeners.push_back(server::ListenerSpec{fd.ok() ? *fd : -1, &factory_, &counters_, "",
                                             "timeout\n", "line", policy, tls});
    server::LoopLimits limits;
    limits.idle_polls = 0;
    loop_ = std::make_unique<server::EventLoop>(0, std::move(listeners), limits, &open_, clock);
    thread_ = std::thread([this] { loop_->Run(); });
  }
  ~LineLoop() {
    loop_->Stop();
    clock_.AdvanceMs(3'600'000);  // whatever is still busy, the drain ends
    thread_.join();
  }
  LineLoop(const LineLoop&) = delete;
  LineLoop& operator=(const LineLoop&) = delete;

  // A connected client socket (blocking), accepted by the loop.
  int Connect() {
    const int64_t accepted = counters_.accepted.load();
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_TRUE(Eventually([&] { return counters_.accepted.load() > accepted; }));
    return fd;
  }
  const server::ListenerCounters& counters() const { return counters_; }
  int64_t closed(server::CloseReason reason) const {
    return counters_.closed[static_cast<int>(reason)].load();
  }

 private:
  ManualClock& clock_;
  LineFactory factory_;
  server::ListenerCounters counters_;
  std::atomic<int64_t> open_{0};
  int port_ = 0;
  std::unique_ptr<server::EventLoop> loop_;
  std::thread thread_;
};

}  // namespace floodgate::testing
