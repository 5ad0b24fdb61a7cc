// The control plane over HTTP (docs/control-plane.md), every route under
// /v1/admin/:
//   GET    /v1/admin/subjects/{rule}/{key}[?tier=t]   a subject's state, no consumption
//   DELETE /v1/admin/subjects/{rule}/{key}            reset (every tier)
//   POST   /v1/admin/subjects/{rule}/{key}/refund     {"cost":n} -> the state after, "refunded"
//          per limit (units it gave back) and overall (the most any limit gave back)
//   PUT    /v1/admin/overrides/{rule}/{key}           {"limits":[...],"ttl_ms":N,"reason":"..."}
//   GET    /v1/admin/overrides[?rule=r], GET|DELETE /v1/admin/overrides/{rule}/{key}
//   PUT    /v1/admin/blocks/{key}                     {"ttl_ms":N,"rule":"r","reason":"..."}
//   GET    /v1/admin/blocks, GET /v1/admin/blocks/{key} (the key's blocks),
//   DELETE /v1/admin/blocks/{key}[?rule=r]
//   PUT    /v1/admin/blocks/cidr/{addr}/{len}        a network's block, the same body
//   GET|DELETE /v1/admin/blocks/cidr/{addr}/{len}[?rule=r]  (IPv4 or IPv6; host bits set: 400)
//   PUT|DELETE /v1/admin/rules/{name}                 (409 for a rule of the config file)
//   GET    /v1/admin/log[?limit=N]
// Access (http_route_table.cc, docs/control-plane.md "Access"): the
// reads need the read or the admin token, the changes the admin token;
// with no admin token set, loopback clients only. Errors are problem+json.
#pragma once

#include "server/http/http_route_table.h"

namespace floodgate::server {

void SubjectStateRoute(const RouteCall& c);    // GET    /v1/admin/subjects/{rule}/{key}
void SubjectResetRoute(const RouteCall& c);    // DELETE /v1/admin/subjects/{rule}/{key}
void SubjectRefundRoute(const RouteCall& c);   // POST   /v1/admin/subjects/{rule}/{key}/refund
void OverrideListRoute(const RouteCall& c);    // GET    /v1/admin/overrides
void OverrideGetRoute(const RouteCall& c);     // GET    /v1/admin/overrides/{rule}/{key}
void OverridePutRoute(const RouteCall& c);     // PUT    /v1/admin/overrides/{rule}/{key}
void OverrideDeleteRoute(const RouteCall& c);  // DELETE /v1/admin/overrides/{rule}/{key}
void BlockListRoute(const RouteCall& c);       // GET    /v1/admin/blocks
void BlocksOfRoute(const RouteCall& c);        // GET    /v1/admin/blocks/{key}
void BlockPutRoute(const RouteCall& c);        // PUT    /v1/admin/blocks/{key}
void BlockDeleteRoute(const RouteCall& c);     // DELETE /v1/admin/blocks/{key}
void CidrBlocksRoute(const RouteCall& c);      // GET    /v1/admin/blocks/cidr/{addr}/{len}
void CidrBlockPutRoute(const RouteCall& c);    // PUT    /v1/admin/blocks/cidr/{addr}/{len}
void CidrUnblockRoute(const RouteCall& c);     // DELETE /v1/admin/blocks/cidr/{addr}/{len}
void RulePutRoute(const RouteCall& c);         // PUT    /v1/admin/rules/{name}
void RuleDeleteRoute(const RouteCall& c);      // DELETE /v1/admin/rules/{name}
void ChangeLogRoute(const RouteCall& c);       // GET    /v1/admin/log

}  // namespace floodgate::server
