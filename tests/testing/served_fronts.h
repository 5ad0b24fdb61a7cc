// ServedFronts: the RESP and HTTP fronts of a real Server on 127.0.0.1
// (ports chosen by the kernel) over service::Services, with one blocking
// request at a time over real sockets: for unit tests that drive a request
// through a front end to end, whatever the store behind it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/resp/writer.h"
#include "server/server.h"

namespace floodgate::testing {

class ServedFronts {
 public:
  explicit ServedFronts(service::Services* services) {
    server::ServerOptions options;
    options.resp_address = "127.0.0.1:0";
    options.http_address = "127.0.0.1:0";
    options.threads = 1;
    auto server = server::Server::Start(options, services);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) server_ = std::move(*server);
  }
  ~ServedFronts() {
    if (server_ != nullptr) server_->Stop();
  }

  bool ok() const { return server_ != nullptr; }

  // The raw HTTP/1.1 response to one request (Connection: close).
  std::string Http(std::string_view method, std::string_view target, std::string_view body = {}) {
    std::string request = std::string(method) + " " + std::string(target) +
                          " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n";
    if (!body.empty()) {
      request +=
          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n";
    }
    request += "\r\n";
    request.append(body);
    return Exchange(server_->http_address(), request, /*until_close=*/true);
  }

  // The raw RESP reply to one command.
  std::string Resp(const std::vector<std::string>& args) {
    std::string request;
    resp::AppendArrayHeader(&request, static_cast<int64_t>(args.size()));
    for (const std::string& a : args) resp::AppendBulk(&request, a);
    return Exchange(server_->resp_address(), request, /*until_close=*/false);
  }

 private:
  // Sends `request` and reads until the peer closes, or (RESP) until one
  // whole reply has come.
  static std::string Exchange(const std::string& address, const std::string& request,
                              bool until_close) {
    const size_t colon = address.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      ADD_FAILURE() << "cannot connect to " << address;
      return {};
    }
    EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string got;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
      if (!until_close && Complete(got)) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  }

  // Whether `s` holds one whole RESP reply (the shapes the fronts send).
  static bool Complete(std::string_view s) {
    size_t pos = 0;
    return Skip(s, &pos) && pos == s.size();
  }
  static bool Skip(std::string_view s, size_t* pos) {
    const size_t eol = s.find("\r\n", *pos);
    if (eol == std::string_view::npos) return false;
    const char type = s[*pos];
    const long long n = type == '+' || type == '-'
                            ? 0
                            : std::stoll(std::string(s.substr(*pos + 1, eol - *pos - 1)));
    *pos = eol + 2;
    if (type == '$') {
      if (n < 0) return true;
      if (s.size() < *pos + static_cast<size_t>(n) + 2) return false;
      *pos += static_cast<size_t>(n) + 2;
      return true;
    }
    if (type == '*') {
      for (long long i = 0; i < n; ++i) {
        if (!Skip(s, pos)) return false;
      }
    }
    return true;
  }

  std::unique_ptr<server::Server> server_;
};

}  // namespace floodgate::testing
