// A tiny HTTP/1.1 receiver for tests of outgoing POSTs: a listening socket
// on a loopback port (a free one, or a given one: a receiver that went down
// comes back where it was) and a thread that accepts connections one at a
// time, reads one request (header and Content-Length body), records it and
// answers with a configured status, or says nothing (to test timeouts).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace floodgate::testing {

class HttpReceiver {
 public:
  struct Request {
    std::string head;  // request line and header fields
    std::string body;
    int answered = 0;  // the status it was answered with (0: none)

    // The value of header field `name` (as sent; case-sensitive), or "".
    std::string Header(const std::string& name) const {
      const size_t at = head.find("\r\n" + name + ": ");
      if (at == std::string::npos) return "";
      const size_t from = at + 4 + name.size();
      return head.substr(from, head.find("\r\n", from) - from);
    }
  };

  // `status` 0: read the request and never answer (until destroyed).
  // `port` 0: any free port.
  explicit HttpReceiver(int status = 200, int port = 0) : status_(status) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 16);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~HttpReceiver() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // Waits until `n` requests arrived (at most `timeout`); returns them.
  std::vector<Request> WaitFor(size_t n,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
    return requests_;
  }

  // The status later requests are answered with.
  void set_status(int status) { status_ = status; }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Request r;
      std::string data;
      char buf[4096];
      size_t need = std::string::npos;
      while (!stop_) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0) continue;
        const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
        const size_t end = data.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        if (need == std::string::npos) {
          r.head = data.substr(0, end);
          const size_t cl = r.head.find("Content-Length: ");
          need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(r.head.substr(cl + 16)));
        }
        if (data.size() >= need) {
          r.body = data.substr(end + 4, need - end - 4);
          break;
        }
      }
      const int status = status_;
      r.answered = status;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(r);
      }
      cv_.notify_all();
      if (status == 0) {
        while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        const std::string answer = "HTTP/1.1 " + std::to_string(status) +
                                   " Whatever\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }

  std::atomic<int> status_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Request> requests_;
  std::thread thread_;
};

}  // namespace floodgate::testing
