// The HTTP route table: every route floodgate answers, one row each, with
// its methods, path pattern, access level and handler; and HandleHttp, the
// one place a request is matched to a row. The rows themselves are in
// http_route_table.cc; the handlers stay in their features' files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/context/admin_access.h"
#include "server/context/service_context.h"

namespace floodgate::server {

struct HttpAsync;  // http_routes.h

// Who may call a route. Each level names the credential that opens it.
enum class Access : uint8_t {
  // Anyone: liveness, readiness and the dashboard's files (they hold no data).
  kPublic,
  // The data plane: with server.auth_token_env set, its token or the admin
  // token (an operator's session needs both); never the read token (a check
  // consumes quota). 401 without.
  kData,
  // The control plane's reads: the read token or the admin token; with no
  // admin token set, loopback clients only (403 for others). 401 without.
  kRead,
  // The control plane's writes: the admin token; with no admin token set,
  // loopback clients only. The read token gets 403.
  kAdmin,
};

// The methods a row answers, a set of bits. HEAD is named where it is
// answered: the session cuts the body, so a route whose answer may come
// later (past that cut) leaves it out.
using HttpMethods = uint8_t;
inline constexpr HttpMethods kGet = 1 << 0;
inline constexpr HttpMethods kHead = 1 << 1;
inline constexpr HttpMethods kPost = 1 << 2;
inline constexpr HttpMethods kPut = 1 << 3;
inline constexpr HttpMethods kDelete = 1 << 4;

// The method bit of a request's method; 0 for any other method.
HttpMethods MethodBit(std::string_view method);

// The most {named} segments a pattern has (a lease: rule, key, lease).
inline constexpr size_t kMaxRouteParams = 3;

// What a route's handler is given.
struct RouteCall {
  LoopContext& loop;
  const http::Request& req;
  std::string_view path;   // as sent: percent-encoded, without the query
  std::string_view query;  // as sent
  // The pattern's {named} segments, in order, each percent-decoded.
  std::span<const std::string> params;
  const HttpAsync& async;
  std::string* out;
  // kRead and kAdmin rows: the access the client showed (for the change
  // log's "who"). kNone on other rows.
  AdminAccess admin = AdminAccess::kNone;
};

// One route. `pattern` is a path whose "{name}" segments each stand for
// one non-empty segment (percent-decoded for the handler). Several rows
// may share a pattern with different methods and access; the first of
// them carries the 405 answer for the pattern: the Allow field, and the
// detail ("" : "use " followed by the Allow field).
struct HttpRoute {
  HttpMethods methods;
  std::string_view pattern;
  Access access;
  void (*handler)(const RouteCall& call);
  std::string_view allow = {};
  std::string_view use = {};
};

// Every route, in the order they are matched (the first row whose pattern
// and method fit wins).
std::span<const HttpRoute> HttpRoutes();

// Whether `path` (raw, no query) fits `pattern`; the {named} segments'
// raw text go to `params` (at least kMaxRouteParams long), *num_params
// says how many.
bool MatchRoutePattern(std::string_view pattern, std::string_view path, std::string_view* params,
                       size_t* num_params);

// Answers `req`, appending the whole response to `out`, or reserving its
// place in `async.replies` and completing it later. A path no row fits is
// a 404, a method no row of the path answers a 405; either comes after the
// access the path's area needs, so a client without it learns nothing of
// the routes there.
void HandleHttp(LoopContext& loop, const http::Request& req, const HttpAsync& async,
                std::string* out);

}  // namespace floodgate::server
