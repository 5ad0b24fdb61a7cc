// Real Redis processes for tests: a redis-server on a free port in its own
// temporary directory, stopped (SIGTERM, then SIGKILL) when destroyed.
//
//   floodgate::testing::RedisServer redis;
//   ASSERT_TRUE(redis.Start()) << redis.error();
//   ... redis.port() ...
//
// Start() fails (with a reason in error()) when redis-server is missing or
// does not answer PING within 10 s; tests ASSERT on it, never skip.
#pragma once

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace floodgate::testing {

// A TCP port nobody listens on right now (bound to port 0, then released).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// Runs `argv` as a child process; returns its pid or -1.
inline pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  return pid;
}

// Stops a child: SIGTERM, then SIGKILL after 5 s.
inline void Stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Whether a Redis-protocol server at 127.0.0.1:port answers PING.
inline bool AnswersPing(int port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
    if (r != nullptr) freeReplyObject(r);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

class RedisServer {
 public:
  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() {
    Stop(pid_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // `extra` are further redis-server arguments ("--cluster-enabled", "yes", …).
  bool Start(const std::vector<std::string>& extra = {}) {
    char tmpl[] = "/tmp/floodgate-redis-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return Fail("mkdtemp failed");
    dir_ = tmpl;
    port_ = FreePort();
    extra_ = extra;
    pid_ = Spawn(Argv());
    if (pid_ < 0) return Fail("cannot run redis-server (is it installed? scripts/setup.sh)");
    for (int i = 0; i < 1000; ++i) {
      if (AnswersPing(port_)) return true;
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return Fail("redis-server exited; see its log in " + dir_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Fail("redis-server did not answer PING within 10 s");
  }

  // Stops the server (as if it crashed or was shut down); Start() again to
  // bring a new one up on a new port, RestartSamePort() on the same one.
  void Kill() {
    Stop(pid_);
    pid_ = -1;
  }
  bool RestartSamePort() {
    Kill();
    pid_ = Spawn(Argv());
    for (int i = 0; i < 1000 && pid_ > 0; ++i) {
      if (AnswersPing(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Fail("redis-server did not come back on port " + std::to_string(port_));
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  std::vector<std::string> Argv() const {
    std::vector<std::string> argv = {
        "redis-server", "--port",    std::to_string(port_), "--bind", "127.0.0.1",
        "--save",       "",          "--appendonly",        "no",     "--dir",
        dir_,           "--logfile", dir_ + "/redis.log"};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    return argv;
  }

  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  pid_t pid_ = -1;
  int port_ = -1;
  std::string dir_;
  std::string error_;
  std::vector<std::string> extra_;
};

}  // namespace floodgate::testing
