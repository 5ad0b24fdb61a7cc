// Words the config parsers (config.cc, envoy_ratelimit.cc) use in their
// file:line:column errors, so both read alike.
#pragma once

#include <string>
#include <string_view>

#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// A value quoted for an error's "(near '...')", cut at 64 bytes.
std::string Near(std::string_view text);

// What a node is, for "must be a map, not a list": "empty", "a string",
// "a list", "a map".
const char* TypeName(const YAML::Node& node);

}  // namespace floodgate::config
