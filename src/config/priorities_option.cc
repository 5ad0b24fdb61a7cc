// A rule's `priorities` option (priorities_option.h).
#include "config/priorities_option.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate::config {
namespace {

// "40%" or "40": a whole percentage; nullopt when malformed.
std::optional<int> ParseWholePercent(std::string_view text) {
  if (!text.empty() && text.back() == '%') text.remove_suffix(1);
  if (text.empty() || text.size() > 3) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

Status ParseRulePriorities(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           const std::string& path, std::vector<PriorityClass>* classes) {
  if (!value.IsMap()) {
    return fields.WrongType(key, value, path,
                            "a map of class name to the share kept back, like { batch: 40% }");
  }
  std::vector<PriorityClass> parsed;
  Status s = fields.ForEachEntry(
      value, "class",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        const std::string field = path + "." + name;
        if (!IsValidName(name)) {
          return fields.Fail(k.Mark(),
                             "priority class names are 1 to 64 characters of A-Z, a-z, 0-9, "
                             "'_', '.', ':' or '-'",
                             name);
        }
        if (parsed.size() == static_cast<size_t>(kMaxPriorityClasses)) {
          return fields.Fail(k.Mark(),
                             "'" + path + "' has too many classes (at most " +
                                 std::to_string(kMaxPriorityClasses) + ")",
                             name);
        }
        const std::optional<int> pct = v.IsScalar() ? ParseWholePercent(v.Scalar()) : std::nullopt;
        if (!pct.has_value() || *pct > 99) {
          return fields.FailAt(k, v,
                               "'" + field +
                                   "' must be the share of the limit kept back from the class, "
                                   "a whole percentage from 0% to 99%",
                               v.IsScalar() ? v.Scalar() : name);
        }
        parsed.push_back({name, *pct});
        return Status::Ok();
      });
  if (!s.ok()) return s;
  if (parsed.empty()) {
    return fields.FailAt(key, value, "'" + path + "' names no class", key.Scalar());
  }
  *classes = std::move(parsed);
  return Status::Ok();
}

}  // namespace floodgate::config
