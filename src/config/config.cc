// The YAML configuration: parsing, validation and the check-config summary.
//
// yaml-cpp builds the node tree; everything after that is explicit walking of
// the expected shape, never generic recursion, so hostile nesting or alias
// loops cannot make this code recurse. Maps are walked by iteration (not by
// lookup) because yaml-cpp keeps duplicate keys silently and lookups would
// hide the second one. yaml-cpp throws; nothing escapes ParseConfig.
//
// Every error reads "source:line:column: what is wrong (near 'text')" with the
// 1-based position of the offending node, so check-config output can be
// pasted into an editor's "go to".
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "common/http_url.h"
#include "common/store_url.h"
#include "config/yaml_words.h"
#include "core/calendar.h"
#include "floodgate/config.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace floodgate {
namespace {

using config::Near;
using config::TypeName;

// Configs are a few kilobytes; the bound keeps a hostile or mistaken input
// (a log file passed as --config) from costing seconds of parsing.
constexpr size_t kMaxConfigBytes = size_t{4} << 20;
constexpr size_t kMaxNameBytes = 64;
constexpr int kMaxShards = 4096;
constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxConnections = 10'000'000;
constexpr int64_t kMaxBlockForMs = 366LL * 86'400'000;
constexpr int64_t kDefaultLeaseTtlMs = 30'000;             // algorithm: concurrency's lease_ttl
constexpr int64_t kMaxMaxWaiters = 1'000'000;              // a block is not meant to be forever
constexpr int64_t kMaxServerTimeoutMs = 7LL * 86'400'000;  // a week: beyond it, use 0 (off)
constexpr int64_t kMaxOutputLimit = int64_t{1} << 40;
// sliding_window and token_bucket compute count x period_ms in doubles in the
// Redis scripts (Lua numbers): beyond 2^53 they stop being exact.
constexpr __int128 kMaxExactProduct = __int128{1} << 53;
// gcra keeps TAT in microseconds: emission interval x (burst + 1) must leave
// headroom for adding it to a current time in int64 and in Lua doubles.
constexpr __int128 kMaxGcraSpanUs = __int128{1} << 52;
// sliding_log stores one timestamp per admitted unit.
constexpr int64_t kMaxSlidingLogCount = 100'000;
constexpr int64_t kDayMs = 86'400'000;
// Expiring sets keep every live member: a bound per set, and on TTLs.
constexpr int64_t kMaxSetMembers = 1'000'000;
constexpr int64_t kMaxSetTtlMs = 366 * kDayMs;
// The OTP limits keep one event per issue or attempt in the window.
constexpr int64_t kMaxOtpLimitCount = 1000;
constexpr int64_t kMaxOtpPeriodMs = 366 * kDayMs;
constexpr int64_t kMaxOtpCodeTtlMs = kDayMs;
constexpr int64_t kMaxOtpLiveCodes = 100;

// A duration as a config writes it, in its largest whole unit: 366d, 90s,
// 1500ms.
std::string DurationText(int64_t ms) {
  constexpr struct {
    int64_t ms;
    const char* unit;
  } kUnits[] = {{86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  for (const auto& u : kUnits) {
    if (ms != 0 && ms % u.ms == 0) return std::to_string(ms / u.ms) + u.unit;
  }
  return std::to_string(ms) + "ms";
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// Decimal integer with an optional sign; nullopt when malformed or out of
// int64 range (checked before each multiply).
std::optional<int64_t> ParseInt(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  int64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const int d = c - '0';
    if (value > (INT64_MAX - d) / 10) return std::nullopt;
    value = value * 10 + d;
  }
  return negative ? -value : value;
}

// "host:port" or "[v6]:port", port 0..65535 (0: any free port).
bool IsHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  int port_number = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    port_number = port_number * 10 + (c - '0');
  }
  if (port_number > 65535) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    for (char c : host.substr(1, host.size() - 2)) {
      const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                      c == ':' || c == '.';
      if (!ok) return false;
    }
    return true;
  }
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool IsEnvironmentVariableName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// A limit or burst value as written, kept with its node for cross-field
// messages.
struct PlacedLimit {
  Limit limit;
  YAML::Node node;
};
struct PlacedInt {
  int64_t value;
  YAML::Node node;
};

// Walks one config document. Each method returns the first error found.
class ConfigParser {
 public:
  explicit ConfigParser(std::string_view source) : source_(source) {}

  Status Fail(const YAML::Mark& mark, std::string_view what, std::string_view near) const {
    const int line = mark.is_null() ? 1 : mark.line + 1;
    const int column = mark.is_null() ? 1 : mark.column + 1;
    return InvalidArgumentError(std::string(source_) + ":" + std::to_string(line) + ":" +
                                std::to_string(column) + ": " + std::string(what) + " (near " +
                                Near(near) + ")");
  }

  // At `value`, or at its key when the value is empty (an empty value's own
  // mark points past it, often to the next line).
  Status FailAt(const YAML::Node& key, const YAML::Node& value, std::string_view what,
                std::string_view near) const {
    return Fail(value.IsNull() ? key.Mark() : value.Mark(), what, near);
  }

  Status WrongType(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                   std::string_view expected) const {
    return FailAt(key, value,
                  "'" + std::string(field) + "' must be " + std::string(expected) + ", not " +
                      TypeName(value),
                  key.Scalar());
  }

