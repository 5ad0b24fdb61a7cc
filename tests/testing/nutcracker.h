// Twemproxy for tests: nutcracker on a free port in front of two
// redis-servers, sharding keys by their hash tag (fnv1a_64, ketama), as a
// deployment behind a proxy would.
//
//   floodgate::testing::Nutcracker proxy;
//   ASSERT_TRUE(proxy.Start()) << proxy.error();
//   ... proxy.url() ...  // redis+proxy://127.0.0.1:port
//
// Start() fails (with a reason in error()) when nutcracker or redis-server
// is missing or the proxy does not pass a command through within 10 s.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "testing/redis_cluster.h"
#include "testing/redis_server.h"

namespace floodgate::testing {

class Nutcracker {
 public:
  Nutcracker() = default;
  Nutcracker(const Nutcracker&) = delete;
  Nutcracker& operator=(const Nutcracker&) = delete;
  ~Nutcracker() {
    Stop(pid_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  bool Start(int backends = 2) {
    for (int i = 0; i < backends; ++i) {
      auto server = std::make_unique<RedisServer>();
      if (!server->Start()) return Fail("backend " + std::to_string(i) + ": " + server->error());
      backends_.push_back(std::move(server));
    }
    char tmpl[] = "/tmp/floodgate-nutcracker-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return Fail("mkdtemp failed");
    dir_ = tmpl;
    port_ = FreePort();
    const std::string conf = dir_ + "/nutcracker.yml";
    {
      std::ofstream out(conf);
      // No auto-ejection: a test that stops a backend wants errors, not a
      // silently re-sharded key space. hash_tag "{}" keeps fg:{rule:subject}
      // keys whole, as in Redis Cluster.
      out << "floodgate:\n"
          << "  listen: 127.0.0.1:" << port_ << "\n"
          << "  hash: fnv1a_64\n"
          << "  hash_tag: \"{}\"\n"
          << "  distribution: ketama\n"
          << "  redis: true\n"
          << "  timeout: 1000\n"
          << "  auto_eject_hosts: false\n"
          << "  server_retry_timeout: 200\n"
          << "  server_failure_limit: 3\n"
          << "  servers:\n";
      for (size_t i = 0; i < backends_.size(); ++i) {
        out << "   - 127.0.0.1:" << backends_[i]->port() << ":1 s" << i << "\n";
      }
      if (!out) return Fail("cannot write " + conf);
    }
    // A stats port of its own: the default (22222) would collide between tests.
    pid_ = Spawn({"nutcracker", "-c", conf, "-o", dir_ + "/nutcracker.log", "-s",
                  std::to_string(FreePort()), "-a", "127.0.0.1"});
    if (pid_ < 0) return Fail("cannot run nutcracker (is it installed? scripts/setup.sh)");
    for (int i = 0; i < 1000; ++i) {
      if (QueryText(port_, {"SET", "fixture:probe", "1"}) == "OK") return true;
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return Fail("nutcracker exited; see " + dir_ + "/nutcracker.log");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Fail("nutcracker did not pass SET through within 10 s");
  }

  int port() const { return port_; }
  std::string url() const { return "redis+proxy://127.0.0.1:" + std::to_string(port_); }
  RedisServer& backend(size_t i) { return *backends_[i]; }
  size_t backends() const { return backends_.size(); }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  std::vector<std::unique_ptr<RedisServer>> backends_;
  pid_t pid_ = -1;
  int port_ = -1;
  std::string dir_;
  std::string error_;
};

}  // namespace floodgate::testing
