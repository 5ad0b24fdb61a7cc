// envoyproxy/ratelimit's YAML: parsing and validation.
//
// The validation follows envoyproxy/ratelimit's loader: a domain is
// required, every descriptor needs a key, a composite key (key and value)
// may appear once per level, a unit is required unless the limit is
// unlimited (and then refused), `replaces` entries need a name other than
// the limit's own, unknown keys are refused. Descriptor trees are walked
// with an explicit depth bound, and the number of descriptors is bounded, so
// no file can make this code recurse deeply or allocate without limit.
// yaml-cpp throws; nothing escapes ParseDomain.
#include "config/envoy_ratelimit.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "common/enum_table.h"
#include "common/text.h"
#include "config/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::envoy {
namespace {

using config::TypeName;

std::optional<Unit> ParseUnit(std::string_view text) {
  // envoyproxy/ratelimit upper-cases the word and looks it up among the
  // enum's names, so any case works; UNKNOWN is not a unit.
  for (Unit u :
       {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay, Unit::kMonth, Unit::kYear}) {
    if (text::EqualsIgnoreCase(text, UnitName(u))) return u;
  }
  return std::nullopt;
}

class DomainParser {
 public:
  explicit DomainParser(const config::Fields& fields) : fields_(fields) {}

  // Messages and positions as in floodgate's own config (yaml_fields.h).
  Status Fail(const YAML::Mark& mark, std::string_view what, std::string_view near) const {
    return fields_.Fail(mark, what, near);
  }
  std::string Position(const YAML::Mark& mark) const { return fields_.Position(mark); }
  Status FailAt(const YAML::Node& key, const YAML::Node& value, std::string_view what,
                std::string_view near) const {
    return fields_.FailAt(key, value, what, near);
  }

  // Calls f(name, key, value) for each entry of `map` in file order; keys
  // must be non-empty strings, unique (yaml-cpp keeps duplicates silently).
  template <typename F>
  Status ForEachEntry(const YAML::Node& map, F&& f) const {
    std::set<std::string, std::less<>> seen;
    for (const auto& entry : map) {
      const YAML::Node key = entry.first;
      const YAML::Node value = entry.second;
      if (!key.IsScalar() || key.Scalar().empty()) {
        return Fail(key.Mark(), "keys must be non-empty strings", "");
      }
      if (!seen.insert(key.Scalar()).second) {
        return Fail(key.Mark(), "duplicate key '" + key.Scalar() + "'", key.Scalar());
      }
      if (Status s = f(key.Scalar(), key, value); !s.ok()) return s;
    }
    return Status::Ok();
  }

  // An empty value is an empty string, as envoyproxy/ratelimit reads it.
  Result<std::string> String(const YAML::Node& key, const YAML::Node& value) const {
    if (value.IsNull()) return std::string();
    return fields_.String(key, value, key.Scalar());
  }

  // YAML 1.1 spellings too, as envoyproxy/ratelimit's YAML library reads them.
  Result<bool> Bool(const YAML::Node& key, const YAML::Node& value) const {
    return fields_.Bool(key, value, key.Scalar());
  }

