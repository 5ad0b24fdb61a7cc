// A rule's `priorities` option (docs/reservations.md#priorities):
// `{ critical: 0%, default: 20%, batch: 40% }`, the share of each limit a
// class may not use. Whether the rule can have them (not with slices, not a
// concurrency rule) is checked once the whole rule is read
// (rules_section.cc), since those keys may come after it.
#pragma once

#include <string>
#include <vector>

#include "config/yaml_fields.h"
#include "floodgate/rule.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// Reads `value` into *classes; `path` is its dotted name
// ("rules.api.priorities"). Class names are identifiers (as tier names),
// at most kMaxPriorityClasses; a share is a whole percentage from 0 to 99,
// written 40% or 40 (100 % would admit nothing of the class ever).
Status ParseRulePriorities(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           const std::string& path, std::vector<PriorityClass>* classes);

}  // namespace floodgate::config
