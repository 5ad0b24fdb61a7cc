// The reservations' HTTP routes (docs/reservations.md):
//   POST /v1/reservations {"rule","key","estimate","ttl_ms"?,"tier"?,"priority"?}
//        -> 200 the check's body (as /v1/check's, with its RateLimit fields)
//               and "reservation" (null when the estimate was admitted
//               without being counted: a fallback, a shadow rule's denial),
//               "estimate", "ttl_ms"
//        -> 429 the check's body with Retry-After, "reservation":null
//   POST /v1/reservations/{rule}/{key}/{reservation}/settle {"actual":n}
//        -> 200 {"rule","key","reservation","estimate","actual","charged",
//                "remaining","debt"}   (remaining below 0: debt > 0)
//        -> 404 unknown, another key's or past its TTL; 409 settled already
// Path segments are percent-decoded.
#pragma once

#include "server/http/http_route_table.h"

namespace floodgate::server {

void ReserveRoute(const RouteCall& c);
void SettleRoute(const RouteCall& c);

}  // namespace floodgate::server
