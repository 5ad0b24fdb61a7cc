// The leases' HTTP routes (algorithm: concurrency):
//   POST   /v1/leases {"rule","key","tier"?,"ttl_ms"?,"wait_ms"?}
//          -> 200 {"rule","key","lease","in_flight","limit","expires_in_ms"}
//          -> 429 {"rule","key","acquired":false,"in_flight","limit","retry_after_ms"}
//             with Retry-After (and "blocked"/"reason" for a blocked subject)
//   DELETE /v1/leases/{rule}/{key}/{lease}  -> 204 released, 404 unknown or expired
//   PUT    /v1/leases/{rule}/{key}/{lease}  {"ttl_ms"?} (body optional)
//          -> 200 {"rule","key","lease","expires_in_ms"}, 404 unknown or expired
// Path segments are percent-decoded.
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"

namespace floodgate::server {

// POST /v1/leases, DELETE and PUT /v1/leases/{rule}/{key}/{lease}.
void LeaseAcquireRoute(const RouteCall& c);
void LeaseReleaseRoute(const RouteCall& c);
void LeaseRenewRoute(const RouteCall& c);

}  // namespace floodgate::server
