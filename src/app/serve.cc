// `floodgate serve`: loads and validates the config, starts the fronts,
// then waits for signals in the main thread: SIGHUP reloads the config
// (a bad one is refused and logged; the old one keeps serving), SIGTERM and
// SIGINT stop cleanly.
#include "app/serve.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "api/open_services.h"
#include "api/simulation.h"
#include "app/data_dir_lock.h"
#include "app/example_config.h"
#include "app/version.h"
#include "common/log.h"
#include "common/store_url.h"
#include "floodgate/config.h"
#include "server/grpc/grpc_front.h"
#include "server/grpc/rls_service.h"
#include "server/net/tls_context.h"
#include "server/net/tls_reloader.h"
#include "server/observability/state_metrics.h"
#include "server/observability/tls_metrics.h"
#include "server/server.h"
#include "service/envoy/envoy_rules.h"
#include "service/services.h"
#include "service/snapshots/state_keeper.h"

namespace floodgate::app {
namespace {

server::TlsFiles TlsFilesOf(const TlsConfig& tls) {
  return {tls.cert_file, tls.key_file, tls.client_ca_file, tls.require_client_cert};
}

// The config used when none is given: examples/floodgate.yaml in the
// working directory, else /etc/floodgate/floodgate.yaml, else the copy of
// examples/floodgate.yaml built into the binary. Says which in the log.
Result<Config> DefaultConfig() {
  constexpr const char* kInstalled = "/etc/floodgate/floodgate.yaml";
  const bool local = std::ifstream("examples/floodgate.yaml").good();
  if (!local && std::ifstream(kInstalled).good()) {
    Log(LogLevel::kInfo, std::string("no --config given: serving ") + kInstalled,
        {{"config", kInstalled}});
    return LoadConfigFile(kInstalled);
  }
  if (local) {
    Log(LogLevel::kInfo, "no --config given: serving examples/floodgate.yaml",
        {{"config", "examples/floodgate.yaml"}});
  } else {
    Log(LogLevel::kInfo,
        "no --config given: serving the built-in example rules (examples/floodgate.yaml); "
        "--config FILE serves yours",
        {{"config", "built-in"}});
  }
  Result<Config> config = local ? LoadConfigFile("examples/floodgate.yaml")
                                : ParseConfig(kExampleConfig, "<built-in examples/floodgate.yaml>");
  if (!config.ok()) return config;
  // The example's otp section needs a secret nobody chose yet: without one
  // the rest of the example serves, with OTP off, and the log says so. (A
  // --config file asks for OTP on purpose: there a missing secret stops the
  // start.)
  const char* secret = std::getenv(config->otp.secret_env.c_str());
  if (config->otp.enabled && (secret == nullptr || *secret == '\0')) {
    config->otp.enabled = false;
    Log(LogLevel::kWarn,
        "OTP is off: " + config->otp.secret_env +
            " is not set (the example's otp section needs a secret of 16 bytes or more)",
        {{"hint", "export " + config->otp.secret_env + "=$(openssl rand -hex 32)"}});
  }
  return config;
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
    if (auto url = ParseStoreUrl(config->store); !url.ok()) return url.status();
  }
  return config;
}

// The store URL without its password.
std::string StoreForLog(const std::string& store) {
  if (store == "memory") return store;
  auto url = ParseStoreUrl(store);
  return url.ok() ? url->Redacted() : "?";
}

// After a reload: the rules it removed (checks naming them now answer
// "unknown rule"), and the changed settings it did not apply.
void LogReloadChanges(const Config& started, const Config& running, const Config& fresh) {
  if (auto removed = RemovedRules(running, fresh); !removed.empty()) {
    Log(LogLevel::kWarn, "reload removed rules: checks naming them now answer unknown rule",
        {{"rules", absl::StrJoin(removed, ",")}});
  }
  if (auto ignored = RestartOnlyChanges(started, fresh); !ignored.empty()) {
    Log(LogLevel::kWarn, "changed settings take effect only after a restart; still serving the old",
        {{"settings", absl::StrJoin(ignored, ",")}});
  }
}

// The fronts serving TLS, for the listening line: "off" or e.g.
// "resp,http" (gRPC only when its front runs).
std::string TlsFrontsForLog(const ListenTlsConfig& t, bool grpc_serves) {
  std::vector<std::string> fronts;
  if (t.resp) fronts.emplace_back("resp");
  if (t.http) fronts.emplace_back("http");
  if (t.grpc && grpc_serves) fronts.emplace_back("grpc");
  return fronts.empty() ? "off" : absl::StrJoin(fronts, ",");
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

// How long into a drain of `drain_timeout_ms` the requests held waiting
// are answered at the latest: early enough for the answer to be written
// before the drain closes the connection.
int64_t WaitsEndWithin(int64_t drain_timeout_ms) {
  return drain_timeout_ms - std::min<int64_t>(500, drain_timeout_ms / 2);
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
  if (Status s = CheckServesSomething(*config, (*envoy_rules)->num_domains()); !s.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", s.message()}});
    return 1;
  }
  // TLS (listen_tls): the certificate and key read and checked before
  // anything starts; a bad file stops the start, naming it.
  std::unique_ptr<server::TlsContextHolder> tls;
  std::unique_ptr<server::TlsReloader> tls_reloader;
  if (config->listen_tls.any()) {
    auto context = server::TlsContext::Load(TlsFilesOf(config->tls), std::time(nullptr));
    if (!context.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", context.status().message()}});
      return 1;
    }
    for (const std::string& warning : (*context)->warnings()) {
      Log(LogLevel::kWarn, "tls certificate", {{"warning", warning}});
    }
    tls = std::make_unique<server::TlsContextHolder>(*context);
    // Renewed files are taken when they change on disk, as on SIGHUP.
    tls_reloader = std::make_unique<server::TlsReloader>(tls.get(), server::kTlsWatchIntervalMs);
  }
  // One process per data_dir: the embedded store's snapshot and
  // control-plane records (a Redis store keeps both in Redis; its servers
  // may share a host and a config). Replacing a running floodgate
  // (--replace), this one binds its ports first and takes the data_dir (and
  // the state the old one saves as it stops) only then, before it accepts
  // anything: see before_serving below.
  const bool owns_data_dir = !config->data_dir.empty() && config->store == "memory";
  const bool hand_over = flags.replace && owns_data_dir;
  std::optional<DataDirLock> data_dir_lock;
  auto take_data_dir = [&](int64_t wait_ms) -> Status {
    auto lock = DataDirLock::Acquire(config->data_dir, wait_ms);
    if (!lock.ok()) return lock.status();
    data_dir_lock.emplace(std::move(*lock));
    return Status::Ok();
  };
  if (owns_data_dir && !hand_over) {
    if (Status s = take_data_dir(0); !s.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", s.message()}});
      return 1;
    }
  }
  SystemClock clock;
  auto services = api::OpenServices(envoy::WithEnvoyRules(*config, **envoy_rules, nullptr), clock);
  if (!services.ok()) {
    Log(LogLevel::kError, "invalid config", {{"error", services.status().message()}});
    return 1;
  }
  // The embedded store's state, kept in data_dir across restarts.
  std::unique_ptr<service::StateKeeper> state =
      (*services)->NewStateKeeper(config->data_dir, config->snapshot_interval_ms);
  auto load_state = [&]() -> Status {
    if (hand_over) {
      Log(LogLevel::kInfo, "waiting for the floodgate being replaced to stop and hand over",
          {{"data_dir", config->data_dir}});
      // Its drain, then its last snapshot.
      if (Status s = take_data_dir(config->server.drain_timeout_ms + 60'000); !s.ok()) return s;
    }
    if (state == nullptr) return Status::Ok();
    if (Status s = state->Load(flags.start_empty); !s.ok()) return s;
    state->Start();
    return Status::Ok();
  };
  if (!hand_over) {
    if (Status s = load_state(); !s.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", s.message()}});
      return 1;
    }
  }
  server::RlsService rls((*services)->core.get(), clock);
  rls.SetRules(*envoy_rules);
  // Event loops, and as many gRPC threads.
  const int threads = flags.threads > 0 ? flags.threads
                      : config->server.threads > 0
                          ? config->server.threads
                          : server::DefaultLoopCount(server::UsableCores());
  // The gRPC front serves Envoy's RateLimitService: it starts when there is
  // something to serve (envoy_ratelimit files) or when --grpc asks for it.
  // Handing over, it starts once the state is loaded (gRPC cannot bind
  // without serving).
  std::unique_ptr<server::GrpcFront> grpc_front;
  std::atomic<server::GrpcFront*> grpc_metrics{nullptr};
  const std::string grpc_address = Address(config->listen.grpc);
  auto start_grpc = [&]() -> Status {
    if (grpc_address.empty() || (config->envoy_ratelimit.files.empty() && flags.grpc.empty())) {
      return Status::Ok();
    }
    server::GrpcFrontOptions grpc_options;
    grpc_options.address = grpc_address;
    grpc_options.keepalive_time_ms = config->server.grpc_keepalive_time_ms;
    grpc_options.keepalive_timeout_ms = config->server.grpc_keepalive_timeout_ms;
    grpc_options.drain_timeout_ms = config->server.drain_timeout_ms;
    grpc_options.threads = threads;
    grpc_options.replace = flags.replace;
    if (config->listen_tls.grpc) grpc_options.tls = tls.get();
    auto front = server::GrpcFront::Start(grpc_options, &rls);
    if (!front.ok()) return front.status();
    grpc_front = std::move(*front);
    grpc_metrics.store(grpc_front.get());
    return Status::Ok();
  };
  if (!hand_over) {
    if (Status s = start_grpc(); !s.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", s.message()}});
      return 1;
    }
  }
  server::ServerOptions options;
  options.resp_address = Address(config->listen.resp);
  options.http_address = Address(config->listen.http);
  if (config->listen_tls.resp) options.resp_tls = tls.get();
  if (config->listen_tls.http) options.http_tls = tls.get();
  options.threads = threads;
  options.replace = flags.replace;
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
  options.visibility = config->visibility;
  options.redact_keys = config->redact_keys;
  options.simulate = api::SimulateToJson;
  options.version = kVersion;
  options.extra_metrics = [&grpc_metrics, k = state.get(),
                           r = tls_reloader.get()](std::string* out) {
    if (server::GrpcFront* f = grpc_metrics.load(); f != nullptr) f->RenderMetrics(out);
    if (k != nullptr) server::AppendStateMetrics(*k, out);
    if (r != nullptr) server::AppendTlsMetrics(*r, out);
  };
  if (hand_over) options.before_serving = load_state;
  if (!config->server.auth_token_env.empty()) {
    const char* token = std::getenv(config->server.auth_token_env.c_str());
    if (token == nullptr || *token == '\0') {
      Log(LogLevel::kError, "auth token variable is not set",
          {{"variable", config->server.auth_token_env}});
      return 1;
    }
    options.auth_token = token;
  }
  // The control plane's tokens: named in the file, held in the environment.
  for (auto [variable, target] : {std::pair{&config->admin.token_env, &options.admin_token},
                                  std::pair{&config->admin.read_token_env, &options.read_token}}) {
    if (variable->empty()) continue;
    const char* token = std::getenv(variable->c_str());
    if (token == nullptr || *token == '\0') {
      Log(LogLevel::kError, "admin token variable is not set", {{"variable", *variable}});
      return 1;
    }
    *target = token;
  }
  options.admin_allow_plaintext = config->admin.allow_plaintext;
  options.admin_client_names = config->admin.client_names;
  if (options.admin_token.empty() && !options.read_token.empty()) {
    Log(LogLevel::kError, "admin.read_token_env needs admin.token_env too",
        {{"variable", config->admin.read_token_env}});
    return 1;
  }
  auto server = server::Server::Start(options, services->get());
  if (!server.ok()) {
    Log(LogLevel::kError, "cannot start", {{"error", server.status().message()}});
    return 1;
  }
  if (hand_over) {
    if (Status s = start_grpc(); !s.ok()) {
      Log(LogLevel::kError, "cannot start", {{"error", s.message()}});
      (*server)->Stop();
      (*server)->Wait();
      return 1;
    }
  }
  Log(LogLevel::kInfo, "listening",
      {{"resp", (*server)->resp_address()},
       {"http", (*server)->http_address()},
       {"grpc", grpc_front != nullptr ? grpc_front->address() : ""},
       {"threads", std::to_string(options.threads)},
       {"store", StoreForLog(config->store)},
       {"rules", std::to_string(config->rules.size())},
       {"auth", options.auth_token.empty() ? "off" : "token"},
       {"admin", options.admin_token.empty() ? "loopback" : "token"},
       {"envoy_domains", std::to_string((*envoy_rules)->num_domains())},
       {"tls", TlsFrontsForLog(config->listen_tls, grpc_front != nullptr)}});

  // What serves now: the file's rules as last reloaded, and the
  // restart-only sections as they were at start.
  const Config started = *config;
  Config running = *config;
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
      if (s.ok()) s = CheckServesSomething(*fresh, (*fresh_envoy)->num_domains());
      if (s.ok()) {
        s = (*services)->Reload(envoy::WithEnvoyRules(*fresh, **fresh_envoy, rls.rules().get()));
      }
      if (s.ok()) rls.SetRules(*fresh_envoy);
      if (!s.ok()) {
        Log(LogLevel::kError, "reload refused; the previous config keeps serving",
            {{"config", flags.config_path}, {"error", s.message()}});
        // A renewal's SIGHUP still takes the renewed certificate: the
        // files the running config names are read again.
        if (tls_reloader != nullptr) (void)tls_reloader->Reload(TlsFilesOf(running.tls));
        continue;
      }
      Log(LogLevel::kInfo, "config reloaded",
          {{"config", flags.config_path},
           {"rules", std::to_string(fresh->rules.size())},
           {"envoy_domains", std::to_string((*fresh_envoy)->num_domains())}});
      // The certificate and key are read again; bad new files keep the
      // old ones serving (open connections keep theirs either way), and
      // TlsReloader logs and counts the outcome.
      if (tls_reloader != nullptr) (void)tls_reloader->Reload(TlsFilesOf(fresh->tls));
      LogReloadChanges(started, running, *fresh);
      running = std::move(*fresh);
      continue;
    }
    Log(LogLevel::kInfo, "shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    // Every front stops accepting at once (a replacement takes the new
    // connections), then each drains. A request held waiting gets its
    // answer within the drain: admitted meanwhile, or denied then.
    (*services)->waiting->EndBy(clock.NowMs() + WaitsEndWithin(options.limits.drain_timeout_ms));
    (*server)->Stop();
    if (grpc_front != nullptr) grpc_front->Stop();
    (*server)->Wait();
    // After the last decision: the state as the server leaves it.
    if (state != nullptr && !state->Stop().ok()) return 1;
    return 0;
  }
}

}  // namespace floodgate::app
