// DescribeConfig: the summary `floodgate check-config` prints, in the
// config's own words (limits as written, durations in their largest whole
// unit), never a password or a secret.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/store_url.h"
#include "config/yaml_fields.h"
#include "floodgate/config.h"

namespace floodgate {
namespace {

std::string JoinLimits(const std::vector<Limit>& limits) {
  return absl::StrJoin(limits, ", ",
                       [](std::string* out, const Limit& l) { out->append(l.ToString()); });
}

// Parts per million as the config writes them: 50000 -> "5%", 125 -> "0.0125%".
std::string PercentText(int64_t ppm) {
  std::string text = std::to_string(ppm / 10'000);
  if (int64_t fraction = ppm % 10'000; fraction != 0) {
    std::string digits = std::to_string(10'000 + fraction).substr(1);
    while (digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  return text + "%";
}

// A concurrency rule's one limit, in the config's words.
std::string ConcurrencyText(const std::vector<Limit>& limits) {
  if (limits.empty()) return "";
  return "max_in_flight=" + std::to_string(limits[0].count) +
         ", lease_ttl=" + std::to_string(limits[0].multiplier) + "ms";
}

}  // namespace

std::string DescribeConfig(const Config& config) {
  std::string store = config.store;
  if (store != "memory") {
    auto url = ParseStoreUrl(store);
    store = url.ok() ? url->Redacted() : "?";  // never print a password
  }
  std::string out = "store: " + store + "\n";
  const EngineConfig default_engine;
  if (config.engine.max_entries != default_engine.max_entries ||
      config.engine.max_memory != default_engine.max_memory) {
    out += "engine: max_entries=" + std::to_string(config.engine.max_entries) +
           ", max_memory=" + std::to_string(config.engine.max_memory) + " bytes\n";
  }
  out += "rules (" + std::to_string(config.rules.size()) + "):\n";
  for (const Rule& rule : config.rules) {
    out += "  " + rule.name + ": " + std::string(AlgorithmName(rule.algorithm)) + " " +
           (rule.is_concurrency() ? ConcurrencyText(rule.limits) : JoinLimits(rule.limits));
    if (!rule.burst.empty()) out += "; burst=" + absl::StrJoin(rule.burst, ", ");
    if (!rule.tiers.empty()) {
      out += "; tiers: " +
             absl::StrJoin(rule.tiers, "; ", [&rule](std::string* dst, const auto& tier) {
               dst->append(tier.first + "=" +
                           (rule.is_concurrency() ? std::to_string(tier.second.at(0).count)
                                                  : JoinLimits(tier.second)));
             });
    }
    if (!rule.subject.key.empty()) {
      static constexpr const char* kOnMissing[] = {"400", "deny", "allow", "skip"};
      out += "; key=" + rule.subject.key +
             " (on_missing=" + kOnMissing[static_cast<int>(rule.subject.on_missing)] + ")";
    }
    if (!rule.subject.deny_list.empty()) out += "; deny_list=" + rule.subject.deny_list;
    if (!rule.subject.allow_list.empty()) out += "; allow_list=" + rule.subject.allow_list;
    if (rule.timezone != "UTC") out += "; timezone=" + rule.timezone;
    if (rule.shadow) out += "; shadow";
    if (rule.block_for_ms > 0) out += "; block_for=" + config::DurationText(rule.block_for_ms);
    if (!rule.priorities.empty()) {
      out += "; priorities " +
             absl::StrJoin(rule.priorities, " ", [](std::string* dst, const PriorityClass& c) {
               dst->append(c.name + "=" + std::to_string(c.keep_percent) + "%");
             });
    }
    if (rule.slices.enabled()) {
      out += "; slices max_share=" + PercentText(rule.slices.max_share_ppm) +
             " idle_return=" + config::DurationText(rule.slices.idle_return_ms);
      if (config.store == "memory") out += " (no effect on the embedded store: already local)";
    }
    out += rule.on_backend_error == OnBackendError::kAllow ? "; on_backend_error=allow"
                                                           : "; on_backend_error=deny";
    out += rule.on_store_full == OnStoreFull::kAllow ? "; on_store_full=allow"
                                                     : "; on_store_full=deny";
    if (rule.alerts.enabled()) {
      out += "; alerts at " + absl::StrJoin(rule.alerts.thresholds, "%, ") + "% to " +
             rule.alerts.webhook + " (secret_env=" + rule.alerts.secret_env + ")";
    }
    out += "\n";
  }
  const SetsConfig default_sets;
  if (config.sets.max_members != default_sets.max_members ||
      config.sets.max_ttl_ms != default_sets.max_ttl_ms) {
    out += "sets: max_members=" + std::to_string(config.sets.max_members) +
           ", max_ttl=" + std::to_string(config.sets.max_ttl_ms) + "ms\n";
  }
  if (config.otp.enabled) {
    const OtpConfig& otp = config.otp;
    out += "otp: digits=" + std::to_string(otp.digits) + ", ttl=" + std::to_string(otp.ttl_ms) +
           "ms, issue_limit=" + otp.issue_limit.ToString() +
           ", verify_limit=" + otp.verify_limit.ToString() +
           ", max_live_codes=" + std::to_string(otp.max_live_codes) +
           ", secret_env=" + otp.secret_env;
    if (!otp.delivery.url.empty()) out += ", delivery=" + otp.delivery.url;
    out += "\n";
  }
  for (const ListConfig& list : config.lists) {
    out +=
        "list " + list.name + ": " +
        (list.file.empty() ? std::to_string(list.cidrs.size()) + " networks inline" : list.file) +
        "\n";
  }
  if (config.jwt.in_file) {
    const JwtConfig& jwt = config.jwt;
    out += "jwt:";
    if (!jwt.jwks_file.empty()) out += " jwks_file=" + jwt.jwks_file;
    if (!jwt.hs256_secret_env.empty()) out += " hs256_secret_env=" + jwt.hs256_secret_env;
    if (!jwt.issuer.empty()) out += " issuer=" + jwt.issuer;
    if (!jwt.audience.empty()) out += " audience=" + jwt.audience;
    out += " leeway=" + config::DurationText(jwt.leeway_ms) + "\n";
  }
  if (!config.server.trusted_proxies.empty()) {
    out += "trusted_proxies: " + absl::StrJoin(config.server.trusted_proxies, ", ") + "\n";
  }
  if (!config.envoy_ratelimit.files.empty()) {
    out += "envoy_ratelimit: " + absl::StrJoin(config.envoy_ratelimit.files, ", ") + " (" +
           std::string(AlgorithmName(config.envoy_ratelimit.algorithm)) + ")\n";
  }
  return out;
}

}  // namespace floodgate
