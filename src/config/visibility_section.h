// The visibility section of the config: who is being limited, as
// docs/visibility.md shows it: the top-subjects sketch (`top_subjects`,
// `top_capacity`), the sampled msg=denied log (`denied_log_interval`) and
// how often a server shares its sketches on a Redis store
// (`publish_interval`). Errors are worded as yaml_fields.h words them.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

Status ParseVisibility(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       VisibilityConfig& visibility);

}  // namespace floodgate::config
