// The YAML configuration: ParseConfig and LoadConfigFile, and the dispatch
// of each top-level section to the part that reads it (*_section.h).
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
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "config/admin_section.h"
#include "config/alerts_section.h"
#include "config/envoy_ratelimit_section.h"
#include "config/rules_section.h"
#include "config/server_section.h"
#include "config/sets_and_otp_section.h"
#include "config/store_section.h"
#include "config/subjects_section.h"
#include "config/tls_section.h"
#include "config/visibility_section.h"
#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace floodgate {
namespace {

using config::Fields;

// Configs are a few kilobytes; the bound keeps a hostile or mistaken input
// (a log file passed as --config) from costing seconds of parsing.
constexpr size_t kMaxConfigBytes = size_t{4} << 20;

// One top-level entry: a section to its part, or one of the few plain
// values read here.
Status ParseSection(const Fields& fields, const std::string& name, const YAML::Node& key,
                    const YAML::Node& value, Config& config) {
  if (name == "store") return config::ParseStore(fields, key, value, config.store);
  if (name == "listen") return config::ParseListen(fields, key, value, config.listen);
  if (name == "listen_tls") return config::ParseListenTls(fields, key, value, config.listen_tls);
  if (name == "tls") return config::ParseTls(fields, key, value, config.tls);
  if (name == "engine") return config::ParseEngine(fields, key, value, config.engine);
  if (name == "redis") return config::ParseRedis(fields, key, value, config.redis);
  if (name == "server") return config::ParseServer(fields, key, value, config.server);
  if (name == "rules") return config::ParseRules(fields, key, value, config.rules);
  if (name == "sets") return config::ParseSets(fields, key, value, config.sets);
  if (name == "otp") return config::ParseOtp(fields, key, value, config.otp);
  if (name == "alert_delivery") {
    return config::ParseAlertDelivery(fields, key, value, config.alert_delivery);
  }
  if (name == "envoy_ratelimit") {
    return config::ParseEnvoyRateLimit(fields, key, value, config.envoy_ratelimit);
  }
  if (name == "admin") return config::ParseAdmin(fields, key, value, config.admin);
  if (name == "visibility") return config::ParseVisibility(fields, key, value, config.visibility);
  if (name == "lists") return config::ParseLists(fields, key, value, config.lists);
  if (name == "jwt") return config::ParseJwt(fields, key, value, config.jwt);
  if (name == "redact_keys") {
    Result<bool> redact = fields.Bool(key, value, "redact_keys");
    if (!redact.ok()) return redact.status();
    config.redact_keys = *redact;
    return Status::Ok();
  }
  if (name == "data_dir") {
    Result<std::string> dir = fields.String(key, value, "data_dir");
    if (!dir.ok()) return dir.status();
    if (dir->empty()) return fields.FailAt(key, value, "'data_dir' must name a directory", *dir);
    config.data_dir = *std::move(dir);
    return Status::Ok();
  }
  if (name == "snapshot_interval") {
    Result<int64_t> ms = fields.DurationOrOff(key, value, "snapshot_interval", 86'400'000);
    if (!ms.ok()) return ms.status();
    config.snapshot_interval_ms = *ms;
    return Status::Ok();
  }
  return fields.Fail(
      key.Mark(),
      "unknown key '" + name +
          "' at top level; expected store, listen, listen_tls, tls, engine, redis, "
          "server, rules, "
          "sets, otp, alert_delivery, envoy_ratelimit, admin, visibility, lists, jwt, "
          "redact_keys, data_dir or snapshot_interval",
      name);
}

// Walks one config document; returns the first error found.
Status ParseDocument(const Fields& fields, const YAML::Node& root, Config& config) {
  if (root.IsNull()) return Status::Ok();  // an empty file: all defaults, no rules
  if (!root.IsMap()) {
    return fields.Fail(root.Mark(),
                       "the config must be a map of sections (store, listen, engine, rules), not " +
                           std::string(config::TypeName(root)),
                       root.Scalar());
  }
  return fields.ForEachEntry(
      root, "key", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseSection(fields, name, k, v, config);
      });
}

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

}  // namespace

Result<Config> ParseConfig(std::string_view yaml, std::string_view source) {
  const Fields fields(source);
  if (yaml.size() > kMaxConfigBytes) {
    return fields.Fail(YAML::Mark(), "config is larger than 4 MiB", yaml.substr(0, 32));
  }
  try {
    const std::string text(yaml);
    const YAML::Node root = YAML::Load(text);
    if (const std::optional<YAML::Mark> second = SecondDocument(text)) {
      return fields.Fail(*second, "only one YAML document is allowed", LineAt(yaml, *second));
    }
    Config config;
    config.source = std::string(source);
    if (Status s = ParseDocument(fields, root, config); !s.ok()) return s;
    if (Status s = config::CheckTls(fields, config); !s.ok()) return s;
    if (Status s = config::CheckSubjects(fields, config); !s.ok()) return s;
    return config;
  } catch (const YAML::Exception& e) {
    // The line is quoted as it is, unless it may hold the auth token.
    std::string_view line = LineAt(yaml, e.mark);
    if (line.find("auth_token") != std::string_view::npos) line = "(auth_token line not shown)";
    return fields.Fail(e.mark, "YAML syntax error: " + e.msg, line);
  } catch (const std::exception& e) {
    return fields.Fail(YAML::Mark(), std::string("cannot read YAML: ") + e.what(), "");
  } catch (...) {
    return fields.Fail(YAML::Mark(), "cannot read YAML", "");
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

}  // namespace floodgate
