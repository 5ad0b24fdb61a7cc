// Who is being limited, over HTTP (docs/visibility.md), under /v1/admin/
// and so behind the admin access (server/context/admin_access.h):
//   GET  /v1/admin/top?rule=r[&by=denied|admitted][&window=1m|15m|1h][&limit=N]
//        {"rule","by","window","servers":N,"subjects":[{"key","count","error"}]}
//   GET  /v1/admin/stats     per rule per second over 15 minutes, alerts, store, connections
//   GET  /v1/admin/events    text/event-stream: "stats" once a second, "alert" as emitted
//   POST /v1/admin/simulate?rule=r[&tier=t]   body: a traffic log (api/simulation.h)
// Errors are problem+json: 400 for a bad parameter, 404 for an unknown rule
// (or the sketch turned off), 413 for a log over the bound, 503 when
// kMaxEventStreams streams are open or a simulation is running.
#pragma once

#include <string_view>

#include "server/http/http_route_table.h"

namespace floodgate::server {

inline constexpr std::string_view kSimulatePath = "/v1/admin/simulate";

// The routes (access already checked: GETs read, the POST writes). Each
// answers 404 when this server keeps no visibility data.
void TopRoute(const RouteCall& c);       // GET|HEAD /v1/admin/top
void StatsRoute(const RouteCall& c);     // GET|HEAD /v1/admin/stats
void EventsRoute(const RouteCall& c);    // GET      /v1/admin/events
void SimulateRoute(const RouteCall& c);  // POST     /v1/admin/simulate

}  // namespace floodgate::server
