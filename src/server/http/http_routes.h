// The data plane's HTTP routes (the decision, health, metrics, rules) and
// what every route's handler shares: the asynchronous answer, problem+json
// errors, the decision's JSON and RateLimit fields. Which request reaches
// which handler is http_route_table.h's business.
#pragma once

#include <atomic>
#include <functional>

#include <optional>
#include <span>
#include <string>

#include "protocol/http/request_parser.h"
#include "protocol/http/response.h"
#include "server/context/answer.h"
#include "server/context/error_labels.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"
#include "server/net/reply_queue.h"
#include "server/net/session.h"

namespace floodgate::server {

// Where a response that completes later (a remote store) waits its turn,
// and how its completion finds the connection.
// Names a connection's requests held waiting (wait_ms) for
// LimiterCore::CancelWaits: an id taken the first time one waits. Not
// thread-safe: one session's.
struct WaitOwner {
  std::atomic<int64_t>& ids;  // ServiceContext::next_client_id
  uint64_t owner = 0;
  uint64_t Take() {
    if (owner == 0) owner = static_cast<uint64_t>(ids.fetch_add(1, std::memory_order_relaxed));
    return owner;
  }
};

struct HttpAsync {
  ReplyQueue* replies = nullptr;
  ConnectionRef self;
  WaitOwner* waits = nullptr;  // null: this session's requests never wait
  // Turns the connection into an event stream (GET /v1/admin/events): its
  // response so far is the stream's head, events follow until it closes,
  // and the session reads no further request. False (the stream refused:
  // too many open, or the session cannot stream): answer otherwise. Null:
  // the session cannot stream.
  std::function<bool()> start_stream = {};

  // Where this request's response goes, now (`out`) or later.
  ReplyTo To(std::string* out) const { return ReplyTo{replies, self, out}; }
};

// The data plane's handlers (rows of http_route_table.cc).
void CheckRoute(const RouteCall& c);    // GET|POST /v1/check
void HealthzRoute(const RouteCall& c);  // GET /healthz
void ReadyzRoute(const RouteCall& c);   // GET /readyz
void MetricsRoute(const RouteCall& c);  // GET /metrics
void RulesRoute(const RouteCall& c);    // GET /v1/rules

// The token of an "Authorization: Bearer <token>" header, or "" (none, or
// another scheme). The scheme is case-insensitive.
std::string_view BearerToken(const http::Request& req);

// A feature route's problem+json answer (RFC 9457), counted under `kind` in
// floodgate_errors_total (not counted when `kind` is empty).
void AppendRouteProblem(LoopContext& loop, bool keep_alive, int status, std::string_view kind,
                        std::string_view detail, std::string* out,
                        std::span<const http::HeaderField> headers = {});
// A failed `s` of operation `op`, answered and counted as error_labels.h
// says.
void AppendStatusProblem(LoopContext& loop, Operation op, bool keep_alive, const Status& s,
                         std::string* out);

// The value `text` of query parameter `name` as an integer in [min, max];
// otherwise nullopt, with *error "'name' must be an integer between min
// and max, not "text"".
std::optional<int64_t> IntParam(std::string_view name, std::string_view text, int64_t min,
                                int64_t max, std::string* error);

// Whole seconds, rounded up (Retry-After and the RateLimit fields); 0 for
// none.
int64_t CeilSeconds(int64_t ms);

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
