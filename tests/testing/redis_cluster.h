// A real Redis Cluster for tests: three (or more) redis-servers with
// --cluster-enabled yes on free ports, each in its own temporary directory,
// joined by `redis-cli --cluster create ... --cluster-replicas 0`.
//
//   floodgate::testing::RedisCluster cluster;
//   ASSERT_TRUE(cluster.Start()) << cluster.error();
//   ... cluster.url() ...  // redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3
//
// Start() fails (with a reason in error()) when redis-server or redis-cli is
// missing or the cluster does not reach cluster_state:ok within 20 s; tests
// ASSERT on it, never skip.
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testing/redis_server.h"

namespace floodgate::testing {

// Runs `argv` to completion with stdout and stderr appended to `log_path`;
// returns its exit status, or -1 when it could not run or timed out.
inline int RunToCompletion(const std::vector<std::string>& argv, const std::string& log_path,
                           std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// The text of `command` sent to 127.0.0.1:port (a status, bulk string or
// error reply), or "" when the server cannot be reached.
inline std::string QueryText(int port, const std::vector<std::string>& command) {
  redisContext* c = redisConnect("127.0.0.1", port);
  std::string out;
  if (c != nullptr && c->err == 0) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : command) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r != nullptr) {
      if (r->str != nullptr) out.assign(r->str, r->len);
      if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
      freeReplyObject(r);
    }
  }
  if (c != nullptr) redisFree(c);
  return out;
}

// Stalls the redis-server at 127.0.0.1:port for `seconds`, as a server that
// stops answering: CLIENT PAUSE ... ALL, acknowledged before this returns, so
// the stall is in force once it has (a DEBUG SLEEP sent from another thread
// may not have begun yet on a loaded machine). Commands sent meanwhile are
// read and answered once it ends. The thread returned ends when the server
// answers again (Redis lifts a pause on its own timer, up to a cron period
// after `seconds`): join() it to wait for that.
inline std::thread StallServer(int port, double seconds) {
  const auto ms = static_cast<int64_t>(seconds * 1000);
  const std::string ok = QueryText(port, {"CLIENT", "PAUSE", std::to_string(ms), "ALL"});
  if (ok != "OK") std::fprintf(stderr, "StallServer: CLIENT PAUSE answered \"%s\"\n", ok.c_str());
  const auto ends = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  return std::thread([port, ends] {
    std::this_thread::sleep_until(ends);
    QueryText(port, {"PING"});  // blocks until the pause is lifted
  });
}

// EVALSHA plus EVAL calls a redis-server has run since its last CONFIG
// RESETSTAT: how many script calls carried the decisions of a test.
inline int64_t ScriptCalls(int port) {
  const std::string info = QueryText(port, {"INFO", "commandstats"});
  int64_t calls = 0;
  for (const char* name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const size_t at = info.find(name);
    if (at != std::string::npos) calls += std::stoll(info.substr(at + std::strlen(name)));
  }
  return calls;
}

class RedisCluster {
 public:
  bool Start(int masters = 3) {
    for (int i = 0; i < masters; ++i) {
      auto server = std::make_unique<RedisServer>();
      // The bus port is chosen too: the default (port + 10000) may be taken
      // or past 65535.
      if (!server->Start({"--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
                          "--cluster-port", std::to_string(FreePort())})) {
        return Fail("cluster node " + std::to_string(i) + ": " + server->error());
      }
      servers_.push_back(std::move(server));
    }
    std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
    for (const auto& s : servers_) argv.push_back("127.0.0.1:" + std::to_string(s->port()));
    argv.insert(argv.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    const std::string log = servers_.front()->dir() + "/cluster-create.log";
    const int rc = RunToCompletion(argv, log);
    if (rc != 0) {
      return Fail("redis-cli --cluster create failed (exit " + std::to_string(rc) +
                  "; is redis-tools installed? see " + log + ")");
    }
    // Every node must agree: state ok, all slots served, every node known.
    for (int i = 0; i < 2000; ++i) {
      bool all_ok = true;
      for (const auto& s : servers_) {
        const std::string info = QueryText(s->port(), {"CLUSTER", "INFO"});
        all_ok &= info.find("cluster_state:ok") != std::string::npos &&
                  info.find("cluster_slots_ok:16384") != std::string::npos &&
                  info.find("cluster_known_nodes:" + std::to_string(masters)) != std::string::npos;
      }
      if (all_ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Fail("the cluster did not reach cluster_state:ok within 20 s");
  }

  // All nodes as seeds.
  std::string url() const {
    std::string out = "redis+cluster://";
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (i > 0) out += ',';
      out += "127.0.0.1:" + std::to_string(servers_[i]->port());
    }
    return out;
  }
  size_t size() const { return servers_.size(); }
  RedisServer& server(size_t i) { return *servers_[i]; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::string error_;
};

}  // namespace floodgate::testing