  // Calls f(name, key, value) for each entry of `map` in file order, after
  // checking that keys are non-empty strings and unique. `noun` names the
  // entries in the duplicate message ("key", "rule", "tier").
  template <typename F>
  Status ForEachEntry(const YAML::Node& map, std::string_view noun, F&& f) const {
    absl::flat_hash_map<std::string, int> first_line;
    // By value: yaml-cpp's iterator hands out a temporary proxy, and a
    // reference into it (it->first) dangles.
    for (const auto& entry : map) {
      const YAML::Node key = entry.first;
      const YAML::Node value = entry.second;
      if (key.IsNull() || (key.IsScalar() && key.Scalar().empty())) {
        return Fail(key.Mark(), "empty key", "");
      }
      if (!key.IsScalar()) {
        return Fail(key.Mark(), "keys must be plain strings, not " + std::string(TypeName(key)),
                    "");
      }
      const std::string& name = key.Scalar();
      const auto [pos, inserted] = first_line.emplace(name, key.Mark().line + 1);
      if (!inserted) {
        return Fail(key.Mark(),
                    "duplicate " + std::string(noun) + " '" + name + "' (first defined on line " +
                        std::to_string(pos->second) + ")",
                    name);
      }
      if (Status s = f(name, key, value); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Result<std::string> String(const YAML::Node& key, const YAML::Node& value,
                             std::string_view field) const {
    if (!value.IsScalar()) return WrongType(key, value, field, "a string");
    return value.Scalar();
  }

  Result<int64_t> Int(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                      int64_t min, int64_t max) const {
    if (!value.IsScalar()) return WrongType(key, value, field, "an integer");
    const std::optional<int64_t> v = ParseInt(value.Scalar());
    if (!v || *v < min || *v > max) {
      const std::string range = max == INT64_MAX ? "an integer >= " + std::to_string(min)
                                                 : "an integer between " + std::to_string(min) +
                                                       " and " + std::to_string(max);
      return FailAt(key, value, "'" + std::string(field) + "' must be " + range, value.Scalar());
    }
    return *v;
  }

  // A rule's (or envoy_ratelimit's) `algorithm`.
  Result<Algorithm> AlgorithmValue(const YAML::Node& key, const YAML::Node& value,
                                   std::string_view field) const {
    Result<std::string> text = String(key, value, field);
    if (!text.ok()) return text.status();
    const std::optional<Algorithm> algorithm = ParseAlgorithm(*text);
    if (!algorithm) {
      return FailAt(key, value,
                    "unknown algorithm '" + *text +
                        "'; expected fixed_window, sliding_window, sliding_log, token_bucket "
                        "or gcra",
                    *text);
    }
    return *algorithm;
  }

  // A fallback policy: "allow" (true) or "deny" (false).
  Result<bool> AllowOrDeny(const YAML::Node& key, const YAML::Node& value,
                           std::string_view field) const {
    Result<std::string> text = String(key, value, field);
    if (!text.ok()) return text.status();
    if (*text == "allow") return true;
    if (*text == "deny") return false;
    return FailAt(key, value, "'" + std::string(field) + "' must be allow or deny", *text);
  }

  // A rule's (or envoy_ratelimit's) `on_backend_error`: allow or deny.
  Result<OnBackendError> OnBackendErrorValue(const YAML::Node& key, const YAML::Node& value,
                                             std::string_view field) const {
    Result<bool> allow = AllowOrDeny(key, value, field);
    if (!allow.ok()) return allow.status();
    return *allow ? OnBackendError::kAllow : OnBackendError::kDeny;
  }

  // A rule's (or envoy_ratelimit's) `on_store_full`: allow or deny.
  Result<OnStoreFull> OnStoreFullValue(const YAML::Node& key, const YAML::Node& value,
                                       std::string_view field) const {
    Result<bool> allow = AllowOrDeny(key, value, field);
    if (!allow.ok()) return allow.status();
    return *allow ? OnStoreFull::kAllow : OnStoreFull::kDeny;
  }

  // A size in bytes, as Redis reads maxmemory: a plain integer, or one with
  // a unit, any case: k, m, g (10^3, 10^6, 10^9), kb, mb, gb (2^10, 2^20,
  // 2^30), and kib, mib, gib for those who write IEC units. Between `min`
  // and `max`; with a `min` of 0, "off" is 0 too.
  Result<int64_t> Size(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                       int64_t min, int64_t max) const {
    const std::string range =
        max == INT64_MAX && min == 1
            ? "a positive size in bytes"
            : "a size between " + std::to_string(min) + " and " + std::to_string(max) + " bytes";
    const std::string what = "'" + std::string(field) + "' must be " + range +
                             ": an integer, or one with a unit k, kb, m, mb, g or gb (e.g. "
                             "512mb, 1gb)";
    if (!value.IsScalar()) return WrongType(key, value, field, "a size in bytes");
    std::string_view text = value.Scalar();
    if (min == 0 && text == "off") return 0;
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    std::string_view unit = text.substr(digits);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    std::string lower(unit);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    struct Unit {
      const char* name;
      int64_t factor;
    };
    static constexpr Unit kUnits[] = {
        {"", 1},          {"b", 1},        {"k", 1'000},     {"kb", 1 << 10},      {"kib", 1 << 10},
        {"m", 1'000'000}, {"mb", 1 << 20}, {"mib", 1 << 20}, {"g", 1'000'000'000}, {"gb", 1 << 30},
        {"gib", 1 << 30},
    };
    const Unit* found = nullptr;
    for (const Unit& u : kUnits) {
      if (lower == u.name) found = &u;
    }
    const std::optional<int64_t> n = digits == 0 ? std::nullopt : ParseInt(text.substr(0, digits));
    if (found == nullptr || !n.has_value() || *n > max / found->factor ||
        *n * found->factor < min) {
      return FailAt(key, value, what, text);
    }
    return *n * found->factor;
  }

  Result<bool> Bool(const YAML::Node& key, const YAML::Node& value, std::string_view field) const {
    if (value.IsScalar()) {
      // YAML 1.1 spellings too, as yaml-cpp and most YAML users accept them.
      const std::string& s = value.Scalar();
      for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
        if (s == t) return true;
      }
      for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
        if (s == f) return false;
      }
    }
    return FailAt(key, value, "'" + std::string(field) + "' must be true or false",
                  value.IsScalar() ? value.Scalar() : key.Scalar());
  }

  Status ParseDocument(const YAML::Node& root, Config& config) const {
    if (root.IsNull()) return Status::Ok();  // an empty file: all defaults, no rules
    if (!root.IsMap()) {
      return Fail(root.Mark(),
                  "the config must be a map of sections (store, listen, engine, rules), not " +
                      std::string(TypeName(root)),
                  root.Scalar());
    }
    return ForEachEntry(root, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseSection(name, k, v, config);
                        });
  }

 private:
  // A rule while it is being read: values keep their nodes until the
  // cross-field checks, which need positions, have run.
  struct Tier {
    std::string name;
    YAML::Node key;
    std::vector<PlacedLimit> limits;
    std::optional<int64_t> max_in_flight;  // written as a bare integer
  };
  struct RuleDraft {
    Rule rule;
    bool has_limits = false;
    std::vector<PlacedLimit> limits;
    std::vector<Tier> tiers;
    std::vector<PlacedInt> burst;
    YAML::Node burst_key;
    // algorithm: concurrency. A tier's max_in_flight is in its one limit.
    std::optional<int64_t> max_in_flight;
    int64_t lease_ttl_ms = kDefaultLeaseTtlMs;
    YAML::Node lease_ttl_key;
    std::vector<std::string> rate_fields;  // limits, burst, alerts, shadow, block_for: as written
    YAML::Node first_rate_key;
  };

  Status ParseSection(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                      Config& config) const {
    if (name == "store") return ParseStore(key, value, config);
    if (name == "listen") return ParseListen(key, value, config.listen);
    if (name == "engine") return ParseEngine(key, value, config.engine);
    if (name == "redis") return ParseRedis(key, value, config.redis);
    if (name == "server") {
      if (Status st = ParseServer(key, value, config.server); !st.ok()) return st;
      return CheckServer(key, config.server);
    }
    if (name == "rules") return ParseRules(key, value, config);
    if (name == "sets") return ParseSets(key, value, config.sets);
    if (name == "otp") return ParseOtp(key, value, config.otp);
    if (name == "alert_delivery") return ParseAlertDelivery(key, value, config.alert_delivery);
    if (name == "envoy_ratelimit") return ParseEnvoyRateLimit(key, value, config.envoy_ratelimit);
    if (name == "admin") return ParseAdmin(key, value, config.admin);
    if (name == "visibility") return ParseVisibility(key, value, config.visibility);
    if (name == "redact_keys") {
      Result<bool> redact = Bool(key, value, "redact_keys");
      if (!redact.ok()) return redact.status();
      config.redact_keys = *redact;
      return Status::Ok();
    }
    if (name == "data_dir") {
      Result<std::string> dir = String(key, value, "data_dir");
      if (!dir.ok()) return dir.status();
      if (dir->empty()) return FailAt(key, value, "'data_dir' must name a directory", *dir);
      config.data_dir = *std::move(dir);
      return Status::Ok();
    }
    if (name == "snapshot_interval") {
      Result<int64_t> ms = DurationOrOff(key, value, "snapshot_interval", 86'400'000);
      if (!ms.ok()) return ms.status();
      config.snapshot_interval_ms = *ms;
      return Status::Ok();
    }
    return Fail(key.Mark(),
                "unknown key '" + name +
                    "' at top level; expected store, listen, engine, redis, server, rules, sets, "
                    "otp, alert_delivery, envoy_ratelimit, admin, visibility, redact_keys, "
                    "data_dir or snapshot_interval",
                name);
  }

  // `envoy_ratelimit: [files]`, or a map with `files` and the options.
  Status ParseEnvoyRateLimit(const YAML::Node& key, const YAML::Node& value,
                             EnvoyRateLimitConfig& envoy) const {
    if (value.IsNull()) return Status::Ok();
    if (value.IsScalar() || value.IsSequence()) return ParseEnvoyFiles(key, value, envoy);
    if (!value.IsMap()) return WrongType(key, value, "envoy_ratelimit", "a list of files or a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseEnvoyRateLimitEntry(name, k, v, envoy);
                        });
  }

  Status ParseEnvoyRateLimitEntry(const std::string& name, const YAML::Node& key,
                                  const YAML::Node& value, EnvoyRateLimitConfig& envoy) const {
    const std::string path = "envoy_ratelimit." + name;
    if (name == "files") return ParseEnvoyFiles(key, value, envoy);
    if (name == "algorithm") {
      Result<Algorithm> algorithm = AlgorithmValue(key, value, path);
      if (!algorithm.ok()) return algorithm.status();
      envoy.algorithm = *algorithm;
    } else if (name == "on_backend_error") {
      Result<OnBackendError> on_error = OnBackendErrorValue(key, value, path);
      if (!on_error.ok()) return on_error.status();
      envoy.on_backend_error = *on_error;
    } else if (name == "on_store_full") {
      Result<OnStoreFull> on_full = OnStoreFullValue(key, value, path);
      if (!on_full.ok()) return on_full.status();
      envoy.on_store_full = *on_full;
    } else if (name == "response_headers") {
      Result<bool> b = Bool(key, value, path);
      if (!b.ok()) return b.status();
      envoy.response_headers = *b;
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + name +
                      "' in envoy_ratelimit; expected files, algorithm, on_backend_error, "
                      "on_store_full or response_headers",
                  name);
    }
    return Status::Ok();
  }

