// /v1/alerts/recent: see http_alert_routes.h.
#include "server/http/http_alert_routes.h"

#include "floodgate/alerts.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/http/http_routes.h"

namespace floodgate::server {
namespace {

// More than alert_delivery.recent can hold: the list's own bound applies.
constexpr size_t kMaxListed = 10'000;

void Problem(LoopContext& loop, const http::Request& req, int status, std::string_view kind,
             std::string_view detail, std::string* out) {
  loop.service().metrics->CountError(kind);
  http::AppendProblem(out, status, http::StatusReason(status), detail, req.keep_alive);
}

}  // namespace

void AppendAlertRecordJson(const AlertRecord& r, std::string* out) {
  std::string_view body = r.body;
  if (body.size() >= 2 && body.back() == '}') {
    out->append(body.substr(0, body.size() - 1));
    *out += ',';
  } else {
    *out += '{';  // not an object (cannot happen): the delivery fields alone
  }
  *out += "\"status\":\"";
  *out += AlertStatusName(r.status);
  *out += "\",\"attempts\":";
  *out += std::to_string(r.attempts);
  if (!r.last_error.empty()) {
    *out += ",\"last_error\":\"";
    http::AppendJsonEscaped(out, r.last_error);
    *out += '"';
  }
  *out += '}';
}

void AlertsRecentRoute(const RouteCall& c) {
  LoopContext& loop = c.loop;
  const http::Request& req = c.req;
  std::string* out = c.out;
  size_t limit = kMaxListed;
  std::string error;
  const std::optional<std::string> text = http::QueryParam(c.query, "limit", &error);
  if (!error.empty()) return Problem(loop, req, 400, "bad_request", error, out);
  if (text.has_value()) {
    const std::optional<int64_t> n =
        IntParam("limit", *text, 1, static_cast<int64_t>(kMaxListed), &error);
    if (!n) return Problem(loop, req, 400, "bad_request", error, out);
    limit = static_cast<size_t>(*n);
  }
  Alerts& alerts = *loop.service().services->alerts;
  std::string body = "{\"enabled\":";
  body += alerts.enabled() ? "true" : "false";
  body += ",\"events\":[";
  bool first = true;
  for (const AlertRecord& r : alerts.Recent(limit)) {
    if (!first) body += ',';
    first = false;
    AppendAlertRecordJson(r, &body);
  }
  body += "]}";
  const http::HeaderField json[] = {{"Content-Type", "application/json"},
                                    {"Cache-Control", "no-store"}};
  http::AppendResponse(out, 200, "OK", json, body, req.keep_alive);
}

}  // namespace floodgate::server
