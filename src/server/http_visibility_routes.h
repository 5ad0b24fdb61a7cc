// Who is being limited, over HTTP (docs/visibility.md), under /v1/admin/
// and so behind the admin access (server/admin_access.h):
//   GET  /v1/admin/top?rule=r[&by=denied|admitted][&window=1m|15m|1h][&limit=N]
//        {"rule","by","window","servers":N,"subjects":[{"key","count","error"}]}
//   GET  /v1/admin/stats     per rule per second over 15 minutes, alerts, store, connections
//   GET  /v1/admin/events    text/event-stream: "stats" once a second, "alert" as emitted
//   POST /v1/admin/simulate?rule=r[&tier=t]   body: a traffic log (api/simulation.h)
// Errors are problem+json: 400 for a bad parameter, 404 for an unknown rule
// (or the sketch turned off), 413 for a log over the bound, 503 when
// kMaxEventStreams streams are open or a simulation is running.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/http/request_parser.h"
#include "server/http_routes.h"
#include "server/service_context.h"

namespace floodgate::server {

inline constexpr std::string_view kSimulatePath = "/v1/admin/simulate";

// Whether `what` (the segment after /v1/admin/) names one of these routes.
bool IsVisibilityRoute(std::string_view what);

// Answers one (access already checked: GETs read, the POST writes).
void HandleVisibilityRequest(LoopContext& loop, const http::Request& req,
                             const std::vector<std::string>& segments, std::string_view query,
                             const HttpAsync& async, std::string* out);

}  // namespace floodgate::server