  Result<uint32_t> Uint32(const YAML::Node& key, const YAML::Node& value) const {
    if (value.IsScalar()) {
      std::string_view s = value.Scalar();
      if (!s.empty() && s.front() == '+') s.remove_prefix(1);
      uint64_t v = 0;
      bool ok = !s.empty() && s.size() <= 10;
      for (char c : s) {
        if (c < '0' || c > '9') ok = false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      if (ok && v <= UINT32_MAX) return static_cast<uint32_t>(v);
    }
    return FailAt(key, value, "'" + key.Scalar() + "' must be an integer between 0 and 4294967295",
                  value.IsScalar() ? value.Scalar() : key.Scalar());
  }

  Status ParseRoot(const YAML::Node& root, DomainConfig& out) {
    out.source = std::string(fields_.source());
    if (!root.IsMap()) {
      return Fail(root.Mark(),
                  "an envoyproxy/ratelimit config must be a map with 'domain' and "
                  "'descriptors', not " +
                      std::string(TypeName(root)),
                  root.IsScalar() ? root.Scalar() : "");
    }
    Status s = ForEachEntry(
        root, [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          if (name == "domain") {
            Result<std::string> domain = String(k, v);
            if (!domain.ok()) return domain.status();
            out.domain = *std::move(domain);
            return Status::Ok();
          }
          if (name == "descriptors") return ParseList(k, v, 1, out.descriptors);
          return Fail(k.Mark(), "unknown key '" + name + "'; expected domain or descriptors", name);
        });
    if (!s.ok()) return s;
    if (out.domain.empty())
      return Fail(root.Mark(), "the config has no (or an empty) 'domain'", "");
    return Status::Ok();
  }

 private:
  Status ParseList(const YAML::Node& key, const YAML::Node& value, int depth,
                   std::vector<DescriptorConfig>& out) {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsSequence()) {
      return FailAt(key, value, "'descriptors' must be a list, not " + std::string(TypeName(value)),
                    "descriptors");
    }
    if (depth > kMaxDescriptorDepth) {
      return Fail(value.Mark(),
                  "descriptors are nested more than " + std::to_string(kMaxDescriptorDepth) +
                      " levels deep",
                  "descriptors");
    }
    for (const YAML::Node& item : value) {
      if (++count_ > kMaxDescriptorsPerFile) {
        return Fail(
            item.Mark(),
            "more than " + std::to_string(kMaxDescriptorsPerFile) + " descriptors in one file", "");
      }
      if (!item.IsMap()) {
        return Fail(
            item.IsNull() ? key.Mark() : item.Mark(),
            "each descriptor must be a map with a 'key', not " + std::string(TypeName(item)),
            item.IsScalar() ? item.Scalar() : "");
      }
      DescriptorConfig d;
      d.position = Position(item.Mark());
      if (Status s = ParseDescriptor(item, depth, d); !s.ok()) return s;
      // The composite key is unique per level, as in envoyproxy/ratelimit.
      for (const DescriptorConfig& other : out) {
        if (other.key == d.key && other.value == d.value) {
          return Fail(item.Mark(),
                      "duplicate descriptor '" + d.key + (d.value.empty() ? "" : "=" + d.value) +
                          "' (first at " + other.position + ")",
                      d.key);
        }
      }
      out.push_back(std::move(d));
    }
    return Status::Ok();
  }

  Status ParseDescriptor(const YAML::Node& map, int depth, DescriptorConfig& d) {
    Status s = ForEachEntry(
        map, [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          if (name == "key" || name == "value") {
            Result<std::string> text = String(k, v);
            if (!text.ok()) return text.status();
            (name == "key" ? d.key : d.value) = *std::move(text);
            return Status::Ok();
          }
          if (name == "shadow_mode" || name == "detailed_metric") {
            Result<bool> b = Bool(k, v);
            if (!b.ok()) return b.status();
            (name == "shadow_mode" ? d.shadow_mode : d.detailed_metric) = *b;
            return Status::Ok();
          }
          if (name == "rate_limit") {
            // An empty block is no limit, as in envoyproxy/ratelimit.
            if (v.IsNull()) return Status::Ok();
            d.has_rate_limit = true;
            return ParseRateLimit(k, v, d.rate_limit);
          }
          if (name == "descriptors") return ParseList(k, v, depth + 1, d.descriptors);
          return Fail(k.Mark(),
                      "unknown key '" + name +
                          "' in a descriptor; expected key, value, rate_limit, shadow_mode, "
                          "detailed_metric or descriptors",
                      name);
        });
    if (!s.ok()) return s;
    if (d.key.empty()) return Fail(map.Mark(), "descriptor has no (or an empty) 'key'", "");
    return Status::Ok();
  }

