// The typed readers of yaml_fields.h.
//
// Each reader checks the node's shape before its text, so a map where a
// number belongs says "not a map" rather than quoting nothing. Bounds are
// checked before the arithmetic they protect (a size's multiply, a
// duration's unit), so no value overflows on its way in.
#include "config/yaml_fields.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/enum_table.h"
#include "common/http_url.h"
#include "common/text.h"

namespace floodgate::config {
namespace {

bool IsEnvironmentVariableName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string Near(std::string_view text) { return text::QuoteForMessage(text, 64, '\''); }

constexpr EnumRow<YAML::NodeType::value, const char*> kTypeNames[] = {
    {YAML::NodeType::Null, "empty"},
    {YAML::NodeType::Scalar, "a string"},
    {YAML::NodeType::Sequence, "a list"},
    {YAML::NodeType::Map, "a map"}};

const char* TypeName(const YAML::Node& node) {
  return ValueIn(kTypeNames, node.Type(), "undefined");
}

// Checked before each multiply.
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

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

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

std::string Fields::Position(const YAML::Mark& mark) const {
  const int line = mark.is_null() ? 1 : mark.line + 1;
  const int column = mark.is_null() ? 1 : mark.column + 1;
  return std::string(source_) + ":" + std::to_string(line) + ":" + std::to_string(column);
}

Status Fields::Fail(const YAML::Mark& mark, std::string_view what, std::string_view near) const {
  return InvalidArgumentError(Position(mark) + ": " + std::string(what) + " (near " + Near(near) +
                              ")");
}

Status Fields::FailAt(const YAML::Node& key, const YAML::Node& value, std::string_view what,
                      std::string_view near) const {
  return Fail(value.IsNull() ? key.Mark() : value.Mark(), what, near);
}

Status Fields::WrongType(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                         std::string_view expected) const {
  return FailAt(
      key, value,
      "'" + std::string(field) + "' must be " + std::string(expected) + ", not " + TypeName(value),
      key.Scalar());
}

Status Fields::ForEachEntry(const YAML::Node& map, std::string_view noun, EntryFn f) const {
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
      return Fail(key.Mark(), "keys must be plain strings, not " + std::string(TypeName(key)), "");
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

Status Fields::ForEachInSection(const YAML::Node& key, const YAML::Node& value,
                                std::string_view field, EntryFn f) const {
  if (value.IsNull()) return Status::Ok();
  if (!value.IsMap()) return WrongType(key, value, field, "a map");
  return ForEachEntry(value, "key", f);
}

Result<std::string> Fields::String(const YAML::Node& key, const YAML::Node& value,
                                   std::string_view field) const {
  if (!value.IsScalar()) return WrongType(key, value, field, "a string");
  return value.Scalar();
}

Result<int64_t> Fields::Int(const YAML::Node& key, const YAML::Node& value, std::string_view field,
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

Result<bool> Fields::Bool(const YAML::Node& key, const YAML::Node& value,
                          std::string_view field) const {
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

Result<int64_t> Fields::Size(const YAML::Node& key, const YAML::Node& value, std::string_view field,
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
  if (found == nullptr || !n.has_value() || *n > max / found->factor || *n * found->factor < min) {
    return FailAt(key, value, what, text);
  }
  return *n * found->factor;
}

Result<int64_t> Fields::Duration(const YAML::Node& key, const YAML::Node& value,
                                 std::string_view field, int64_t min_ms, int64_t max_ms) const {
  if (!value.IsScalar()) return WrongType(key, value, field, "a duration like 5m");
  const std::string& text = value.Scalar();
  const std::string range = "'" + std::string(field) + "' must be from " + DurationText(min_ms) +
                            " to " + DurationText(max_ms);
  Result<Limit> as_period = ParseLimit("1/" + text);
  const size_t digits = text.find_first_not_of("0123456789");
  if (!as_period.ok() || digits == 0) {
    // A number and a unit whose product is out of ParseLimit's range (0s,
    // 100000d): the range is what is wrong, not the spelling.
    const bool spelled_right =
        digits != 0 && digits != std::string::npos && ParseLimit("1/1" + text.substr(digits)).ok();
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

Result<int64_t> Fields::DurationOrOff(const YAML::Node& key, const YAML::Node& value,
                                      std::string_view field, int64_t max_ms) const {
  if (value.IsScalar() && (value.Scalar() == "0" || value.Scalar() == "off")) return 0;
  return Duration(key, value, field, 1, max_ms);
}

Result<std::string> Fields::EnvironmentVariable(const YAML::Node& key, const YAML::Node& value,
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

Result<std::string> Fields::HttpUrl(const YAML::Node& key, const YAML::Node& value,
                                    std::string_view field) const {
  Result<std::string> url = String(key, value, field);
  if (!url.ok()) return url.status();
  if (Result<floodgate::HttpUrl> parsed = ParseHttpUrl(*url); !parsed.ok()) {
    return FailAt(key, value, "'" + std::string(field) + "': " + parsed.status().message(), *url);
  }
  return url;
}

Result<Algorithm> Fields::AlgorithmValue(const YAML::Node& key, const YAML::Node& value,
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

Result<bool> Fields::AllowOrDeny(const YAML::Node& key, const YAML::Node& value,
                                 std::string_view field) const {
  Result<std::string> text = String(key, value, field);
  if (!text.ok()) return text.status();
  if (*text == "allow") return true;
  if (*text == "deny") return false;
  return FailAt(key, value, "'" + std::string(field) + "' must be allow or deny", *text);
}

Result<OnBackendError> Fields::OnBackendErrorValue(const YAML::Node& key, const YAML::Node& value,
                                                   std::string_view field) const {
  Result<bool> allow = AllowOrDeny(key, value, field);
  if (!allow.ok()) return allow.status();
  return *allow ? OnBackendError::kAllow : OnBackendError::kDeny;
}

Result<OnStoreFull> Fields::OnStoreFullValue(const YAML::Node& key, const YAML::Node& value,
                                             std::string_view field) const {
  Result<bool> allow = AllowOrDeny(key, value, field);
  if (!allow.ok()) return allow.status();
  return *allow ? OnStoreFull::kAllow : OnStoreFull::kDeny;
}

}  // namespace floodgate::config
