// ParseRuleSlices: see slices_option.h.
#include "config/slices_option.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace floodgate::config {
namespace {

// "5%", "12.5%", "0.0001%" in parts per million; nullopt when malformed
// (no '%', no digits, more than four decimals).
std::optional<int64_t> ParsePercentPpm(std::string_view text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  text.remove_suffix(1);
  int64_t whole = 0, fraction = 0;
  int whole_digits = 0, fraction_digits = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (++whole_digits > 4) return std::nullopt;  // past 9999 %
    whole = whole * 10 + (text[i] - '0');
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (++fraction_digits > 4) return std::nullopt;
      fraction = fraction * 10 + (text[i] - '0');
    }
    if (fraction_digits == 0) return std::nullopt;
  }
  if (i != text.size() || whole_digits == 0) return std::nullopt;
  for (int d = fraction_digits; d < 4; ++d) fraction *= 10;
  return whole * 10'000 + fraction;  // 1 % = 10,000 ppm
}

}  // namespace

Status ParseRuleSlices(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& path, SliceConfig* slices) {
  SliceConfig parsed;
  parsed.max_share_ppm = kDefaultSliceSharePpm;
  Status s = fields.ForEachInSection(
      key, value, path,
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        const std::string field = path + "." + name;
        if (name == "max_share") {
          const std::optional<int64_t> ppm =
              v.IsScalar() ? ParsePercentPpm(v.Scalar()) : std::nullopt;
          if (!ppm.has_value()) {
            return fields.FailAt(k, v,
                                 "'" + field +
                                     "' must be a percentage of the limit like 5% (at most four "
                                     "decimals)",
                                 v.IsScalar() ? v.Scalar() : name);
          }
          if (*ppm <= 0 || *ppm > kSliceShareScale) {
            return fields.FailAt(
                k, v, "'" + field + "' must be more than 0% and at most 100% of the limit",
                v.Scalar());
          }
          parsed.max_share_ppm = *ppm;
          return Status::Ok();
        }
        if (name == "idle_return") {
          Result<int64_t> ms = fields.Duration(k, v, field, 1, kDayMs);
          if (!ms.ok()) return ms.status();
          parsed.idle_return_ms = *ms;
          return Status::Ok();
        }
        return fields.Fail(
            k.Mark(),
            "unknown key '" + name + "' in " + path + "; expected max_share or idle_return", name);
      });
  if (!s.ok()) return s;
  *slices = parsed;
  return Status::Ok();
}

}  // namespace floodgate::config