  Status ParseRateLimit(const YAML::Node& key, const YAML::Node& value, RateLimitSpec& rl) {
    if (!value.IsMap()) {
      return FailAt(key, value, "'rate_limit' must be a map, not " + std::string(TypeName(value)),
                    "rate_limit");
    }
    rl.position = Position(value.Mark());
    std::string unit_text;
    YAML::Node unit_node, rule_node;
    bool has_requests = false, has_unit = false;
    Status s = ForEachEntry(
        value, [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          if (name == "unit") {
            Result<std::string> text = String(k, v);
            if (!text.ok()) return text.status();
            unit_text = *std::move(text);
            unit_node = v.IsNull() ? k : v;
            has_unit = true;
          } else if (name == "requests_per_unit") {
            Result<uint32_t> n = Uint32(k, v);
            if (!n.ok()) return n.status();
            rl.requests_per_unit = *n;
            has_requests = true;
          } else if (name == "unlimited") {
            Result<bool> b = Bool(k, v);
            if (!b.ok()) return b.status();
            rl.unlimited = *b;
          } else if (name == "name") {
            Result<std::string> text = String(k, v);
            if (!text.ok()) return text.status();
            rl.name = *std::move(text);
          } else if (name == "floodgate_rule") {
            Result<std::string> text = String(k, v);
            if (!text.ok()) return text.status();
            if (text->empty()) return FailAt(k, v, "'floodgate_rule' must name a rule", name);
            rl.floodgate_rule = *std::move(text);
            rule_node = k;
          } else if (name == "replaces") {
            return ParseReplaces(k, v, rl);
          } else {
            return Fail(k.Mark(),
                        "unknown key '" + name +
                            "' in rate_limit; expected unit, requests_per_unit, unlimited, name, "
                            "replaces or floodgate_rule",
                        name);
          }
          return Status::Ok();
        });
    if (!s.ok()) return s;
    const std::optional<Unit> unit = ParseUnit(unit_text);
    if (!rl.floodgate_rule.empty()) {
      if (unit || has_requests || rl.unlimited) {
        return Fail(rule_node.Mark(),
                    "a rate_limit with 'floodgate_rule' takes its limits from that rule: give "
                    "no unit, requests_per_unit or unlimited",
                    rl.floodgate_rule);
      }
    } else if (rl.unlimited) {
      if (unit) {
        return Fail(unit_node.Mark(), "should not specify rate limit unit when unlimited",
                    unit_text);
      }
    } else if (!unit) {
      return Fail(has_unit ? unit_node.Mark() : value.Mark(),
                  "invalid rate limit unit '" + unit_text +
                      "'; expected second, minute, hour, day, month or year",
                  unit_text);
    } else {
      rl.unit = *unit;
    }
    for (const std::string& replaced : rl.replaces) {
      if (replaced == rl.name) {
        return Fail(value.Mark(), "replaces should not contain name of same descriptor", replaced);
      }
    }
    return Status::Ok();
  }

  Status ParseReplaces(const YAML::Node& key, const YAML::Node& value, RateLimitSpec& rl) {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsSequence()) {
      return FailAt(key, value,
                    "'replaces' must be a list of {name: ...}, not " + std::string(TypeName(value)),
                    "replaces");
    }
    for (const YAML::Node& item : value) {
      if (!item.IsMap()) {
        return Fail(item.IsNull() ? key.Mark() : item.Mark(),
                    "each 'replaces' entry must be a map with a 'name'", "replaces");
      }
      std::string name;
      Status s = ForEachEntry(
          item, [&](const std::string& field, const YAML::Node& k, const YAML::Node& v) -> Status {
            if (field != "name") {
              return Fail(k.Mark(), "unknown key '" + field + "' in replaces; expected name",
                          field);
            }
            Result<std::string> text = String(k, v);
            if (!text.ok()) return text.status();
            name = *std::move(text);
            return Status::Ok();
          });
      if (!s.ok()) return s;
      if (name.empty()) return Fail(item.Mark(), "should not have an empty replaces entry", "");
      rl.replaces.push_back(std::move(name));
    }
    return Status::Ok();
  }

