// Envoy's RateLimitService messages as plain structs: what a
// ShouldRateLimit request asks and what its answer says, without protobuf.
// The codec (rls_codec.h) converts them from and to the wire messages; the
// server decides them (server/grpc/rls_service.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/descriptor_entry.h"
#include "common/envoy_unit.h"

namespace floodgate::rls {

// --- The request: views into the wire message, which must outlive it ---

struct RequestDescriptor {
  std::vector<DescriptorEntry> entries;
  // Units this descriptor consumes; unset: the request's. 0: check only.
  std::optional<uint64_t> hits_addend;
};
struct Request {
  std::string_view domain;
  std::vector<RequestDescriptor> descriptors;
  uint32_t hits_addend = 0;  // 0: 1
};

// --- The answer ---

// RateLimitResponse.Code and RateLimitResponse.RateLimit.Unit, with their
// wire numbers.
enum class Code { kUnknown = 0, kOk = 1, kOverLimit = 2 };
using Unit = EnvoyUnit;

struct CurrentLimit {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  std::string name;
};
struct DescriptorStatus {
  Code code = Code::kOk;
  bool has_limit = false;  // false: no current_limit in the answer
  CurrentLimit current_limit;
  uint32_t limit_remaining = 0;
  int64_t duration_until_reset_ms = -1;  // -1: not given
};
struct Header {
  std::string key;
  std::string value;
};
struct Response {
  Code overall_code = Code::kOk;
  std::vector<DescriptorStatus> statuses;  // one per request descriptor, in order
  std::vector<Header> response_headers;
};

}  // namespace floodgate::rls