  // One path or a list; relative paths are taken from the config file's
  // directory, so a config and its Envoy files can move together.
  Status ParseEnvoyFiles(const YAML::Node& key, const YAML::Node& value,
                         EnvoyRateLimitConfig& envoy) const {
    constexpr size_t kMaxFiles = 1024;
    auto add = [&](const YAML::Node& node) -> Status {
      if (!node.IsScalar() || node.Scalar().empty()) {
        return FailAt(key, node, "each envoy_ratelimit file must be a path", key.Scalar());
      }
      if (envoy.files.size() == kMaxFiles) {
        return Fail(node.Mark(), "envoy_ratelimit names more than 1024 files", node.Scalar());
      }
      std::string file = node.Scalar();
      const size_t slash = source_.rfind('/');
      if (file.front() != '/' && slash != std::string_view::npos) {
        file = std::string(source_.substr(0, slash + 1)) + file;
      }
      envoy.files.push_back(std::move(file));
      return Status::Ok();
    };
    if (value.IsSequence()) {
      for (const YAML::Node& item : value) {
        if (Status s = add(item); !s.ok()) return s;
      }
      return Status::Ok();
    }
    return add(value);
  }

  Status ParseStore(const YAML::Node& key, const YAML::Node& value, Config& config) const {
    Result<std::string> store = String(key, value, "store");
    if (!store.ok()) return store.status();
    if (*store != "memory") {
      if (auto url = ParseStoreUrl(*store); !url.ok()) {
        // The message quotes only the faulty part, never a password.
        return Fail(value.Mark(),
                    "invalid store: " + url.status().message() +
                        "; use memory or a Redis URL (redis://host:port, rediss://…, "
                        "redis+cluster://h1:p1,h2:p2, redis+proxy://host:port)",
                    "store");
      }
    }
    config.store = *std::move(store);
    return Status::Ok();
  }