  const config::Fields& fields_;
  size_t count_ = 0;
};

// The trimmed source line at `mark`, for syntax errors.
std::string_view LineAt(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null() || mark.pos < 0) return {};
  const size_t pos = std::min(static_cast<size_t>(mark.pos), text.size());
  const size_t begin = pos == 0 ? 0 : text.rfind('\n', pos - 1);
  const size_t start = begin == std::string_view::npos || pos == 0 ? 0 : begin + 1;
  const size_t end = std::min(text.find('\n', pos), text.size());
  std::string_view line = text.substr(start, end - start);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
  return line;
}

Result<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return InvalidArgumentError(path +
                                ": cannot open envoy_ratelimit file: " + std::strerror(errno));
  }
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= kMaxEnvoyFileBytes) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return InvalidArgumentError(path + ": cannot read envoy_ratelimit file");
  return text;
}

bool IsYamlName(std::string_view name) {
  auto ends = [&](std::string_view s) {
    return name.size() > s.size() && name.substr(name.size() - s.size()) == s;
  };
  return name.front() != '.' && (ends(".yaml") || ends(".yml"));
}

// The files a configured path stands for: itself, or a directory's YAML files.
Result<std::vector<std::string>> Expand(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return InvalidArgumentError(path +
                                ": cannot open envoy_ratelimit file: " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{path};
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    return InvalidArgumentError(path +
                                ": cannot read envoy_ratelimit directory: " + std::strerror(errno));
  }
  std::vector<std::string> out;
  while (const dirent* e = readdir(dir)) {
    if (IsYamlName(e->d_name)) out.push_back(path + (path.back() == '/' ? "" : "/") + e->d_name);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

constexpr EnumName<Unit> kUnitNames[] = {{Unit::kSecond, "second"}, {Unit::kMinute, "minute"},
                                         {Unit::kHour, "hour"},     {Unit::kDay, "day"},
                                         {Unit::kMonth, "month"},   {Unit::kYear, "year"}};

std::string_view UnitName(Unit unit) { return ValueIn(kUnitNames, unit, "unknown"); }

Result<DomainConfig> ParseDomain(std::string_view yaml, std::string_view source) {
  const config::Fields fields(source);
  DomainParser parser(fields);
  if (yaml.size() > kMaxEnvoyFileBytes) {
    return parser.Fail(YAML::Mark(), "file is larger than 4 MiB", yaml.substr(0, 32));
  }
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    DomainConfig out;
    if (Status s = parser.ParseRoot(root, out); !s.ok()) return s;
    return out;
  } catch (const YAML::Exception& e) {
    return parser.Fail(e.mark, "YAML syntax error: " + e.msg, LineAt(yaml, e.mark));
  } catch (const std::exception& e) {
    return parser.Fail(YAML::Mark(), std::string("cannot read YAML: ") + e.what(), "");
  } catch (...) {
    return parser.Fail(YAML::Mark(), "cannot read YAML", "");
  }
}

Result<std::vector<DomainConfig>> LoadDomains(const EnvoyRateLimitConfig& config) {
  std::vector<DomainConfig> out;
  for (const std::string& configured : config.files) {
    Result<std::vector<std::string>> files = Expand(configured);
    if (!files.ok()) return files.status();
    for (const std::string& path : *files) {
      Result<std::string> text = ReadFile(path);
      if (!text.ok()) return text.status();
      Result<DomainConfig> domain = ParseDomain(*text, path);
      if (!domain.ok()) return domain.status();
      for (const DomainConfig& other : out) {
        if (other.domain == domain->domain) {
          return InvalidArgumentError(path + ": duplicate domain '" + domain->domain +
                                      "' (also in " + other.source + ")");
        }
      }
      out.push_back(*std::move(domain));
    }
  }
  return out;
}

}  // namespace floodgate::envoy
