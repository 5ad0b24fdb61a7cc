// The control plane over HTTP (docs/control-plane.md), every route under
// /v1/admin/:
//   GET    /v1/admin/subjects/{rule}/{key}[?tier=t]   a subject's state, no consumption
//   DELETE /v1/admin/subjects/{rule}/{key}            reset (every tier)
//   POST   /v1/admin/subjects/{rule}/{key}/refund     {"cost":n} -> the state after, "refunded"
//          per limit (units it gave back) and overall (the most any limit gave back)
//   PUT    /v1/admin/overrides/{rule}/{key}           {"limits":[...],"ttl_ms":N,"reason":"..."}
//   GET    /v1/admin/overrides[?rule=r], GET|DELETE /v1/admin/overrides/{rule}/{key}
//   PUT    /v1/admin/blocks/{key}                     {"ttl_ms":N,"rule":"r","reason":"..."}
//   GET    /v1/admin/blocks, DELETE /v1/admin/blocks/{key}[?rule=r]
//   PUT|DELETE /v1/admin/rules/{name}                 (409 for a rule of the config file)
//   GET    /v1/admin/log[?limit=N]
// With an admin token set every route needs "Authorization: Bearer
// <token>" (401; 403 for the read token on a write); with none, loopback
// clients only (403 for others). Errors are problem+json.
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/http_routes.h"
#include "server/service_context.h"

namespace floodgate::server {

bool IsAdminPath(std::string_view path);

void HandleAdminRequest(LoopContext& loop, const http::Request& req, std::string_view path,
                        std::string_view query, const HttpAsync& async, std::string* out);

}  // namespace floodgate::server
