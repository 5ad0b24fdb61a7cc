// The expiring sets over HTTP, /v1/sets/{key} (the key percent-encoded as
// one path segment):
//   POST   {"member":"m","ttl_ms":60000}  add or refresh a member
//   GET                                   the live members with their TTLs
//   GET    ?member=m                      whether m is a live member
//   DELETE ?member=m                      remove m
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"

namespace floodgate::server {

// GET|HEAD|POST|DELETE /v1/sets/{key}: the set params[0] (decoded).
void SetRoute(const RouteCall& c);

}  // namespace floodgate::server
