// JSON text as JOSE reads it (a JWS header, a JWT's claims, a JWK Set):
// one JSON object, parsed without exceptions, bounded in depth, and
// refused when any object names a member twice.
//
// Why refuse duplicates: RFC 7515 section 5.2 and RFC 7519 section 4 let a
// reader either refuse them or keep the last; nlohmann's parser keeps the
// last. A service behind floodgate may read the same token keeping the
// first, so `{"sub":"ana","sub":"bob"}` would be limited as bob and served
// as ana. Refusing leaves no token two readers see differently.
// Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "floodgate/status.h"

namespace floodgate::service {

// Objects and arrays nest at most this deep (the outer object is depth 1).
inline constexpr size_t kMaxJsonDepth = 32;

// The JSON object `text` holds, or INVALID_ARGUMENT with one of these
// messages (nothing names the input: the caller says what it was):
//   "not JSON (syntax error at byte N)"   N counts from 1
//   "not JSON (it ends too early)"         empty, or cut before its end
//   "not a JSON object"                    valid JSON of another type
//   "names \"k\" twice"                    in any object, at any depth
//   "nested deeper than 32"
// Invalid UTF-8 inside a string is a syntax error; numbers too large for a
// double are too. Never throws.
Result<nlohmann::json> ParseJsonObject(std::string_view text);

}  // namespace floodgate::service
