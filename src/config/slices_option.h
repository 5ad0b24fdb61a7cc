// A rule's `slices` option (docs/slices.md): `{ max_share: 5%, idle_return: 2s }`,
// either key optional (`slices: {}` takes both defaults). Whether the rule's
// algorithm can be sliced is checked once the whole rule is read
// (rules_section.cc), since `algorithm` may come after it.
#pragma once

#include <string>

#include "config/yaml_fields.h"
#include "floodgate/rule.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// Reads `value` into *slices; `path` is its dotted name ("rules.api.slices").
// max_share is a percentage in (0, 100] with up to four decimals ("5%",
// "0.5%"), idle_return a duration from 1ms to a day.
Status ParseRuleSlices(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& path, SliceConfig* slices);

}  // namespace floodgate::config
