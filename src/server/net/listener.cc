// Listening sockets: see listener.h.
#include "server/net/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

namespace floodgate::server {

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<Endpoint> ParseEndpoint(const std::string& text) {
  Endpoint e;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgumentError("address '" + text + "' must be host:port or [v6]:port");
    }
    e.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgumentError("address '" + text + "' must be host:port");
    }
    e.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (e.host == "localhost") e.host = "127.0.0.1";
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), e.port);
  if (ec != std::errc() || p != port_text.data() + port_text.size() || e.port < 0 ||
      e.port > 65535) {
    return InvalidArgumentError("address '" + text + "': port must be 0..65535");
  }
  in6_addr v6;
  in_addr v4;
  if (inet_pton(AF_INET, e.host.c_str(), &v4) != 1 &&
      inet_pton(AF_INET6, e.host.c_str(), &v6) != 1) {
    return InvalidArgumentError("address '" + text + "': host must be a numeric IP address");
  }
  return e;
}

namespace {

// Fills `ss` for endpoint; returns the address length, or 0 if the host is bad.
socklen_t SockAddr(const Endpoint& endpoint, sockaddr_storage* ss, int* family) {
  *ss = {};
  auto* sin = reinterpret_cast<sockaddr_in*>(ss);
  if (inet_pton(AF_INET, endpoint.host.c_str(), &sin->sin_addr) == 1) {
    sin->sin_family = *family = AF_INET;
    sin->sin_port = htons(static_cast<uint16_t>(endpoint.port));
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (inet_pton(AF_INET6, endpoint.host.c_str(), &sin6->sin6_addr) != 1) return 0;
  sin6->sin6_family = *family = AF_INET6;
  sin6->sin6_port = htons(static_cast<uint16_t>(endpoint.port));
  return sizeof(sockaddr_in6);
}

}  // namespace

Status CheckPortFree(const Endpoint& endpoint, const std::string& what) {
  if (endpoint.port == 0) return Status::Ok();
  sockaddr_storage ss;
  int family = 0;
  const socklen_t len = SockAddr(endpoint, &ss, &family);
  if (len == 0) return InvalidArgumentError("bad address " + endpoint.ToString());
  // A bind without SO_REUSEPORT fails on a port that any socket holds, also
  // the SO_REUSEPORT sockets of another floodgate that ours would join.
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // TIME_WAIT is fine
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    return UnavailableError("cannot listen " + what + "on " + endpoint.ToString() + ": " +
                            std::strerror(err) + (err == EADDRINUSE ? kReplaceHint : ""));
  }
  return Status::Ok();
}

bool TcpMigrateReq(bool* known) {
  std::ifstream in("/proc/sys/net/ipv4/tcp_migrate_req");
  int value = 0;
  *known = static_cast<bool>(in >> value);
  return *known && value != 0;
}

Result<int> Listen(Endpoint* endpoint, int backlog) {
  sockaddr_storage ss;
  int family = 0;
  const socklen_t len = SockAddr(*endpoint, &ss, &family);
  if (len == 0) return InvalidArgumentError("bad address " + endpoint->ToString());
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int err = errno;
    close(fd);
    return UnavailableError("cannot listen on " + endpoint->ToString() + ": " + std::strerror(err));
  }
  if (listen(fd, backlog) != 0) {
    const int err = errno;
    close(fd);
    return UnavailableError("listen " + endpoint->ToString() + ": " + std::strerror(err));
  }
  if (endpoint->port == 0) {
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
    endpoint->port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  return fd;
}

}  // namespace floodgate::server
