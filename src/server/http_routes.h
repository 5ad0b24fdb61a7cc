// HTTP routes: one function per endpoint, from a parsed request to a response.
#pragma once

#include <string>

#include "protocol/http/request_parser.h"
#include "server/service_context.h"

namespace floodgate::server {

// Answers `req`, appending the whole response to `out`.
void HandleHttp(LoopContext& loop, const http::Request& req, std::string* out);

// The decision as JSON, and the RateLimit-Policy / RateLimit header fields
// (IETF draft-ietf-httpapi-ratelimit-headers), for one rule.
void AppendDecisionJson(std::string& out, std::string_view rule, std::string_view key,
                        const Decision& d);
// The values of the RateLimit-Policy and RateLimit fields; policies are
// named after the rule ("api"), or "api:0", "api:1", … when the rule has
// several limits.
void AppendRateLimitFields(std::string& policy, std::string& state, std::string_view rule,
                           const Decision& d);

}  // namespace floodgate::server