  Status ParseListen(const YAML::Node& key, const YAML::Node& value, ListenConfig& listen) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "listen", "a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseListenEntry(name, k, v, listen);
                        });
  }

  Status ParseListenEntry(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                          ListenConfig& listen) const {
    std::string* target = name == "http"   ? &listen.http
                          : name == "resp" ? &listen.resp
                          : name == "grpc" ? &listen.grpc
                                           : nullptr;
    if (target == nullptr) {
      return Fail(key.Mark(), "unknown key '" + name + "' in listen; expected http, resp or grpc",
                  name);
    }
    // As with --http off: `off` (or false, as YAML users also write it)
    // turns the front off.
    if (value.IsScalar()) {
      for (const char* off : {"off", "Off", "OFF", "false", "False", "FALSE"}) {
        if (value.Scalar() == off) {
          *target = "off";
          return Status::Ok();
        }
      }
    }
    Result<std::string> address = String(key, value, "listen." + name);
    if (!address.ok()) return address.status();
    if (!IsHostPort(*address)) {
      return FailAt(key, value,
                    "'listen." + name + "' must be host:port, e.g. 127.0.0.1:8080, or off",
                    *address);
    }
    *target = *std::move(address);
    return Status::Ok();
  }

  Status ParseEngine(const YAML::Node& key, const YAML::Node& value, EngineConfig& engine) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "engine", "a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseEngineEntry(name, k, v, engine);
                        });
  }

  Status ParseEngineEntry(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                          EngineConfig& engine) const {
    if (name == "max_entries") {
      Result<int64_t> n = Int(key, value, "engine.max_entries", 1, INT64_MAX);
      if (!n.ok()) return n.status();
      engine.max_entries = *n;
    } else if (name == "max_memory") {
      Result<int64_t> n = Size(key, value, "engine.max_memory", 1, INT64_MAX);
      if (!n.ok()) return n.status();
      engine.max_memory = *n;
    } else if (name == "shards") {
      Result<int64_t> n = Int(key, value, "engine.shards", 1, kMaxShards);
      if (!n.ok()) return n.status();
      if ((*n & (*n - 1)) != 0) {
        return FailAt(key, value, "'engine.shards' must be a power of two", value.Scalar());
      }
      engine.shards = static_cast<int>(*n);
    } else if (name == "sweep_interval_ms") {
      Result<int64_t> n = Int(key, value, "engine.sweep_interval_ms", 0, INT64_MAX);
      if (!n.ok()) return n.status();
      engine.sweep_interval_ms = *n;
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + name +
                      "' in engine; expected max_entries, max_memory, shards or sweep_interval_ms",
                  name);
    }
    return Status::Ok();
  }

  Status ParseRedis(const YAML::Node& key, const YAML::Node& value, RedisConfig& redis) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "redis", "a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseRedisEntry(name, k, v, redis);
                        });
  }

  Status ParseRedisEntry(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                         RedisConfig& redis) const {
    struct IntField {
      const char* name;
      int64_t min, max;
      int64_t* target;
    };
    int64_t connections = redis.connections_per_node, threads = redis.io_threads;
    const IntField ints[] = {
        {"timeout_ms", 1, 60'000, &redis.timeout_ms},
        {"connect_timeout_ms", 1, 60'000, &redis.connect_timeout_ms},
        {"connections_per_node", 1, 64, &connections},
        {"io_threads", 1, 64, &threads},
        {"local_cache_max_entries", 1, 100'000'000, &redis.local_cache_max_entries},
    };
    for (const IntField& f : ints) {
      if (name != f.name) continue;
      Result<int64_t> n = Int(key, value, "redis." + name, f.min, f.max);
      if (!n.ok()) return n.status();
      *f.target = *n;
      redis.connections_per_node = static_cast<int>(connections);
      redis.io_threads = static_cast<int>(threads);
      return Status::Ok();
    }
    if (name == "local_cache") {
      Result<bool> b = Bool(key, value, "redis.local_cache");
      if (!b.ok()) return b.status();
      redis.local_cache = *b;
      return Status::Ok();
    }
    return Fail(key.Mark(),
                "unknown key '" + name +
                    "' in redis; expected timeout_ms, connect_timeout_ms, connections_per_node, "
                    "io_threads, local_cache or local_cache_max_entries",
                name);
  }

  Status ParseServer(const YAML::Node& key, const YAML::Node& value, ServerConfig& server) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "server", "a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseServerEntry(name, k, v, server);
                        });
  }

  // Messages never quote auth_token's value: it is a secret.
  Status ParseServerEntry(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                          ServerConfig& server) const {
    // Timeouts: a duration, or 0 / off.
    struct TimeoutField {
      const char* name;
      int64_t max_ms;
      int64_t* target;
    };
    const TimeoutField timeouts[] = {
        {"http_request_timeout", kMaxServerTimeoutMs, &server.http_request_timeout_ms},
        {"http_idle_timeout", kMaxServerTimeoutMs, &server.http_idle_timeout_ms},
        {"resp_command_timeout", kMaxServerTimeoutMs, &server.resp_command_timeout_ms},
        {"resp_idle_timeout", kMaxServerTimeoutMs, &server.resp_idle_timeout_ms},
        {"output_soft_timeout", kMaxServerTimeoutMs, &server.output_soft_timeout_ms},
        {"grpc_keepalive_time", kMaxServerTimeoutMs, &server.grpc_keepalive_time_ms},
        {"grpc_keepalive_timeout", kMaxServerTimeoutMs, &server.grpc_keepalive_timeout_ms},
    };
    for (const TimeoutField& f : timeouts) {
      if (name != f.name) continue;
      Result<int64_t> ms = DurationOrOff(key, value, "server." + name, f.max_ms);
      if (!ms.ok()) return ms.status();
      *f.target = *ms;
      return Status::Ok();
    }
    // Byte counts: output limits (0 / off: none).
    struct SizeField {
      const char* name;
      int64_t* target;
    };
    const SizeField sizes[] = {
        {"output_soft_limit", &server.output_soft_limit},
        {"output_hard_limit", &server.output_hard_limit},
    };
    for (const SizeField& f : sizes) {
      if (name != f.name) continue;
      Result<int64_t> bytes = Size(key, value, "server." + name, 0, kMaxOutputLimit);
      if (!bytes.ok()) return bytes.status();
      *f.target = *bytes;
      return Status::Ok();
    }
    if (name == "threads") {
      Result<int64_t> n = Int(key, value, "server.threads", 0, kMaxThreads);
      if (!n.ok()) return n.status();
      server.threads = static_cast<int>(*n);
    } else if (name == "max_connections") {
      Result<int64_t> n = Int(key, value, "server.max_connections", 1, kMaxConnections);
      if (!n.ok()) return n.status();
      server.max_connections = *n;
    } else if (name == "max_connections_per_ip") {
      Result<int64_t> n = Int(key, value, "server.max_connections_per_ip", 0, kMaxConnections);
      if (!n.ok()) return n.status();
      server.max_connections_per_ip = *n;
    } else if (name == "drain_timeout") {
      // A drain of 0 would drop every reply in flight at SIGTERM: at least 1 ms.
      Result<int64_t> ms = Duration(key, value, "server.drain_timeout", 1, kMaxServerTimeoutMs);
      if (!ms.ok()) return ms.status();
      server.drain_timeout_ms = *ms;
    } else if (name == "auth_token") {
      if (!value.IsScalar()) return WrongType(key, value, "server.auth_token", "a string");
      server.auth_token = value.Scalar();
    } else if (name == "auth_token_env") {
      Result<std::string> variable = String(key, value, "server.auth_token_env");
      if (!variable.ok()) return variable.status();
      if (!IsEnvironmentVariableName(*variable)) {
        return FailAt(key, value,
                      "'server.auth_token_env' must name an environment variable "
                      "([A-Za-z_][A-Za-z0-9_]*)",
                      *variable);
      }
      server.auth_token_env = *std::move(variable);
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + name +
                      "' in server; expected threads, max_connections, max_connections_per_ip, "
                      "http_request_timeout, http_idle_timeout, resp_command_timeout, "
                      "resp_idle_timeout, output_soft_limit, output_soft_timeout, "
                      "output_hard_limit, drain_timeout, grpc_keepalive_time, "
                      "grpc_keepalive_timeout, auth_token or auth_token_env",
                  name);
    }
    return Status::Ok();
  }

  Status ParseAdmin(const YAML::Node& key, const YAML::Node& value, AdminConfig& admin) const {
    if (!value.IsMap()) return WrongType(key, value, "admin", "a map");
    return ForEachEntry(
        value, "key", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
          std::string* target = name == "token_env"        ? &admin.token_env
                                : name == "read_token_env" ? &admin.read_token_env
                                                           : nullptr;
          if (target == nullptr) {
            return Fail(k.Mark(),
                        "unknown key '" + name + "' in admin; expected token_env or read_token_env",
                        name);
          }
          const std::string path = "admin." + name;
          Result<std::string> variable = String(k, v, path);
          if (!variable.ok()) return variable.status();
          if (!IsEnvironmentVariableName(*variable)) {
            return FailAt(k, v,
                          "'" + path +
                              "' must name an environment variable "
                              "([A-Za-z_][A-Za-z0-9_]*)",
                          *variable);
          }
          *target = *std::move(variable);
          return Status::Ok();
        });
  }

  Status ParseVisibility(const YAML::Node& key, const YAML::Node& value,
                         VisibilityConfig& visibility) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "visibility", "a map");
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          const std::string path = "visibility." + name;
                          if (name == "top_subjects") {
                            Result<bool> on = Bool(k, v, path);
                            if (!on.ok()) return on.status();
                            visibility.top_subjects = *on;
                            return Status::Ok();
                          }
                          if (name == "top_capacity") {
                            Result<int64_t> n = Int(k, v, path, 10, kMaxTopCapacity);
                            if (!n.ok()) return n.status();
                            visibility.top_capacity = *n;
                            return Status::Ok();
                          }
                          if (name == "denied_log_interval") {
                            Result<int64_t> ms = DurationOrOff(k, v, path, 24LL * 3'600'000);
                            if (!ms.ok()) return ms.status();
                            visibility.denied_log_interval_ms = *ms;
                            return Status::Ok();
                          }
                          if (name == "publish_interval") {
                            Result<int64_t> ms = Duration(k, v, path, 100, 600'000);
                            if (!ms.ok()) return ms.status();
                            visibility.publish_interval_ms = *ms;
                            return Status::Ok();
                          }
                          return Fail(k.Mark(),
                                      "unknown key '" + name +
                                          "' in visibility; expected top_subjects, top_capacity, "
                                          "denied_log_interval or publish_interval",
                                      name);
                        });
  }

  // Checks that need the whole server section: the limits' order.
  Status CheckServer(const YAML::Node& key, const ServerConfig& server) const {
    if (server.output_hard_limit != 0 && server.output_soft_limit != 0 &&
        server.output_hard_limit <= server.output_soft_limit) {
      return Fail(key.Mark(),
                  "'server.output_hard_limit' must be larger than 'server.output_soft_limit' "
                  "(or 0: none)",
                  "server");
    }
    if (server.output_soft_limit == 0 && server.output_soft_timeout_ms != 0) {
      // Without a soft limit the timeout would never start: say so rather
      // than accept a setting that does nothing.
      return Fail(key.Mark(),
                  "'server.output_soft_timeout' needs 'server.output_soft_limit' (or set the "
                  "timeout to 0 too)",
                  "server");
    }
    return Status::Ok();
  }

  // A timeout: a duration like 30s, or 0 / off for none.
  Result<int64_t> DurationOrOff(const YAML::Node& key, const YAML::Node& value,
                                std::string_view field, int64_t max_ms) const {
    if (value.IsScalar() && (value.Scalar() == "0" || value.Scalar() == "off")) return 0;
    return Duration(key, value, field, 1, max_ms);
  }

  // A duration with a unit, as in a limit's period: "5m", "300s", "1h",
  // "500ms", "7d". Plain numbers are refused: their unit would be a guess.
  Result<int64_t> Duration(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                           int64_t min_ms, int64_t max_ms) const {
    if (!value.IsScalar()) return WrongType(key, value, field, "a duration like 5m");
    const std::string& text = value.Scalar();
    const std::string range = "'" + std::string(field) + "' must be from " + DurationText(min_ms) +
                              " to " + DurationText(max_ms);
    Result<Limit> as_period = ParseLimit("1/" + text);
    const size_t digits = text.find_first_not_of("0123456789");
    if (!as_period.ok() || digits == 0) {
      // A number and a unit whose product is out of ParseLimit's range (0s,
      // 100000d): the range is what is wrong, not the spelling.
      const bool spelled_right = digits != 0 && digits != std::string::npos &&
                                 ParseLimit("1/1" + text.substr(digits)).ok();
      if (spelled_right) return FailAt(key, value, range, text);
      return FailAt(
          key, value,
          "'" + std::string(field) + "' must be a number and a unit, e.g. 500ms, 30s, 5m, 1h or 7d",
          text);
    }
    const int64_t ms = as_period->PeriodMs();
    if (ms < min_ms || ms > max_ms) return FailAt(key, value, range, text);
    return ms;
  }

  Status ParseSets(const YAML::Node& key, const YAML::Node& value, SetsConfig& sets) const {
    sets.in_file = true;
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "sets", "a map");
    return ForEachEntry(
        value, "key",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          if (name == "max_members") {
            Result<int64_t> n = Int(k, v, "sets.max_members", 1, kMaxSetMembers);
            if (!n.ok()) return n.status();
            sets.max_members = *n;
          } else if (name == "max_ttl") {
            Result<int64_t> ms = Duration(k, v, "sets.max_ttl", 1, kMaxSetTtlMs);
            if (!ms.ok()) return ms.status();
            sets.max_ttl_ms = *ms;
          } else {
            return Fail(k.Mark(),
                        "unknown key '" + name + "' in sets; expected max_members or max_ttl",
                        name);
          }
          return Status::Ok();
        });
  }

  // An OTP limit: one "N/period" string, N small (each event is kept).
  Result<Limit> OtpLimit(const YAML::Node& key, const YAML::Node& value,
                         const std::string& field) const {
    if (!value.IsScalar()) return WrongType(key, value, field, "a limit like 3/5m");
    Result<Limit> limit = ParseLimit(value.Scalar());
    if (!limit.ok()) return Fail(value.Mark(), limit.status().message(), value.Scalar());
    if (limit->count > kMaxOtpLimitCount || limit->PeriodMs() > kMaxOtpPeriodMs) {
      return Fail(value.Mark(),
                  "'" + field + "' must allow at most " + std::to_string(kMaxOtpLimitCount) +
                      " per period of at most 366 days (each one is kept until it ages out)",
                  value.Scalar());
    }
    return *limit;
  }

  Status ParseOtp(const YAML::Node& key, const YAML::Node& value, OtpConfig& otp) const {
    if (!value.IsNull() && !value.IsMap()) return WrongType(key, value, "otp", "a map");
    otp.enabled = true;
    if (value.IsNull()) return Status::Ok();  // "otp:" alone: every default
    return ForEachEntry(value, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseOtpEntry(name, k, v, otp);
                        });
  }

  // Messages never quote a secret: the file names a variable, never a value.
  Status ParseOtpEntry(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                       OtpConfig& otp) const {
    if (name == "digits") {
      Result<int64_t> n = Int(key, value, "otp.digits", 4, 10);
      if (!n.ok()) return n.status();
      otp.digits = static_cast<int>(*n);
    } else if (name == "ttl") {
      Result<int64_t> ms = Duration(key, value, "otp.ttl", 1000, kMaxOtpCodeTtlMs);
      if (!ms.ok()) return ms.status();
      otp.ttl_ms = *ms;
    } else if (name == "issue_limit" || name == "verify_limit") {
      Result<Limit> limit = OtpLimit(key, value, "otp." + name);
      if (!limit.ok()) return limit.status();
      (name == "issue_limit" ? otp.issue_limit : otp.verify_limit) = *limit;
    } else if (name == "max_live_codes") {
      Result<int64_t> n = Int(key, value, "otp.max_live_codes", 1, kMaxOtpLiveCodes);
      if (!n.ok()) return n.status();
      otp.max_live_codes = *n;
    } else if (name == "secret_env") {
      Result<std::string> variable = EnvironmentVariable(key, value, "otp.secret_env");
      if (!variable.ok()) return variable.status();
      otp.secret_env = *std::move(variable);
    } else if (name == "secret") {
      return Fail(key.Mark(),
                  "the OTP secret does not go in the file: put it in an environment variable "
                  "and name that with 'otp.secret_env'",
                  name);
    } else if (name == "delivery") {
      return ParseDelivery(key, value, otp.delivery);
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + name +
                      "' in otp; expected digits, ttl, issue_limit, verify_limit, "
                      "max_live_codes, secret_env or delivery",
                  name);
    }
    return Status::Ok();
  }

  Status ParseDelivery(const YAML::Node& key, const YAML::Node& value,
                       OtpDeliveryConfig& delivery) const {
    if (!value.IsMap()) return WrongType(key, value, "otp.delivery", "a map with a url");
    bool has_url = false;
    Status s = ForEachEntry(
        value, "key",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          if (name == "url") {
            Result<std::string> url = String(k, v, "otp.delivery.url");
            if (!url.ok()) return url.status();
            if (Result<HttpUrl> parsed = ParseHttpUrl(*url); !parsed.ok()) {
              return FailAt(k, v, "'otp.delivery.url': " + parsed.status().message(), *url);
            }
            delivery.url = *std::move(url);
            has_url = true;
          } else if (name == "timeout_ms") {
            Result<int64_t> n = Int(k, v, "otp.delivery.timeout_ms", 1, 60'000);
            if (!n.ok()) return n.status();
            delivery.timeout_ms = *n;
          } else if (name == "queue_size") {
            Result<int64_t> n = Int(k, v, "otp.delivery.queue_size", 1, 1'000'000);
            if (!n.ok()) return n.status();
            delivery.queue_size = *n;
          } else if (name == "auth_header_env") {
            Result<std::string> variable =
                EnvironmentVariable(k, v, "otp.delivery.auth_header_env");
            if (!variable.ok()) return variable.status();
            delivery.auth_header_env = *std::move(variable);
          } else {
            return Fail(k.Mark(),
                        "unknown key '" + name +
                            "' in otp.delivery; expected url, timeout_ms, queue_size or "
                            "auth_header_env",
                        name);
          }
          return Status::Ok();
        });
    if (!s.ok()) return s;
    if (!has_url) return Fail(key.Mark(), "'otp.delivery' needs a url", "delivery");
    return Status::Ok();
  }

  Result<std::string> EnvironmentVariable(const YAML::Node& key, const YAML::Node& value,
                                          std::string_view field) const {
    Result<std::string> variable = String(key, value, field);
    if (!variable.ok()) return variable.status();
    if (!IsEnvironmentVariableName(*variable)) {
      return FailAt(
          key, value,
          "'" + std::string(field) + "' must name an environment variable ([A-Za-z_][A-Za-z0-9_]*)",
          *variable);
    }
    return variable;
  }

  // A rule's `alerts`: thresholds (percent), webhook, secret_env. Messages
  // never quote a secret: the file names a variable, never a value.
  Status ParseAlerts(const YAML::Node& key, const YAML::Node& value, const std::string& path,
                     AlertConfig& alerts) const {
    if (!value.IsMap()) {
      return WrongType(key, value, path, "a map with thresholds and a webhook");
    }
    bool has_thresholds = false, has_webhook = false;
    Status s = ForEachEntry(
        value, "key",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          const std::string field = path + "." + name;
          if (name == "thresholds") {
            has_thresholds = true;
            return ParseThresholds(k, v, field, alerts.thresholds);
          }
          if (name == "webhook") {
            Result<std::string> url = String(k, v, field);
            if (!url.ok()) return url.status();
            if (Result<HttpUrl> parsed = ParseHttpUrl(*url); !parsed.ok()) {
              return FailAt(k, v, "'" + field + "': " + parsed.status().message(), *url);
            }
            alerts.webhook = *std::move(url);
            has_webhook = true;
            return Status::Ok();
          }
          if (name == "secret_env") {
            Result<std::string> variable = EnvironmentVariable(k, v, field);
            if (!variable.ok()) return variable.status();
            alerts.secret_env = *std::move(variable);
            return Status::Ok();
          }
          if (name == "secret") {
            return Fail(k.Mark(),
                        "the webhook secret does not go in the file: put it in an environment "
                        "variable and name that with '" +
                            path + ".secret_env'",
                        name);
          }
          return Fail(k.Mark(),
                      "unknown key '" + name + "' in " + path +
                          "; expected thresholds, webhook or secret_env",
                      name);
        });
    if (!s.ok()) return s;
    if (!has_thresholds) {
      return Fail(key.Mark(), "'" + path + "' needs thresholds, e.g. [80, 100]", "alerts");
    }
    if (!has_webhook) {
      return Fail(key.Mark(), "'" + path + "' needs a webhook (http://host:port/path)", "alerts");
    }
    return Status::Ok();
  }

  // Percentages 1..100, strictly increasing: one threshold or a list.
  Status ParseThresholds(const YAML::Node& key, const YAML::Node& value, const std::string& field,
                         std::vector<int>& out) const {
    std::vector<YAML::Node> nodes;
    if (value.IsSequence()) {
      for (const YAML::Node& item : value) nodes.push_back(item);
    } else if (value.IsScalar()) {
      nodes.push_back(value);
    } else {
      return WrongType(key, value, field, "a percentage or a list of them");
    }
    if (nodes.empty()) return FailAt(key, value, "'" + field + "' is an empty list", key.Scalar());
    for (const YAML::Node& node : nodes) {
      if (out.size() == static_cast<size_t>(kMaxAlertThresholds)) {
        return Fail(node.Mark(),
                    "'" + field + "' has too many thresholds (at most " +
                        std::to_string(kMaxAlertThresholds) + ")",
                    node.IsScalar() ? node.Scalar() : key.Scalar());
      }
      Result<int64_t> pct = Int(key, node, field, 1, 100);
      if (!pct.ok()) return pct.status();
      if (!out.empty() && *pct <= out.back()) {
        return Fail(node.Mark(), "'" + field + "' must be in increasing order, each once",
                    node.Scalar());
      }
      out.push_back(static_cast<int>(*pct));
    }
    return Status::Ok();
  }

  Status ParseAlertDelivery(const YAML::Node& key, const YAML::Node& value,
                            AlertDeliveryConfig& d) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) return WrongType(key, value, "alert_delivery", "a map");
    Status s = ForEachEntry(
        value, "key",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          const std::string field = "alert_delivery." + name;
          struct IntField {
            const char* name;
            int64_t min, max;
            int64_t* target;
          };
          int64_t workers = d.workers;
          const IntField ints[] = {
              {"queue_size", 1, 10'000'000, &d.queue_size},
              {"workers", 1, 64, &workers},
              {"timeout_ms", 1, 60'000, &d.timeout_ms},
              {"recent", 1, 10'000, &d.recent},
              {"stream_max_len", 100, 100'000'000, &d.stream_max_len},
          };
          for (const IntField& f : ints) {
            if (name != f.name) continue;
            Result<int64_t> n = Int(k, v, field, f.min, f.max);
            if (!n.ok()) return n.status();
            *f.target = *n;
            d.workers = static_cast<int>(workers);
            return Status::Ok();
          }
          struct DurationField {
            const char* name;
            int64_t min_ms, max_ms;
            int64_t* target;
          };
          const DurationField durations[] = {
              {"retry_for", 1, 30 * kDayMs, &d.retry_for_ms},
              {"backoff_initial", 1, kDayMs, &d.backoff_initial_ms},
              {"backoff_max", 1, kDayMs, &d.backoff_max_ms},
              {"claim_after", 1000, kDayMs, &d.claim_after_ms},
          };
          for (const DurationField& f : durations) {
            if (name != f.name) continue;
            Result<int64_t> ms = Duration(k, v, field, f.min_ms, f.max_ms);
            if (!ms.ok()) return ms.status();
            *f.target = *ms;
            return Status::Ok();
          }
          if (name == "spool") {
            Result<std::string> path = String(k, v, field);
            if (!path.ok()) return path.status();
            if (path->empty()) return FailAt(k, v, "'" + field + "' must be a file path", "");
            d.spool = *std::move(path);
            return Status::Ok();
          }
          return Fail(k.Mark(),
                      "unknown key '" + name +
                          "' in alert_delivery; expected queue_size, workers, timeout_ms, "
                          "retry_for, backoff_initial, backoff_max, spool, recent, "
                          "stream_max_len or claim_after",
                      name);
        });
    if (!s.ok()) return s;
    if (d.backoff_initial_ms > d.backoff_max_ms) {
      return Fail(key.Mark(),
                  "'alert_delivery.backoff_initial' must not exceed 'alert_delivery.backoff_max'",
                  "alert_delivery");
    }
    return Status::Ok();
  }

  Status ParseRules(const YAML::Node& key, const YAML::Node& value, Config& config) const {
    if (value.IsNull()) return Status::Ok();  // "rules:" with nothing under it
    if (!value.IsMap()) return WrongType(key, value, "rules", "a map of rule name to rule");
    return ForEachEntry(
        value, "rule",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          Result<Rule> rule = ParseRule(name, k, v, config);
          if (!rule.ok()) return rule.status();
          config.rules.push_back(*std::move(rule));
          return Status::Ok();
        });
  }

  // A limit list: a sequence of limit strings or one string.
  Result<std::vector<PlacedLimit>> ParseLimits(const YAML::Node& key, const YAML::Node& value,
                                               const std::string& field) const {
    std::vector<PlacedLimit> out;
    auto add = [&](const YAML::Node& node) -> Status {
      if (!node.IsScalar()) {
        return Fail(
            node.IsNull() ? key.Mark() : node.Mark(),
            "each limit in '" + field + "' must be a string like 60/minute, not " + TypeName(node),
            key.Scalar());
      }
      if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
        return Fail(node.Mark(),
                    "'" + field + "' has too many limits (at most " +
                        std::to_string(kMaxLimitsPerRule) + ")",
                    node.Scalar());
      }
      Result<Limit> limit = ParseLimit(node.Scalar());
      if (!limit.ok()) return Fail(node.Mark(), limit.status().message(), node.Scalar());
      out.push_back({*limit, node});
      return Status::Ok();
    };
    if (value.IsScalar()) {
      if (Status s = add(value); !s.ok()) return s;
    } else if (value.IsSequence()) {
      for (const YAML::Node& item : value) {
        if (Status s = add(item); !s.ok()) return s;
      }
    } else {
      return WrongType(key, value, field, "a limit or a list of limits");
    }
    if (out.empty()) {
      return FailAt(key, value, "'" + field + "' needs at least one limit", key.Scalar());
    }
    return out;
  }

  // An integer or a list of integers; the per-algorithm range is checked
  // once the algorithm is known.
  Result<std::vector<PlacedInt>> ParseBurst(const YAML::Node& key, const YAML::Node& value,
                                            const std::string& field) const {
    std::vector<PlacedInt> out;
    auto add = [&](const YAML::Node& node) -> Status {
      Result<int64_t> n = Int(key, node, field, 0, kMaxLimitCount);
      if (!n.ok()) return n.status();
      out.push_back({*n, node});
      return Status::Ok();
    };
    if (value.IsSequence()) {
      for (const YAML::Node& item : value) {
        if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
          return Fail(item.Mark(),
                      "'" + field + "' has more values than a rule has limits (at most " +
                          std::to_string(kMaxLimitsPerRule) + ")",
                      item.Scalar());
        }
        if (Status s = add(item); !s.ok()) return s;
      }
      if (out.empty()) return FailAt(key, value, "'" + field + "' is an empty list", key.Scalar());
    } else if (Status s = add(value); !s.ok()) {
      return s;
    }
    return out;
  }

  Result<Rule> ParseRule(const std::string& name, const YAML::Node& name_key,
                         const YAML::Node& body, Config& config) const {
    if (!IsValidName(name)) {
      return Fail(name_key.Mark(),
                  "rule names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'", name);
    }
    if (!body.IsMap()) return WrongType(name_key, body, "rules." + name, "a map");
    RuleDraft draft;
    draft.rule.name = name;
    Status s = ForEachEntry(
        body, "key", [&](const std::string& field, const YAML::Node& k, const YAML::Node& v) {
          return ParseRuleField(field, k, v, draft, config);
        });
    if (!s.ok()) return s;
    if (draft.rule.is_concurrency()) return FinishConcurrencyRule(name, name_key, draft);
    if (draft.max_in_flight.has_value() || !draft.lease_ttl_key.IsNull()) {
      return Fail(draft.lease_ttl_key.IsNull() ? name_key.Mark() : draft.lease_ttl_key.Mark(),
                  "'max_in_flight' and 'lease_ttl' are for algorithm: concurrency, not " +
                      std::string(AlgorithmName(draft.rule.algorithm)),
                  name);
    }
    if (!draft.has_limits) {
      return Fail(name_key.Mark(), "rule '" + name + "' has no 'limits'", name);
    }
    for (const Tier& tier : draft.tiers) {
      if (tier.max_in_flight.has_value()) {
        return Fail(tier.key.Mark(),
                    "tier '" + tier.name + "' must be limits like 600/minute (a bare number is " +
                        "a concurrency rule's max_in_flight)",
                    tier.name);
      }
    }
    if (s = CheckBurst(draft); !s.ok()) return s;
    if (s = CheckLimits(draft.rule, draft.limits); !s.ok()) return s;
    for (const Tier& tier : draft.tiers) {
      if (s = CheckLimits(draft.rule, tier.limits); !s.ok()) return s;
    }

    Rule& rule = draft.rule;
    for (const PlacedLimit& l : draft.limits) rule.limits.push_back(l.limit);
    for (const Tier& tier : draft.tiers) {
      std::vector<Limit>& out = rule.tiers[tier.name];
      for (const PlacedLimit& l : tier.limits) out.push_back(l.limit);
    }
    return std::move(rule);
  }

  // A concurrency rule: max_in_flight (required) and lease_ttl, tiers of a
  // max_in_flight each; none of a rate's fields.
  Result<Rule> FinishConcurrencyRule(const std::string& name, const YAML::Node& name_key,
                                     RuleDraft& draft) const {
    if (!draft.rate_fields.empty()) {
      return Fail(draft.first_rate_key.Mark(),
                  "'" + draft.rate_fields.front() +
                      "' is not for algorithm: concurrency (it takes max_in_flight, lease_ttl, "
                      "tiers of a max_in_flight each, on_backend_error, on_store_full and "
                      "max_waiters)",
                  draft.rate_fields.front());
    }
    if (!draft.max_in_flight.has_value()) {
      return Fail(name_key.Mark(), "concurrency rule '" + name + "' has no 'max_in_flight'", name);
    }
    Rule& rule = draft.rule;
    rule.limits = {ConcurrencyLimit(*draft.max_in_flight, draft.lease_ttl_ms)};
    for (const Tier& tier : draft.tiers) {
      // A tier is parsed before the algorithm may be known: as a limit, or
      // as the integer it must be here (Tier::max_in_flight).
      if (!tier.max_in_flight.has_value()) {
        return Fail(tier.key.Mark(),
                    "a tier of a concurrency rule is its max_in_flight, an integer from 0 to " +
                        std::to_string(kMaxInFlight),
                    tier.name);
      }
      rule.tiers[tier.name] = {ConcurrencyLimit(*tier.max_in_flight, draft.lease_ttl_ms)};
    }
    return std::move(rule);
  }

  Status ParseRuleField(const std::string& field, const YAML::Node& key, const YAML::Node& value,
                        RuleDraft& draft, Config& config) const {
    Rule& rule = draft.rule;
    const std::string path = "rules." + rule.name + "." + field;
    if (field == "limits" || field == "burst" || field == "alerts" || field == "shadow" ||
        field == "block_for" || field == "timezone") {
      if (draft.rate_fields.empty()) draft.first_rate_key = key;
      draft.rate_fields.push_back(field);
    }
    if (field == "max_in_flight") {
      Result<int64_t> n = Int(key, value, path, 0, kMaxInFlight);
      if (!n.ok()) return n.status();
      draft.max_in_flight = *n;
      if (draft.lease_ttl_key.IsNull()) draft.lease_ttl_key = key;
    } else if (field == "lease_ttl") {
      Result<int64_t> ms = Duration(key, value, path, 1, kMaxLeaseTtlMs);
      if (!ms.ok()) return ms.status();
      draft.lease_ttl_ms = *ms;
      draft.lease_ttl_key = key;
    } else if (field == "max_waiters") {
      Result<int64_t> n = Int(key, value, path, 0, kMaxMaxWaiters);
      if (!n.ok()) return n.status();
      rule.max_waiters = *n;
    } else if (field == "algorithm") {
      Result<Algorithm> algorithm = AlgorithmValue(key, value, path);
      if (!algorithm.ok()) return algorithm.status();
      rule.algorithm = *algorithm;
    } else if (field == "limits") {
      Result<std::vector<PlacedLimit>> limits = ParseLimits(key, value, path);
      if (!limits.ok()) return limits.status();
      draft.limits = *std::move(limits);
      draft.has_limits = true;
    } else if (field == "burst") {
      Result<std::vector<PlacedInt>> burst = ParseBurst(key, value, path);
      if (!burst.ok()) return burst.status();
      draft.burst = *std::move(burst);
      draft.burst_key = key;
    } else if (field == "tiers") {
      if (!value.IsMap()) return WrongType(key, value, path, "a map of tier name to limits");
      return ForEachEntry(value, "tier",
                          [&](const std::string& tier, const YAML::Node& k, const YAML::Node& v) {
                            return ParseTier(tier, k, v, path, draft);
                          });
    } else if (field == "timezone") {
      Result<std::string> text = String(key, value, path);
      if (!text.ok()) return text.status();
      Result<std::shared_ptr<const core::Zone>> zone = core::Zone::Load(*text);
      if (!zone.ok()) return FailAt(key, value, zone.status().message(), *text);
      rule.timezone = (*zone)->name();
    } else if (field == "shadow") {
      Result<bool> shadow = Bool(key, value, path);
      if (!shadow.ok()) return shadow.status();
      rule.shadow = *shadow;
    } else if (field == "on_backend_error") {
      Result<OnBackendError> on_error = OnBackendErrorValue(key, value, path);
      if (!on_error.ok()) return on_error.status();
      rule.on_backend_error = *on_error;
    } else if (field == "on_store_full") {
      Result<OnStoreFull> on_full = OnStoreFullValue(key, value, path);
      if (!on_full.ok()) return on_full.status();
      rule.on_store_full = *on_full;
    } else if (field == "alerts") {
      return ParseAlerts(key, value, path, rule.alerts);
    } else if (field == "block_for") {
      Result<int64_t> ms = Duration(key, value, path, 1, kMaxBlockForMs);
      if (!ms.ok()) return ms.status();
      rule.block_for_ms = *ms;
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + field + "' in rule '" + rule.name +
                      "'; expected algorithm, limits, burst, tiers, timezone, shadow, "
                      "on_backend_error, on_store_full, alerts, block_for, max_waiters, "
                      "max_in_flight or lease_ttl",
                  field);
    }
    return Status::Ok();
  }

  Status ParseTier(const std::string& tier, const YAML::Node& key, const YAML::Node& value,
                   const std::string& tiers_path, RuleDraft& draft) const {
    if (!IsValidName(tier)) {
      return Fail(key.Mark(),
                  "tier names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'", tier);
    }
    // A bare integer is a concurrency rule's tier (its max_in_flight); the
    // algorithm may come later in the rule, so both readings wait for it.
    if (value.IsScalar()) {
      if (const std::optional<int64_t> n = ParseInt(value.Scalar()); n.has_value()) {
        if (*n < 0 || *n > kMaxInFlight) {
          return Fail(value.Mark(),
                      "tier '" + tier + "': max_in_flight must be from 0 to " +
                          std::to_string(kMaxInFlight),
                      value.Scalar());
        }
        draft.tiers.push_back({tier, key, {}, *n});
        return Status::Ok();
      }
    }
    Result<std::vector<PlacedLimit>> limits = ParseLimits(key, value, tiers_path + "." + tier);
    if (!limits.ok()) return limits.status();
    draft.tiers.push_back({tier, key, *std::move(limits), std::nullopt});
    return Status::Ok();
  }

  // burst needs the algorithm and the limit counts, which may come after it.
  Status CheckBurst(RuleDraft& draft) const {
    Rule& rule = draft.rule;
    if (draft.burst.empty()) return Status::Ok();
    const bool bucket = rule.algorithm == Algorithm::kTokenBucket;
    if (!bucket && rule.algorithm != Algorithm::kGcra) {
      return Fail(draft.burst_key.Mark(),
                  "'burst' is only allowed with token_bucket and gcra, not " +
                      std::string(AlgorithmName(rule.algorithm)),
                  "burst");
    }
    // gcra's capacity is burst + 1 and must itself be a valid count.
    const int64_t min = bucket ? 1 : 0;
    const int64_t max = bucket ? kMaxLimitCount : kMaxLimitCount - 1;
    for (const PlacedInt& b : draft.burst) {
      if (b.value < min || b.value > max) {
        return Fail(b.node.Mark(),
                    std::string(AlgorithmName(rule.algorithm)) + " 'burst' must be between " +
                        std::to_string(min) + " and " + std::to_string(max),
                    b.node.Scalar());
      }
      rule.burst.push_back(b.value);
    }
    if (rule.burst.size() == 1) return Status::Ok();
    if (rule.burst.size() != draft.limits.size()) {
      return Fail(draft.burst_key.Mark(),
                  "'burst' has " + std::to_string(rule.burst.size()) + " values but the rule has " +
                      std::to_string(draft.limits.size()) +
                      " limits; give one value, or one per limit",
                  "burst");
    }
    // One value per limit must also mean one per limit of every tier.
    for (const Tier& tier : draft.tiers) {
      if (tier.limits.size() != rule.burst.size()) {
        return Fail(tier.key.Mark(),
                    "tier '" + tier.name + "' has " + std::to_string(tier.limits.size()) +
                        " limits but 'burst' has " + std::to_string(rule.burst.size()) + " values",
                    tier.name);
      }
    }
    return Status::Ok();
  }

  // Bounds that depend on the algorithm and burst: beyond them the state
  // arithmetic (C++ int64, Lua doubles) would lose exactness or overflow.
  Status CheckLimits(const Rule& rule, const std::vector<PlacedLimit>& limits) const {
    for (size_t i = 0; i < limits.size(); ++i) {
      const Limit& l = limits[i].limit;
      const std::string text = l.ToString();
      const __int128 period_ms = l.PeriodMs();
      const std::optional<int64_t> burst = rule.burst.empty() ? std::nullopt
                                           : rule.burst.size() == 1
                                               ? std::optional<int64_t>(rule.burst[0])
                                               : std::optional<int64_t>(rule.burst[i]);
      std::string problem;
      switch (rule.algorithm) {
        case Algorithm::kFixedWindow:
        case Algorithm::kConcurrency:
          break;
        case Algorithm::kSlidingWindow:
          if (l.count * period_ms > kMaxExactProduct) {
            problem = "count x period must be at most 2^53 ms for sliding_window";
          }
          break;
        case Algorithm::kTokenBucket: {
          const int64_t capacity = burst.value_or(l.count);
          if ((capacity > l.count ? capacity : l.count) * period_ms > kMaxExactProduct) {
            problem = "max(count, burst) x period must be at most 2^53 ms for token_bucket";
          }
          break;
        }
        case Algorithm::kGcra: {
          const __int128 max_burst = burst.value_or(l.count - 1);
          const __int128 emission_us = period_ms * 1000 / l.count;
          if (emission_us < 1) {
            problem = "gcra needs at least 1 us per unit (period / count)";
          } else if (emission_us * (max_burst + 1) > kMaxGcraSpanUs) {
            problem = "period / count x (burst + 1) must be at most 2^52 us for gcra";
          }
          break;
        }
        case Algorithm::kSlidingLog:
          if (l.count > kMaxSlidingLogCount) {
            problem = "sliding_log keeps one timestamp per request, so count must be at most " +
                      std::to_string(kMaxSlidingLogCount);
          }
          break;
      }
      if (!problem.empty()) {
        return Fail(limits[i].node.Mark(), "limit \"" + text + "\" is too large: " + problem,
                    limits[i].node.Scalar());
      }
    }
    return Status::Ok();
  }

  std::string_view source_;
};

