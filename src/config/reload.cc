// What a reload may and may not change: a config that serves nothing, the
// restart-only sections, and rules a reload removes (include/floodgate/config.h).
#include <string>
#include <vector>

#include "floodgate/config.h"

namespace floodgate {

Status CheckServesSomething(const Config& config, size_t envoy_domains) {
  if (!config.rules.empty() || envoy_domains > 0 || config.otp.enabled || config.sets.in_file) {
    return Status::Ok();
  }
  const std::string file = config.source.empty() ? "the config" : config.source;
  return InvalidArgumentError(
      file +
      ": no rules: define at least one rule under 'rules:' (or envoy_ratelimit files with a "
      "domain, or an otp or sets section for a server of those alone); a config without rules "
      "answers 'unknown rule' to every check");
}

std::vector<std::string> RestartOnlyChanges(const Config& running, const Config& fresh) {
  // One row per restart-only section, in the file's usual order. A reload
  // applies the rules, their tiers, alerts and block_for, the
  // envoy_ratelimit files, the lists, jwt and server.trusted_proxies;
  // everything here is read once at start (the listeners, the store and
  // its tables, the fronts' policies, the feature stores, the tokens).
  // `server` is compared without trusted_proxies, which the subjects
  // (service/subjects) take again on reload.
  ServerConfig running_server = running.server, fresh_server = fresh.server;
  running_server.trusted_proxies.clear();
  fresh_server.trusted_proxies.clear();
  const struct {
    const char* name;
    bool changed;
  } sections[] = {
      {"store", running.store != fresh.store},
      {"listen", running.listen != fresh.listen},
      {"listen_tls", running.listen_tls != fresh.listen_tls},
      {"engine", running.engine != fresh.engine},
      {"redis", running.redis != fresh.redis},
      {"server", running_server != fresh_server},
      {"sets", running.sets != fresh.sets},
      {"otp", running.otp != fresh.otp},
      {"alert_delivery", running.alert_delivery != fresh.alert_delivery},
      {"admin", running.admin != fresh.admin},
      {"visibility", running.visibility != fresh.visibility},
      {"redact_keys", running.redact_keys != fresh.redact_keys},
      {"data_dir", running.data_dir != fresh.data_dir},
      {"snapshot_interval", running.snapshot_interval_ms != fresh.snapshot_interval_ms},
  };
  std::vector<std::string> changed;
  for (const auto& s : sections) {
    if (s.changed) changed.emplace_back(s.name);
  }
  return changed;
}

std::vector<std::string> RemovedRules(const Config& running, const Config& fresh) {
  std::vector<std::string> removed;
  for (const Rule& r : running.rules) {
    bool kept = false;
    for (const Rule& f : fresh.rules) kept = kept || f.name == r.name;
    if (!kept) removed.push_back(r.name);
  }
  return removed;
}

}  // namespace floodgate
