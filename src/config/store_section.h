// The store sections of the config: which store decides (`store`: memory or
// a Redis URL), the embedded store's bounds (`engine`) and the Redis
// client's options (`redis`). Each reads its section's value into its part
// of the Config and returns the first error, worded as yaml_fields.h words
// them.
#pragma once

#include <string>

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// `store: memory` or a redis:// URL of any kind (common/store_url.h).
Status ParseStore(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::string& store);
Status ParseEngine(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   EngineConfig& engine);
Status ParseRedis(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  RedisConfig& redis);

}  // namespace floodgate::config
