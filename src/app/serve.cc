// `floodgate serve`: loads and validates the config, starts the fronts,
// then waits for signals in the main thread: SIGHUP reloads the config
// (a bad one is refused and logged; the old one keeps serving), SIGTERM and
// SIGINT stop cleanly.
#include "app/serve.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/log.h"
#include "floodgate/config.h"
#include "redis/url.h"
#include "server/grpc_front.h"
#include "server/server.h"
#include "service/envoy_rls.h"
#include "service/limiter_core.h"

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

// Descriptors a server needs besides its client connections: listeners,
// epoll and event fds, Redis connections, log and spool files, gRPC.
constexpr int64_t kReservedFds = 256;

// Raises the soft limit on open files to the hard limit (the default soft
// limit, often 1024, is far below max_connections), and warns when
// max_connections still does not fit: past the limit accept() fails, and
// the server then evicts idle connections or backs off (docs/operations.md).
void RaiseFileLimit(int64_t max_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const int64_t usable = limit.rlim_cur == RLIM_INFINITY
                             ? INT64_MAX
                             : static_cast<int64_t>(limit.rlim_cur) - kReservedFds;
  if (max_connections > usable) {
    Log(LogLevel::kWarn, "max_connections does not fit the open-file limit",
        {{"max_connections", std::to_string(max_connections)},
         {"nofile", std::to_string(limit.rlim_cur)},
         {"reserved", std::to_string(kReservedFds)},
         {"hint", "raise LimitNOFILE= (systemd) or ulimit -n, or lower server.max_connections"}});
  }
}

// The bounds of one front's connections, from the server section.
server::ConnectionPolicy Policy(const ServerConfig& c, int64_t request_timeout_ms,
                                int64_t idle_timeout_ms) {
  server::ConnectionPolicy p;
  p.request_timeout_ms = request_timeout_ms;
  p.idle_timeout_ms = idle_timeout_ms;
  p.output_soft_limit = static_cast<size_t>(c.output_soft_limit);
  p.output_soft_timeout_ms = c.output_soft_timeout_ms;
  p.output_hard_limit = static_cast<size_t>(c.output_hard_limit);
  return p;
}

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
  // envoyproxy/ratelimit's files become rules the Limiter must know first.
  auto envoy_rules = envoy::Rules::Load(*config);
  if (!envoy_rules.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", envoy_rules.status().message()}});
    return 1;
  }
  SystemClock clock;
  auto limiter =
      service::LimiterCore::Create(envoy::WithEnvoyRules(*config, **envoy_rules, nullptr), clock);
  if (!limiter.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", limiter.status().message()}});
    return 1;
  }
  envoy::RateLimitService rls(limiter->get());
  rls.SetRules(*envoy_rules);
  // The gRPC front serves Envoy's RateLimitService: it starts when there is
  // something to serve (envoy_ratelimit files) or when --grpc asks for it.
  std::unique_ptr<server::GrpcFront> grpc_front;
  const std::string grpc_address = Address(config->listen.grpc);
  if (!grpc_address.empty() && (!config->envoy_ratelimit.files.empty() || !flags.grpc.empty())) {
    server::GrpcFrontOptions grpc_options;
    grpc_options.address = grpc_address;
    grpc_options.keepalive_time_ms = config->server.grpc_keepalive_time_ms;
    grpc_options.keepalive_timeout_ms = config->server.grpc_keepalive_timeout_ms;
    grpc_options.drain_timeout_ms = config->server.drain_timeout_ms;
    auto front = server::GrpcFront::Start(grpc_options, &rls);
    if (!front.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", front.status().message()}});
      return 1;
    }
    grpc_front = std::move(*front);
  }
  server::ServerOptions options;
  options.resp_address = Address(config->listen.resp);
  options.http_address = Address(config->listen.http);
  options.threads = flags.threads > 0            ? flags.threads
                    : config->server.threads > 0 ? config->server.threads
                                                 : server::DefaultLoopCount(server::UsableCores());
  options.cores = server::UsableCores();
  options.limits.max_connections = config->server.max_connections;
  options.limits.drain_timeout_ms = config->server.drain_timeout_ms;
  options.max_connections_per_ip = config->server.max_connections_per_ip;
  options.http_policy = Policy(config->server, config->server.http_request_timeout_ms,
                               config->server.http_idle_timeout_ms);
  options.resp_policy = Policy(config->server, config->server.resp_command_timeout_ms,
                               config->server.resp_idle_timeout_ms);
  RaiseFileLimit(options.limits.max_connections);
  options.auth_token = config->server.auth_token;
  if (grpc_front != nullptr) {
    options.extra_metrics = [f = grpc_front.get()](std::string* out) { f->RenderMetrics(out); };
  }
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
       {"grpc", grpc_front != nullptr ? grpc_front->address() : ""},
       {"threads", std::to_string(options.threads)},
       {"store", StoreForLog(config->store)},
       {"rules", std::to_string(config->rules.size())},
       {"auth", options.auth_token.empty() ? "off" : "token"},
       {"envoy_domains", std::to_string((*envoy_rules)->num_domains())}});

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (flags.config_path.empty()) {
        Log(LogLevel::kWarn, "SIGHUP ignored: no --config file to reload");
        continue;
      }
      // All or nothing: the Envoy files and the rules are read and compiled
      // before anything is replaced.
      auto fresh = Load(flags);
      Result<std::shared_ptr<const envoy::Rules>> fresh_envoy =
          fresh.ok() ? envoy::Rules::Load(*fresh) : fresh.status();
      Status s = fresh_envoy.status();
      if (s.ok()) {
        s = (*limiter)->Reload(envoy::WithEnvoyRules(*fresh, **fresh_envoy, rls.rules().get()));
      }
      if (s.ok()) rls.SetRules(*fresh_envoy);
      if (!s.ok()) {
        Log(LogLevel::kError, "reload refused; the previous config keeps serving",
            {{"config", flags.config_path}, {"error", s.message()}});
        continue;
      }
      Log(LogLevel::kInfo, "config reloaded",
          {{"config", flags.config_path},
           {"rules", std::to_string(fresh->rules.size())},
           {"envoy_domains", std::to_string((*fresh_envoy)->num_domains())}});
      continue;
    }
    Log(LogLevel::kInfo, "shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    if (grpc_front != nullptr) grpc_front->Stop();
    (*server)->Stop();
    (*server)->Wait();
    return 0;
  }
}

}  // namespace floodgate::app
