// The admin section of the config: which environment variables hold the
// control plane's tokens (`token_env` for reads and writes,
// `read_token_env` for reads only). The file names variables, never a
// token. Errors are worded as yaml_fields.h words them.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

Status ParseAdmin(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  AdminConfig& admin);

}  // namespace floodgate::config
