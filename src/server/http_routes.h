// HTTP routes: one function per endpoint, from a parsed request to a response.
#pragma once

#include <string>

#include "protocol/http/request_parser.h"
#include "server/answer.h"
#include "server/reply_queue.h"
#include "server/service_context.h"
#include "server/session.h"

namespace floodgate::server {

// Where a response that completes later (a remote store) waits its turn,
// and how its completion finds the connection.
struct HttpAsync {
  ReplyQueue* replies = nullptr;
  ConnectionRef self;

  // Where this request's response goes, now (`out`) or later.
  ReplyTo To(std::string* out) const { return ReplyTo{replies, self, out}; }
};

// Answers `req`, appending the whole response to `out`, or reserving its
// place in `async.replies` and completing it later.
void HandleHttp(LoopContext& loop, const http::Request& req, const HttpAsync& async,
                std::string* out);

// Cuts a response appended at `start` to its header (HEAD: same header
// fields as GET, Content-Length included, no body).
void StripBody(std::string* response, size_t start);

// The decision as JSON, and the RateLimit-Policy / RateLimit header fields
// (IETF draft-ietf-httpapi-ratelimit-headers), for one rule. A fallback
// decision (Decision::fallback) has a "fallback" member naming the reason,
// and null for the figures it does not know (remaining, reset_after_ms).
void AppendDecisionJson(std::string& out, std::string_view rule, std::string_view key,
                        const Decision& d);
// The values of the RateLimit-Policy and RateLimit fields; policies are
// named after the rule ("api"), or "api:0", "api:1", … when the rule has
// several limits. The /v1/check response leaves RateLimit out for a
// fallback decision (its figures are not known).
void AppendRateLimitFields(std::string& policy, std::string& state, std::string_view rule,
                           const Decision& d);

}  // namespace floodgate::server
