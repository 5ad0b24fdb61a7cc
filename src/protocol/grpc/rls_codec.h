// Envoy's RateLimitService messages (proto/envoy/...) to and from their
// plain structs (rls_messages.h). Wire format only: bounds on what a request
// may hold are checked here, decisions are not.
#pragma once

#include <cstddef>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "floodgate/status.h"
#include "protocol/grpc/rls_messages.h"

namespace floodgate::rls {

namespace pb = ::envoy::service::ratelimit::v3;

// Past these a request is refused with INVALID_ARGUMENT. Envoy sends a few
// descriptors of a few short entries; the bounds leave room for long header
// values (paths, tokens) while keeping one request's work small.
struct RequestLimits {
  size_t max_domain_bytes = 256;
  size_t max_descriptors = 64;
  size_t max_entries = 32;           // per descriptor
  size_t max_entry_bytes = 8 << 10;  // key or value
};

// Fills `out` with views into `in`, which must outlive `out`. `out` may be
// one filled before: its vectors are reused.
Status ToRequest(const pb::RateLimitRequest& in, const RequestLimits& limits, Request* out);

// Appends `in` to `out` (an empty message, or one Clear()ed).
void ToProto(const Response& in, pb::RateLimitResponse* out);

}  // namespace floodgate::rls
