// Every HTTP route in one table, and the dispatch that finds a request's
// row. A row says who may call it (Access) and which handler answers; the
// handlers live with their features (http_routes.cc for the data plane,
// http_set_routes.cc, http_otp_routes.cc, http_alert_routes.cc,
// http_lease_routes.cc, http_ui_routes.cc, http_admin_routes.cc,
// http_visibility_routes.cc) and decide nothing about routing.
#include "server/http/http_route_table.h"

#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/http/http_admin_routes.h"
#include "server/http/http_alert_routes.h"
#include "server/http/http_lease_routes.h"
#include "server/http/http_otp_routes.h"
#include "server/http/http_reservation_routes.h"
#include "server/http/http_routes.h"
#include "server/http/http_set_routes.h"
#include "server/http/http_ui_routes.h"
#include "server/http/http_visibility_routes.h"

namespace floodgate::server {
namespace {

using enum Access;

// clang-format off
// The routes, in the order they are matched. /v1/check comes first: it is
// the hot one, and the match of a literal pattern stops at its first
// differing byte, so it is found before any other row is looked at.
constexpr HttpRoute kHttpRoutes[] = {
    // methods              pattern                                   access   handler
    // The decision: POST with a JSON body, or GET with query parameters
    // (nginx auth_request sends a GET). Consumes quota, so the data token.
    {kGet | kHead | kPost,  "/v1/check",                              kData,   CheckRoute,
     "GET, POST", "use POST with a JSON body, or GET with query parameters"},
    // Liveness and readiness: load balancers and orchestrators hold no token.
    {kGet | kHead,          "/healthz",                               kPublic, HealthzRoute, "GET"},
    {kGet | kHead,          "/readyz",                                kPublic, ReadyzRoute, "GET"},
    // Counters and the rules name subjects and limits: the data token.
    {kGet | kHead,          "/metrics",                               kData,   MetricsRoute, "GET"},
    {kGet | kHead,          "/v1/rules",                              kData,   RulesRoute, "GET"},
    // The expiring sets: one handler, the method says add, list or remove.
    {kGet | kHead | kPost | kDelete,
                            "/v1/sets/{key}",                         kData,   SetRoute,
     "GET, HEAD, POST, DELETE",
     "use POST to add a member, GET to list them (or ?member= to test one), DELETE ?member= to "
     "remove one"},
    {kPost,                 "/v1/otp/issue",                          kData,   OtpIssueRoute,
     "POST", "use POST with a JSON body"},
    {kPost,                 "/v1/otp/verify",                         kData,   OtpVerifyRoute,
     "POST", "use POST with a JSON body"},
    {kGet | kHead,          "/v1/alerts/recent",                      kData,   AlertsRecentRoute,
     "GET"},
    // Leases (algorithm: concurrency): acquiring one consumes quota as a check does.
    {kPost,                 "/v1/leases",                             kData,   LeaseAcquireRoute,
     "POST", "use POST with a JSON body"},
    {kDelete,               "/v1/leases/{rule}/{key}/{lease}",        kData,   LeaseReleaseRoute,
     "DELETE, PUT", "use DELETE to release the lease, PUT to renew it"},
    {kPut,                  "/v1/leases/{rule}/{key}/{lease}",        kData,   LeaseRenewRoute},
    // Reservations: reserving consumes quota as a check does.
    {kPost,                 "/v1/reservations",                       kData,   ReserveRoute,
     "POST", "use POST with a JSON body"},
    {kPost,                 "/v1/reservations/{rule}/{key}/{id}/settle",
                                                                      kData,   SettleRoute,
     "POST", "use POST with a JSON body {\"actual\":n}"},
    // The dashboard's files hold no data: what it shows comes from the
    // control plane's routes below, which check access themselves.
    {kGet | kHead,          "/ui",                                    kPublic, UiRootRoute,
     "GET, HEAD", "use GET"},
    {kGet | kHead,          "/ui/",                                   kPublic, UiFileRoute,
     "GET, HEAD", "use GET"},
    {kGet | kHead,          "/ui/{file}",                             kPublic, UiFileRoute,
     "GET, HEAD", "use GET"},
    // The control plane (docs/control-plane.md): reads for the read token,
    // changes for the admin token. No HEAD: their answers may come later,
    // past the session's cut of the body.
    {kGet,                  "/v1/admin/subjects/{rule}/{key}",        kRead,   SubjectStateRoute,
     "GET, DELETE"},
    {kDelete,               "/v1/admin/subjects/{rule}/{key}",        kAdmin,  SubjectResetRoute},
    {kPost,                 "/v1/admin/subjects/{rule}/{key}/refund", kAdmin,  SubjectRefundRoute,
     "POST"},
    {kGet,                  "/v1/admin/overrides",                    kRead,   OverrideListRoute,
     "GET"},
    {kGet,                  "/v1/admin/overrides/{rule}/{key}",       kRead,   OverrideGetRoute,
     "GET, PUT, DELETE"},
    {kPut,                  "/v1/admin/overrides/{rule}/{key}",       kAdmin,  OverridePutRoute},
    {kDelete,               "/v1/admin/overrides/{rule}/{key}",       kAdmin,  OverrideDeleteRoute},
    {kGet,                  "/v1/admin/blocks",                       kRead,   BlockListRoute,
     "GET"},
    {kGet,                  "/v1/admin/blocks/{key}",                 kRead,   BlocksOfRoute,
     "GET, PUT, DELETE"},
    {kPut,                  "/v1/admin/blocks/{key}",                 kAdmin,  BlockPutRoute},
    {kDelete,               "/v1/admin/blocks/{key}",                 kAdmin,  BlockDeleteRoute},
    // A network's blocks: three segments past /blocks, so never a {key}'s one.
    {kGet,                  "/v1/admin/blocks/cidr/{addr}/{len}",     kRead,   CidrBlocksRoute,
     "GET, PUT, DELETE"},
    {kPut,                  "/v1/admin/blocks/cidr/{addr}/{len}",     kAdmin,  CidrBlockPutRoute},
    {kDelete,               "/v1/admin/blocks/cidr/{addr}/{len}",     kAdmin,  CidrUnblockRoute},
    {kPut,                  "/v1/admin/rules/{name}",                 kAdmin,  RulePutRoute,
     "PUT, DELETE"},
    {kDelete,               "/v1/admin/rules/{name}",                 kAdmin,  RuleDeleteRoute},
    {kGet,                  "/v1/admin/log",                          kRead,   ChangeLogRoute,
     "GET"},
    // Visibility (docs/visibility.md): read from what the loops keep, so
    // they answer at once and HEAD works; the event stream is no HEAD's.
    {kGet | kHead,          "/v1/admin/top",                          kRead,   TopRoute, "GET"},
    {kGet | kHead,          "/v1/admin/stats",                        kRead,   StatsRoute, "GET"},
    {kGet,                  "/v1/admin/events",                       kRead,   EventsRoute, "GET"},
    // A replay touches nothing live, but it takes a thread for its time:
    // the admin token's, as the read token only looks.
    {kPost,                 "/v1/admin/simulate",                     kAdmin,  SimulateRoute,
     "POST"},
};

// What a path no row fits is told, by the first area whose prefix (whole
// segments) starts it: a pointer at the area's routes, after the area's
// access (so a client without it learns nothing of the routes there).
enum class ShowPath : uint8_t { kNo, kAsIs, kQuoted };
struct Miss {
  std::string_view prefix;
  Access access;
  std::string_view lead;
  ShowPath show;
  std::string_view tail = {};
};
constexpr Miss kMisses[] = {
    {"/v1/admin/subjects",  kRead, "subjects are /v1/admin/subjects/{rule}/{key} and "
                                   "/v1/admin/subjects/{rule}/{key}/refund", ShowPath::kNo},
    {"/v1/admin/overrides", kRead, "overrides are /v1/admin/overrides/{rule}/{key}", ShowPath::kNo},
    {"/v1/admin/blocks",    kRead, "blocks are /v1/admin/blocks/{key} and "
                                   "/v1/admin/blocks/cidr/{addr}/{len}", ShowPath::kNo},
    {"/v1/admin/rules",     kRead, "runtime rules are /v1/admin/rules/{name}", ShowPath::kNo},
    {"/v1/admin/top",       kRead, "no such route under /v1/admin/top", ShowPath::kNo},
    {"/v1/admin/stats",     kRead, "no such route under /v1/admin/stats", ShowPath::kNo},
    {"/v1/admin/events",    kRead, "no such route under /v1/admin/events", ShowPath::kNo},
    {"/v1/admin/simulate",  kRead, "no such route under /v1/admin/simulate", ShowPath::kNo},
    {"/v1/admin",           kRead, "no admin route for ", ShowPath::kAsIs,
     "; see /v1/admin/subjects, overrides, blocks, rules, log, top, stats, events and simulate"},
    {"/v1/leases",          kData, "no route for ", ShowPath::kAsIs,
     " (a lease is /v1/leases/{rule}/{key}/{lease}, each percent-encoded as one segment)"},
    {"/v1/reservations",    kData, "no route for ", ShowPath::kAsIs,
     " (a settle is POST /v1/reservations/{rule}/{key}/{reservation}/settle, each "
     "percent-encoded as one segment)"},
    {"/v1/sets",            kPublic, "no route for ", ShowPath::kAsIs,
     " (sets are /v1/sets/{key}, the key percent-encoded as one segment)"},
    {"/ui",                 kPublic, "no dashboard file ", ShowPath::kQuoted,
     "; the dashboard is /ui/"},
};
// clang-format on

void Problem(LoopContext& loop, const http::Request& req, int status, std::string_view detail,
             std::string* out, std::span<const http::HeaderField> headers = {}) {
  AppendRouteProblem(loop, req.keep_alive, status,
                     status == 401   ? "unauthorized"
                     : status == 403 ? "forbidden"
                     : status == 404 ? "not_found"
                     : status == 405 ? "method_not_allowed"
                                     : "bad_request",
                     detail, out, headers);
}

// The data plane's token, or the admin token (which opens the data plane
// too, as RESP's AUTH with it does; the read token does not: a check
// consumes quota).
bool DataAuthorized(const ServiceContext& service, const http::Request& req) {
  if (service.auth_token.empty()) return true;
  const std::string_view presented = BearerToken(req);
  if (presented.empty()) return false;
  return ConstantTimeEquals(presented, service.auth_token) ||
         (!service.admin_token.empty() && ConstantTimeEquals(presented, service.admin_token));
}

// Whether the client may call a route of `access`; when not, the 401 or
// 403 is answered. *admin is the control plane's access it showed.
bool Admit(LoopContext& loop, const http::Request& req, const HttpAsync& async, Access access,
           AdminAccess* admin, std::string* out) {
  const ServiceContext& service = loop.service();
  switch (access) {
    case kPublic:
      return true;
    case kData:
      if (DataAuthorized(service, req)) return true;
      {
        const http::HeaderField headers[] = {{"WWW-Authenticate", "Bearer"}};
        Problem(loop, req, 401, "a valid 'Authorization: Bearer <token>' header is required", out,
                headers);
      }
      return false;
    case kRead:
    case kAdmin:
      break;
  }
  const std::string_view token = BearerToken(req);
  if (const std::string why =
          PlaintextTokenRefusal(service, token, async.self.Peer(), async.self.Secure());
      !why.empty()) {
    Problem(loop, req, 403, why, out);
    return false;
  }
  *admin = AdminAccessOf(service, token, async.self.Peer(), async.self.ClientNames());
  if (*admin == AdminAccess::kNone) {
    if (service.admin_token.empty()) {
      Problem(loop, req, 403,
              "no admin token is set (admin.token_env): the admin API answers loopback clients "
              "only",
              out);
      return false;
    }
    const http::HeaderField headers[] = {{"WWW-Authenticate", "Bearer"}};
    Problem(loop, req, 401, "a valid 'Authorization: Bearer <admin token>' header is required", out,
            headers);
    return false;
  }
  if (access == kAdmin && *admin == AdminAccess::kRead) {
    Problem(loop, req, 403, "the read token cannot change anything; use the admin token", out);
    return false;
  }
  return true;
}

// The access a request no row answers (a 404 or a 405) needs first: its
// area's. In the control plane that is a read's for a GET and a change's
// otherwise, whatever the rows there are: the read token is not told what
// a write would have found.
Access AccessBeforeRefusal(Access area, const http::Request& req) {
  if (area != kRead && area != kAdmin) return area;
  return req.method == "GET" ? kRead : kAdmin;
}

bool UnderPrefix(std::string_view path, std::string_view prefix) {
  return path.starts_with(prefix) && (path.size() == prefix.size() || path[prefix.size()] == '/');
}

void NoRoute(LoopContext& loop, const http::Request& req, const HttpAsync& async,
             std::string_view path, std::string* out) {
  for (const Miss& m : kMisses) {
    if (!UnderPrefix(path, m.prefix)) continue;
    AdminAccess admin = AdminAccess::kNone;
    if (!Admit(loop, req, async, AccessBeforeRefusal(m.access, req), &admin, out)) return;
    std::string detail(m.lead);
    if (m.show == ShowPath::kAsIs) detail += path;
    if (m.show == ShowPath::kQuoted) detail += http::QuoteForDetail(path, 80);
    detail += m.tail;
    return Problem(loop, req, 404, detail, out);
  }
  Problem(loop, req, 404, "no route for " + std::string(path), out);
}

}  // namespace

std::span<const HttpRoute> HttpRoutes() { return kHttpRoutes; }

HttpMethods MethodBit(std::string_view method) {
  if (method == "GET") return kGet;
  if (method == "POST") return kPost;
  if (method == "HEAD") return kHead;
  if (method == "PUT") return kPut;
  if (method == "DELETE") return kDelete;
  return 0;
}

bool MatchRoutePattern(std::string_view pattern, std::string_view path, std::string_view* params,
                       size_t* num_params) {
  *num_params = 0;
  size_t i = 0, j = 0;
  while (i < pattern.size()) {
    if (pattern[i] == '{') {
      // One non-empty segment, up to the next '/' or the end.
      size_t end = path.find('/', j);
      if (end == std::string_view::npos) end = path.size();
      if (end == j || *num_params == kMaxRouteParams) return false;
      params[(*num_params)++] = path.substr(j, end - j);
      i = pattern.find('}', i) + 1;
      j = end;
      continue;
    }
    if (j == path.size() || pattern[i] != path[j]) return false;
    ++i;
    ++j;
  }
  return j == path.size();
}

void HandleHttp(LoopContext& loop, const http::Request& req, const HttpAsync& async,
                std::string* out) {
  const http::Target target = http::SplitTarget(req.target);
  const std::string_view path = target.path;
  const HttpMethods method = MethodBit(req.method);
  std::string_view raw[kMaxRouteParams];
  size_t num_params = 0;
  const HttpRoute* route = nullptr;  // the row for the path and the method
  const HttpRoute* first = nullptr;  // the path's first row: its 405 answer
  for (const HttpRoute& r : kHttpRoutes) {
    if (!MatchRoutePattern(r.pattern, path, raw, &num_params)) continue;
    if (first == nullptr) first = &r;
    if ((r.methods & method) != 0) {
      route = &r;
      break;
    }
  }
  AdminAccess admin = AdminAccess::kNone;
  if (route == nullptr) {
    if (first == nullptr) return NoRoute(loop, req, async, path, out);
    if (!Admit(loop, req, async, AccessBeforeRefusal(first->access, req), &admin, out)) return;
    const http::HeaderField allow[] = {{"Allow", first->allow}};
    return Problem(
        loop, req, 405,
        first->use.empty() ? "use " + std::string(first->allow) : std::string(first->use), out,
        allow);
  }
  if (!Admit(loop, req, async, route->access, &admin, out)) return;
  // Decoded after the access check: nothing of the path is read for a
  // client that may not call the route.
  std::string params[kMaxRouteParams];
  for (size_t i = 0; i < num_params; ++i) {
    if (!http::PercentDecode(raw[i], /*plus_as_space=*/false, &params[i])) {
      return Problem(loop, req, 400, "the path has an invalid percent-escape", out);
    }
  }
  route->handler(RouteCall{loop, req, path, target.query,
                           std::span<const std::string>(params, num_params), async, out, admin});
}

}  // namespace floodgate::server
