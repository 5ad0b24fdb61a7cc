// envoyproxy/ratelimit's configuration files, read as they are: a `domain`
// and a tree of `descriptors` (key, optional value, `rate_limit`,
// `shadow_mode`, `detailed_metric`, nested `descriptors`).
//
// This is the files' shape only; matching requests against it is
// service/envoy/envoy_rules.h, answering them server/grpc/rls_service.h. One floodgate
// addition: a `rate_limit` may name a floodgate rule (`floodgate_rule: api`)
// instead of giving `unit` and `requests_per_unit`, for floodgate's other
// algorithms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/envoy_unit.h"
#include "floodgate/config.h"
#include "floodgate/status.h"

namespace floodgate::envoy {

// Envoy's RateLimitResponse.RateLimit.Unit, with its wire numbers.
using Unit = EnvoyUnit;

// "second", "minute", ... (lower case), "unknown" for kUnknown.
std::string_view UnitName(Unit unit);

struct RateLimitSpec {
  bool unlimited = false;
  Unit unit = Unit::kUnknown;
  uint32_t requests_per_unit = 0;  // 0: every request is over the limit
  std::string name;                // for `replaces`
  std::vector<std::string> replaces;
  std::string floodgate_rule;  // set: the named floodgate rule decides instead
  std::string position;        // "file:line:column" of the block, for messages
};

struct DescriptorConfig {
  std::string key;
  // Empty: any value. Ending in '*': any value starting with what precedes it.
  std::string value;
  bool has_rate_limit = false;
  RateLimitSpec rate_limit;
  bool shadow_mode = false;
  bool detailed_metric = false;
  std::vector<DescriptorConfig> descriptors;
  std::string position;  // "file:line:column" of the entry
};

struct DomainConfig {
  std::string domain;
  std::string source;  // the file it came from
  std::vector<DescriptorConfig> descriptors;
};

// Bounds on one file: beyond them it is refused, so a hostile or mistaken
// file (or YAML aliases multiplying one list) cannot take the server's memory.
inline constexpr int kMaxDescriptorDepth = 32;
inline constexpr size_t kMaxDescriptorsPerFile = 100'000;
inline constexpr size_t kMaxEnvoyFileBytes = size_t{4} << 20;

// Parses one file's text. Errors read "source:line:column: what (near 'text')",
// like floodgate's own config. Keys envoyproxy/ratelimit does not know are
// refused, as it refuses them.
Result<DomainConfig> ParseDomain(std::string_view yaml, std::string_view source);

// Reads every file of `config` (directories: their *.yaml and *.yml files,
// sorted by name). A domain defined twice is an error, as in
// envoyproxy/ratelimit without MERGE_DOMAIN_CONFIG.
Result<std::vector<DomainConfig>> LoadDomains(const EnvoyRateLimitConfig& config);

}  // namespace floodgate::envoy
