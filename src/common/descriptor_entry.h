// DescriptorEntry: one (key, value) pair of an Envoy rate limit descriptor,
// as views into the message that carried it. Plain data, shared by the gRPC
// codec (protocol/grpc), which fills it, and the Envoy rules
// (service/envoy/envoy_rules.h), which match it, so that neither knows the other.
#pragma once

#include <string_view>

namespace floodgate {

struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

}  // namespace floodgate