// The source line holding `mark`, trimmed, for the "near" of a YAML syntax
// error. yaml-cpp reports unclosed brackets and the like at the end of the
// input, so an empty line yields the last non-empty one before it.
std::string_view LineAt(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null() || mark.pos < 0) return {};
  size_t end = std::min(static_cast<size_t>(mark.pos), text.size());
  const size_t newline = text.find('\n', end);
  end = newline == std::string_view::npos ? text.size() : newline;
  while (true) {
    const size_t previous = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    const size_t begin = previous == std::string_view::npos ? 0 : previous + 1;
    std::string_view line = text.substr(begin, end - begin);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (!line.empty() || begin == 0) return line;
    end = begin - 1;  // the newline that ends the line before
  }
}

// Records where the first node of a document starts.
class FirstNodeMark final : public YAML::EventHandler {
 public:
  bool seen() const { return seen_; }
  const YAML::Mark& mark() const { return mark_; }

  void OnDocumentStart(const YAML::Mark& mark) override { Note(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Note(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnMapEnd() override {}

 private:
  void Note(const YAML::Mark& mark) {
    if (!seen_) mark_ = mark;
    seen_ = true;
  }
  bool seen_ = false;
  YAML::Mark mark_;
};

// Whether anything follows the first document, and where. A config is one
// document: a second one ("---") would otherwise be silently ignored. This
// asks the parser for exactly one more document instead of using
// YAML::LoadAll, which never returns on some inputs (yaml-cpp 0.7 yields
// empty documents forever for a stray ',' at top level, until memory runs
// out).
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstNodeMark first, second;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  if (!parser.HandleNextDocument(second) || !second.seen()) return std::nullopt;
  return second.mark();
}

std::string JoinLimits(const std::vector<Limit>& limits) {
  return absl::StrJoin(limits, ", ",
                       [](std::string* out, const Limit& l) { out->append(l.ToString()); });
}

// A concurrency rule's one limit, in the config's words.
std::string ConcurrencyText(const std::vector<Limit>& limits) {
  if (limits.empty()) return "";
  return "max_in_flight=" + std::to_string(limits[0].count) +
         ", lease_ttl=" + std::to_string(limits[0].multiplier) + "ms";
}

}  // namespace

Result<Config> ParseConfig(std::string_view yaml, std::string_view source) {
  ConfigParser parser(source);
  if (yaml.size() > kMaxConfigBytes) {
    return parser.Fail(YAML::Mark(), "config is larger than 4 MiB", yaml.substr(0, 32));
  }
  try {
    const std::string text(yaml);
    const YAML::Node root = YAML::Load(text);
    if (const std::optional<YAML::Mark> second = SecondDocument(text)) {
      return parser.Fail(*second, "only one YAML document is allowed", LineAt(yaml, *second));
    }
    Config config;
    config.source = std::string(source);
    if (Status s = parser.ParseDocument(root, config); !s.ok()) return s;
    return config;
  } catch (const YAML::Exception& e) {
    // The line is quoted as it is, unless it may hold the auth token.
    std::string_view line = LineAt(yaml, e.mark);
    if (line.find("auth_token") != std::string_view::npos) line = "(auth_token line not shown)";
    return parser.Fail(e.mark, "YAML syntax error: " + e.msg, line);
  } catch (const std::exception& e) {
    return parser.Fail(YAML::Mark(), std::string("cannot read YAML: ") + e.what(), "");
  } catch (...) {
    return parser.Fail(YAML::Mark(), "cannot read YAML", "");
  }
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return InvalidArgumentError(path + ": cannot open config file: " + std::strerror(errno));
  }
  // One byte past the bound is enough for ParseConfig to refuse a huge file
  // without reading all of it.
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= kMaxConfigBytes) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) {
    return InvalidArgumentError(path + ": cannot read config file: " + std::strerror(error));
  }
  return ParseConfig(text, path);
}

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
    if (rule.timezone != "UTC") out += "; timezone=" + rule.timezone;
    if (rule.shadow) out += "; shadow";
    if (rule.block_for_ms > 0) out += "; block_for=" + DurationText(rule.block_for_ms);
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
  if (!config.envoy_ratelimit.files.empty()) {
    out += "envoy_ratelimit: " + absl::StrJoin(config.envoy_ratelimit.files, ", ") + " (" +
           std::string(AlgorithmName(config.envoy_ratelimit.algorithm)) + ")\n";
  }
  return out;
}

}  // namespace floodgate
