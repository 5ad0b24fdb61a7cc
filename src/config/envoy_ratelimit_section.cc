// The envoy_ratelimit section (envoy_ratelimit_section.h).
#include "config/envoy_ratelimit_section.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate::config {
namespace {

// One path or a list; relative paths are taken from the config file's
// directory, so a config and its Envoy files can move together.
Status ParseEnvoyFiles(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       EnvoyRateLimitConfig& envoy) {
  constexpr size_t kMaxFiles = 1024;
  auto add = [&](const YAML::Node& node) -> Status {
    if (!node.IsScalar() || node.Scalar().empty()) {
      return fields.FailAt(key, node, "each envoy_ratelimit file must be a path", key.Scalar());
    }
    if (envoy.files.size() == kMaxFiles) {
      return fields.Fail(node.Mark(), "envoy_ratelimit names more than 1024 files", node.Scalar());
    }
    std::string file = node.Scalar();
    const size_t slash = fields.source().rfind('/');
    if (file.front() != '/' && slash != std::string_view::npos) {
      file = std::string(fields.source().substr(0, slash + 1)) + file;
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

Status ParseEnvoyRateLimitEntry(const Fields& fields, const std::string& name,
                                const YAML::Node& key, const YAML::Node& value,
                                EnvoyRateLimitConfig& envoy) {
  const std::string path = "envoy_ratelimit." + name;
  if (name == "files") return ParseEnvoyFiles(fields, key, value, envoy);
  if (name == "algorithm") {
    Result<Algorithm> algorithm = fields.AlgorithmValue(key, value, path);
    if (!algorithm.ok()) return algorithm.status();
    envoy.algorithm = *algorithm;
  } else if (name == "on_backend_error") {
    Result<OnBackendError> on_error = fields.OnBackendErrorValue(key, value, path);
    if (!on_error.ok()) return on_error.status();
    envoy.on_backend_error = *on_error;
  } else if (name == "on_store_full") {
    Result<OnStoreFull> on_full = fields.OnStoreFullValue(key, value, path);
    if (!on_full.ok()) return on_full.status();
    envoy.on_store_full = *on_full;
  } else if (name == "response_headers") {
    Result<bool> b = fields.Bool(key, value, path);
    if (!b.ok()) return b.status();
    envoy.response_headers = *b;
  } else {
    return fields.Fail(key.Mark(),
                       "unknown key '" + name +
                           "' in envoy_ratelimit; expected files, algorithm, on_backend_error, "
                           "on_store_full or response_headers",
                       name);
  }
  return Status::Ok();
}

}  // namespace

// `envoy_ratelimit: [files]`, or a map with `files` and the options.
Status ParseEnvoyRateLimit(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           EnvoyRateLimitConfig& envoy) {
  if (value.IsNull()) return Status::Ok();
  if (value.IsScalar() || value.IsSequence()) return ParseEnvoyFiles(fields, key, value, envoy);
  if (!value.IsMap())
    return fields.WrongType(key, value, "envoy_ratelimit", "a list of files or a map");
  return fields.ForEachEntry(
      value, "key", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseEnvoyRateLimitEntry(fields, name, k, v, envoy);
      });
}

}  // namespace floodgate::config
