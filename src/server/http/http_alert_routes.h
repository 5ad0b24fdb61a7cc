// Quota alerts over HTTP:
//   GET /v1/alerts/recent[?limit=N]
//     200 {"enabled":true|false,"events":[{<the event's JSON fields>,
//          "status":"pending|queued|delivered|dropped","attempts":N,
//          "last_error":"…"},…]}, newest first, at most N (default and
//          bound: alert_delivery.recent)
// 400 for a bad limit.
#pragma once

#include <string>
#include <string_view>

#include "floodgate/alerts.h"
#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"

namespace floodgate::server {

// One record as the route lists it: the event's own JSON with the delivery
// fields added at its end.
void AppendAlertRecordJson(const AlertRecord& r, std::string* out);

// GET|HEAD /v1/alerts/recent.
void AlertsRecentRoute(const RouteCall& c);

}  // namespace floodgate::server
