// main(): the `floodgate` command line. Flags -> config -> wiring; the only
// code the tests do not link.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "app/audit.h"
#include "app/serve.h"
#include "app/simulate.h"
#include "app/version.h"
#include "floodgate/config.h"
#include "floodgate/limiter.h"
#include "server/net/tls_context.h"
#include "service/envoy/envoy_rules.h"

namespace {

// The embedded store's data_dir as `serve` will use it: a directory, or one
// `serve` can create (it creates data_dir, not its parents).
floodgate::Status CheckDataDir(const floodgate::Config& config) {
  if (config.data_dir.empty() || config.store != "memory") return floodgate::Status::Ok();
  const std::filesystem::path dir(config.data_dir);
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) {
      return floodgate::InvalidArgumentError(config.source + ": data_dir " + config.data_dir +
                                             " exists and is not a directory");
    }
    return floodgate::Status::Ok();
  }
  const std::filesystem::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  if (!std::filesystem::is_directory(parent, ec)) {
    return floodgate::InvalidArgumentError(
        config.source + ": data_dir " + config.data_dir + " does not exist, nor does its parent " +
        parent.string() + " (serve creates data_dir itself, not its parents)");
  }
  return floodgate::Status::Ok();
}

// Loads and fully validates a config (parsing, then compiling every rule).
floodgate::Result<floodgate::Config> LoadAndValidate(const std::string& path) {
  auto config = floodgate::LoadConfigFile(path);
  if (!config.ok()) return config.status();
  auto envoy_rules = floodgate::envoy::Rules::Load(*config);
  if (!envoy_rules.ok()) return envoy_rules.status();
  if (auto s = floodgate::CheckServesSomething(*config, (*envoy_rules)->num_domains()); !s.ok()) {
    return s;
  }
  if (auto s = CheckDataDir(*config); !s.ok()) return s;
  floodgate::ManualClock clock;
  floodgate::Config probe = floodgate::envoy::WithEnvoyRules(*config, **envoy_rules, nullptr);
  probe.engine.sweep_interval_ms = 0;
  probe.engine.max_entries = 1;
  // The file is what is checked: OTP's secret comes from the environment
  // `serve` runs in, not this one (CheckConfig says when it is missing here).
  probe.otp.enabled = false;
  // Likewise the alerts' secrets and spool; their thresholds and webhooks
  // were checked when the file was parsed. (A probe with alerts would also
  // start their delivery.)
  for (floodgate::Rule& rule : probe.rules) rule.alerts = floodgate::AlertConfig{};
  // And the JWT's HS256 secret (the list and JWKS files are read as serve
  // reads them).
  if (!probe.jwt.hs256_secret_env.empty() &&
      std::getenv(probe.jwt.hs256_secret_env.c_str()) == nullptr) {
    probe.jwt.hs256_secret.assign(32, 's');
  }
  auto limiter = floodgate::Limiter::Create(probe, clock);
  if (!limiter.ok()) {
    return floodgate::InvalidArgumentError(path + ": " + limiter.status().message());
  }
  // The TLS files as serve reads them (an expired certificate is a note).
  if (config->tls.enabled()) {
    const floodgate::TlsConfig& t = config->tls;
    auto context = floodgate::server::TlsContext::Load(
        {t.cert_file, t.key_file, t.client_ca_file, t.require_client_cert}, std::time(nullptr));
    if (!context.ok()) {
      return floodgate::InvalidArgumentError(path + ": " + context.status().message());
    }
    for (const std::string& warning : (*context)->warnings()) {
      std::printf("note: %s\n", warning.c_str());
    }
  }
  return config;
}

int CheckConfig(const std::string& path) {
  auto config = LoadAndValidate(path);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().message().c_str());
    return 1;
  }
  std::fputs(floodgate::DescribeConfig(*config).c_str(), stdout);
  const floodgate::OtpConfig& otp = config->otp;
  if (otp.enabled && std::getenv(otp.secret_env.c_str()) == nullptr) {
    std::printf("note: %s is not set here; `floodgate serve` needs it to run OTP\n",
                otp.secret_env.c_str());
  }
  const floodgate::JwtConfig& jwt = config->jwt;
  if (!jwt.hs256_secret_env.empty() && std::getenv(jwt.hs256_secret_env.c_str()) == nullptr) {
    std::printf("note: %s is not set here; `floodgate serve` needs it to verify HS256 tokens\n",
                jwt.hs256_secret_env.c_str());
  }
  for (const floodgate::Rule& rule : config->rules) {
    if (rule.alerts.enabled() && std::getenv(rule.alerts.secret_env.c_str()) == nullptr) {
      std::printf(
          "note: %s is not set here; `floodgate serve` needs it for the alerts of rule %s\n",
          rule.alerts.secret_env.c_str(), rule.name.c_str());
    }
  }
  std::printf("%s: OK\n", path.c_str());
  return 0;
}

