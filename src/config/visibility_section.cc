// The visibility section: `visibility` (visibility_section.h).
#include "config/visibility_section.h"

#include <cstdint>
#include <string>

namespace floodgate::config {
namespace {

Status ParseVisibilityEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                            const YAML::Node& value, VisibilityConfig& visibility) {
  const std::string path = "visibility." + name;
  if (name == "top_subjects") {
    Result<bool> on = fields.Bool(key, value, path);
    if (!on.ok()) return on.status();
    visibility.top_subjects = *on;
    return Status::Ok();
  }
  if (name == "top_capacity") {
    Result<int64_t> n = fields.Int(key, value, path, 10, kMaxTopCapacity);
    if (!n.ok()) return n.status();
    visibility.top_capacity = *n;
    return Status::Ok();
  }
  if (name == "denied_log_interval") {
    Result<int64_t> ms = fields.DurationOrOff(key, value, path, 24LL * 3'600'000);
    if (!ms.ok()) return ms.status();
    visibility.denied_log_interval_ms = *ms;
    return Status::Ok();
  }
  if (name == "publish_interval") {
    Result<int64_t> ms = fields.Duration(key, value, path, 100, 600'000);
    if (!ms.ok()) return ms.status();
    visibility.publish_interval_ms = *ms;
    return Status::Ok();
  }
  return fields.Fail(key.Mark(),
                     "unknown key '" + name +
                         "' in visibility; expected top_subjects, top_capacity, "
                         "denied_log_interval or publish_interval",
                     name);
}

}  // namespace

Status ParseVisibility(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       VisibilityConfig& visibility) {
  return fields.ForEachInSection(
      key, value, "visibility",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseVisibilityEntry(fields, name, k, v, visibility);
      });
}

}  // namespace floodgate::config
