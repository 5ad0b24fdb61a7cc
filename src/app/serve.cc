// `floodgate serve`: loads and validates the config, starts the fronts,
// then waits for signals in the main thread: SIGHUP reloads the config
// (a bad one is refused and logged; the old one keeps serving), SIGTERM and
// SIGINT stop cleanly.
#include "app/serve.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/log.h"
#include "floodgate/config.h"
#include "floodgate/limiter.h"
#include "redis/url.h"
#include "server/server.h"

namespace floodgate::app {
namespace {

// The config used when none is given: the shipped example, else no rules.
Result<Config> DefaultConfig() {
  for (const char* path : {"examples/floodgate.yaml", "/etc/floodgate/floodgate.yaml"}) {
    if (std::ifstream(path).good()) return LoadConfigFile(path);
  }
  return ParseConfig("rules: {}\n", "<built-in>");
}

Result<Config> Load(const ServeFlags& flags) {
  auto config = flags.config_path.empty() ? DefaultConfig() : LoadConfigFile(flags.config_path);
  if (!config.ok()) return config.status();
  if (!flags.store.empty()) config->store = flags.store;
  if (!flags.http.empty()) config->listen.http = flags.http;
  if (!flags.resp.empty()) config->listen.resp = flags.resp;
  if (!flags.grpc.empty()) config->listen.grpc = flags.grpc;
  if (config->store != "memory") {
    // --store bypasses the file's validation.
    if (auto url = redis::ParseStoreUrl(config->store); !url.ok()) return url.status();
  }
  return config;
}

// The store URL without its password.
std::string StoreForLog(const std::string& store) {
  if (store == "memory") return store;
  auto url = redis::ParseStoreUrl(store);
  return url.ok() ? url->Redacted() : "?";
}

// "off" disables a front.
std::string Address(const std::string& a) { return a == "off" ? "" : a; }

}  // namespace

int RunServe(const ServeFlags& flags) {
  // Signals are taken synchronously by this thread only: block them before
  // any other thread starts so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto config = Load(flags);
  if (!config.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", config.status().message()}});
    return 1;
  }
  SystemClock clock;
  auto limiter = Limiter::Create(*config, clock);
  if (!limiter.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", limiter.status().message()}});
    return 1;
  }
  server::ServerOptions options;
  options.resp_address = Address(config->listen.resp);
  options.http_address = Address(config->listen.http);
  options.threads = flags.threads > 0 ? flags.threads
                    : config->server.threads > 0
                        ? config->server.threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.limits.max_connections = config->server.max_connections;
  options.auth_token = config->server.auth_token;
  if (!config->server.auth_token_env.empty()) {
    const char* token = std::getenv(config->server.auth_token_env.c_str());
    if (token == nullptr || *token == '\0') {
      Log(LogLevel::kError, "auth token variable is not set",
          {{"variable", config->server.auth_token_env}});
      return 1;
    }
    options.auth_token = token;
  }
  auto server = server::Server::Start(options, limiter->get());
  if (!server.ok()) {
    Log(LogLevel::kError, "cannot start", {{"error", server.status().message()}});
    return 1;
  }
  Log(LogLevel::kInfo, "listening",
      {{"resp", (*server)->resp_address()},
       {"http", (*server)->http_address()},
       {"threads", std::to_string(options.threads)},
       {"store", StoreForLog(config->store)},
       {"rules", std::to_string(config->rules.size())},
       {"auth", options.auth_token.empty() ? "off" : "token"}});
  if (!config->listen.grpc.empty() && flags.grpc.size() > 0) {
    Log(LogLevel::kWarn, "the gRPC front is not available in this version; --grpc ignored");
  }

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (flags.config_path.empty()) {
        Log(LogLevel::kWarn, "SIGHUP ignored: no --config file to reload");
        continue;
      }
      auto fresh = Load(flags);
      Status s = fresh.ok() ? (*limiter)->Reload(*fresh) : fresh.status();
      if (!s.ok()) {
        Log(LogLevel::kError, "reload refused; the previous config keeps serving",
            {{"config", flags.config_path}, {"error", s.message()}});
        continue;
      }
      Log(LogLevel::kInfo, "config reloaded",
          {{"config", flags.config_path}, {"rules", std::to_string(fresh->rules.size())}});
      continue;
    }
    Log(LogLevel::kInfo, "shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    (*server)->Stop();
    (*server)->Wait();
    return 0;
  }
}

}  // namespace floodgate::app