int Simulate(const std::string& config_path, const floodgate::app::SimulateOptions& options,
             const std::string& input) {
  auto config = LoadAndValidate(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().message().c_str());
    return 1;
  }
  if (input == "-") {
    std::ios::sync_with_stdio(false);
    return floodgate::app::RunSimulate(*config, options, std::cin, "<stdin>", stdout, stderr);
  }
  std::ifstream file(input);
  if (!file) {
    std::fprintf(stderr, "error: cannot open input '%s'\n", input.c_str());
    return 1;
  }
  return floodgate::app::RunSimulate(*config, options, file, input, stdout, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  // Abseil's mutexes check every lock against a graph of lock orders unless
  // Abseil was built with NDEBUG, which Debian's is not; gRPC's mutexes
  // then pay a graph lookup per lock, several per gRPC call (about 4% of
  // the gRPC front's CPU). floodgate's own code takes no Abseil mutex.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"floodgate: rate limiting, quotas and abuse control"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("floodgate ") + floodgate::app::kVersion + " (" +
                                        floodgate::app::kCommit + ")");

  floodgate::app::ServeFlags serve_flags;
  auto* serve = app.add_subcommand("serve", "Run the service (RESP, HTTP and Envoy gRPC fronts)");
  serve->add_option("--config", serve_flags.config_path,
                    "YAML config file (default: examples/floodgate.yaml if present)");
  serve->add_option("--store", serve_flags.store,
                    "store (overrides the config): memory, redis://[user:pass@]host:port, "
                    "rediss://…, redis+cluster://h1:p1,h2:p2, redis+proxy://host:port, "
                    "redis-sentinel://s1:p1,s2:p2/master");
  serve->add_option("--http", serve_flags.http, "HTTP listen address host:port, or off");
  serve->add_option("--resp", serve_flags.resp, "Redis-protocol listen address host:port, or off");
  serve->add_option("--grpc", serve_flags.grpc,
                    "Envoy RateLimitService (gRPC) listen address host:port, or off");
  serve
      ->add_option("--threads", serve_flags.threads,
                   "event loop threads, and as many gRPC threads (default: half the usable "
                   "cores, rounded up)")
      ->check(CLI::Range(1, 256));
  serve->add_flag("--start-empty", serve_flags.start_empty,
                  "start with no saved state when data_dir's snapshot is damaged or not a "
                  "floodgate snapshot (the default refuses to start)");
  serve->add_flag("--replace", serve_flags.replace,
                  "take over from a running floodgate: join the ports it holds (SO_REUSEPORT), "
                  "then SIGTERM it (docs/operations.md, Graceful restart)");

  std::string check_path;
  auto* check = app.add_subcommand("check-config", "Validate a config file and print its rules");
  check->add_option("FILE", check_path, "YAML config file")->required();

  std::string sim_config, sim_input = "-";
  floodgate::app::SimulateOptions sim_options;
  auto* sim = app.add_subcommand(
      "simulate",
      "Replay a traffic log (timestamp_ms,key[,cost] CSV or JSON lines) through a rule");
  sim->add_option("--config", sim_config, "YAML config file")->required();
  sim->add_option("--rule", sim_options.rule, "rule to apply")->required();
  sim->add_option("--tier", sim_options.tier, "tier of the rule");
  sim->add_option("--input", sim_input, "input file, or - for standard input (default)");

  floodgate::app::AuditOptions audit_options;
  auto* audit = app.add_subcommand(
      "audit",
      "Find (and with --fix repair) Redis keys of the store that have no TTL; report keys of the "
      "wrong type");
  audit
      ->add_option("--redis", audit_options.redis_url,
                   "Redis URL: redis://host:port, rediss://…, redis+cluster://h1:p1,… "
                   "(every master is scanned)")
      ->required();
  audit->add_option("--prefix", audit_options.prefix, "scan keys starting with this (default fg:)");
  audit->add_flag("--fix", audit_options.fix, "give keys without a TTL one");
  audit
      ->add_option("--ttl", audit_options.fix_ttl_s,
                   "seconds of TTL --fix gives (default 86400; at least your longest window)")
      ->check(CLI::Range(int64_t{1}, int64_t{10} * 365 * 86400));

  CLI11_PARSE(app, argc, argv);
  if (*audit) return floodgate::app::RunAudit(audit_options, std::cout, std::cerr);
  if (*serve) return floodgate::app::RunServe(serve_flags);
  if (*check) return CheckConfig(check_path);
  if (*sim) return Simulate(sim_config, sim_options, sim_input);
  return 1;
}
