// The envoy_ratelimit section of the config: which envoyproxy/ratelimit
// files the gRPC front serves (a path or a list, or a map with `files`) and
// the options they share (`algorithm`, `on_backend_error`, `on_store_full`,
// `response_headers`). Only the section: the files themselves are read by
// envoy_ratelimit.h. Errors are worded as yaml_fields.h words them.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// A relative path is taken from the config file's directory (the
// directory of fields.source()), so a config and its Envoy files can move
// together.
Status ParseEnvoyRateLimit(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           EnvoyRateLimitConfig& envoy);

}  // namespace floodgate::config
