// Alert events as they leave the service: the deterministic event id, the
// JSON body, and its signature.
//
// Every function here is thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/alerts.h"

namespace floodgate::service {

// 32 lowercase hex digits: the first 128 bits of SHA-256 over (rule, tier,
// key, limit index, threshold, window start), each field length-prefixed so
// that no two tuples share an encoding. Deterministic: two servers, or one
// server before and after a restart, name the same crossing alike, and a
// receiver deduplicates by it.
std::string AlertEventId(std::string_view rule, std::string_view tier, std::string_view key,
                         int limit_index, int threshold, int64_t window_start_ms);

// The event as a JSON object, fields in a fixed order:
// {"event_id","rule","key","tier" (null when none),"limit","limit_index",
//  "capacity","threshold","used","window_start","window_end","at"}; times
// in ms since the epoch. Keys are bytes: invalid UTF-8 becomes U+FFFD here
// (the event id is computed from the bytes themselves).
std::string AlertEventJson(const AlertEvent& event);

// The X-Floodgate-Signature value for `body`: "sha256=" and the hex
// HMAC-SHA256 of the body's exact bytes under `secret`.
std::string AlertSignature(std::string_view secret, std::string_view body);

}  // namespace floodgate::service
