// HttpPost: a non-blocking socket driven by poll() against one deadline (on
// the caller's Clock), so a gateway that accepts and then says nothing costs
// at most timeout_ms.
// Name resolution (getaddrinfo) has no deadline of its own: numeric
// addresses need none, and a worker thread can afford a slow resolver.
#include "service/delivery/http_post.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace floodgate::service {
namespace {

// A line of the request must not be split by a header's value.
std::string Clean(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\r' || c == '\n' || c == '\0') c = ' ';
  }
  return out;
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on `fd` until `deadline_ns` on `clock`. False on timeout.
bool Wait(int fd, short events, const Clock& clock, int64_t deadline_ns) {
  while (true) {
    const int64_t now = clock.MonotonicNs();
    if (now >= deadline_ns) return false;
    // Rounded up to poll's whole milliseconds: waking before the deadline
    // would only spin.
    const int64_t sleep_ns = clock.SleepNs(now, deadline_ns);
    const int ms = static_cast<int>(std::min<int64_t>((sleep_ns + 999'999) / 1'000'000, 3'600'000));
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // the next call reports the error
  }
}

}  // namespace

Result<HttpPostResult> HttpPost(const HttpUrl& url, std::string_view body,
                                const std::vector<std::pair<std::string, std::string>>& headers,
                                int64_t timeout_ms, const Clock& clock) {
  const int64_t deadline = clock.MonotonicNs() + timeout_ms * 1'000'000;
  const std::string where = url.HostHeader();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return UnavailableError("resolve " + url.host + ": " + ::gai_strerror(rc));
  }
  // The first address that accepts the connection.
  int fd = -1;
  std::string connect_error = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
      connect_error = std::strerror(errno);
      continue;
    }
    if (::connect(s, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      connect_error = std::strerror(errno);
      ::close(s);
      continue;
    }
    if (!Wait(s, POLLOUT, clock, deadline)) {
      ::close(s);
      ::freeaddrinfo(found);
      return Status(StatusCode::kDeadlineExceeded, "connect to " + where + ": timed out");
    }
    int error = 0;
    socklen_t len = sizeof(error);
    ::getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      connect_error = std::strerror(error);
      ::close(s);
      continue;
    }
    fd = s;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return UnavailableError("connect to " + where + ": " + connect_error);
  Socket socket(fd);

  std::string request = "POST " + url.path + " HTTP/1.1\r\nHost: " + where +
                        "\r\nUser-Agent: floodgate\r\nContent-Type: application/json\r\n";
  for (const auto& [name, value] : headers) request += Clean(name) + ": " + Clean(value) + "\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  request.append(body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return UnavailableError("send to " + where + ": " + std::strerror(errno));
    }
    if (!Wait(fd, POLLOUT, clock, deadline)) {
      return Status(StatusCode::kDeadlineExceeded, "send to " + where + ": timed out");
    }
  }

  // Only the status line matters: "HTTP/1.1 200 OK\r\n".
  std::string response;
  while (response.find("\r\n") == std::string::npos && response.size() < 1024) {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      response.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno != EAGAIN && errno != EINTR) {
      return UnavailableError("read from " + where + ": " + std::strerror(errno));
    }
    if (!Wait(fd, POLLIN, clock, deadline)) {
      return Status(StatusCode::kDeadlineExceeded, "no answer from " + where + " in time");
    }
  }
  // "HTTP/1.x NNN"
  if (response.size() < 12 || response.compare(0, 7, "HTTP/1.") != 0 || response[8] != ' ') {
    return UnavailableError("no HTTP status line from " + where);
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (response[i] < '0' || response[i] > '9') {
      return UnavailableError("bad HTTP status line from " + where);
    }
    status = status * 10 + (response[i] - '0');
  }
  return HttpPostResult{status};
}

}  // namespace floodgate::service
