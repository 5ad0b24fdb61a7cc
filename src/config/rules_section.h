// The rules section of the config: each rule's algorithm, limits, burst,
// tiers, time zone, shadow mode, fallbacks (on_backend_error,
// on_store_full), alerts (alerts_section.h), block_for and max_waiters, and
// a concurrency rule's max_in_flight and lease_ttl. Beyond the shape of
// each field it checks what needs the whole rule: burst against the
// algorithm and the limits, and each limit's bounds for its algorithm.
// Errors are worded as yaml_fields.h words them.
#pragma once

#include <vector>

#include "config/yaml_fields.h"
#include "floodgate/rule.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// Appends the section's rules to `rules` in file order; names are unique.
Status ParseRules(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::vector<Rule>& rules);

}  // namespace floodgate::config
