// The visibility routes: see http_visibility_routes.h. Each reads what the
// loops and the visibility's thread keep (server/http/visibility.h); none waits
// for the store. A simulation runs on a thread of its own, one at a time,
// and answers through the connection's reply queue when done.

#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/http/http_routes.h"
#include "server/http/visibility.h"
#include "server/observability/redact_key.h"

namespace floodgate::server {
namespace {

constexpr size_t kDefaultTopLimit = 10;
constexpr size_t kMaxTopLimit = 1000;

void Reply(LoopContext& loop, const http::Request& req, int status, std::string_view kind,
           std::string_view detail, std::string* out,
           std::span<const http::HeaderField> headers = {}) {
  AppendRouteProblem(loop, req.keep_alive, status, kind, detail, out, headers);
}

void Json(const http::Request& req, std::string_view body, std::string* out) {
  const http::HeaderField headers[] = {{"Content-Type", "application/json"},
                                       {"Cache-Control", "no-store"}};
  http::AppendResponse(out, 200, "OK", headers, body, req.keep_alive);
}

// A query parameter, or `fallback` when absent; false (answered) when the
// query is malformed.
bool Param(LoopContext& loop, const http::Request& req, std::string_view query,
           std::string_view name, std::string_view fallback, std::string* value, std::string* out) {
  std::string error;
  std::optional<std::string> v = http::QueryParam(query, name, &error);
  if (!error.empty()) {
    Reply(loop, req, 400, "bad_request", error, out);
    return false;
  }
  *value = v.has_value() ? *std::move(v) : std::string(fallback);
  return true;
}

void Top(LoopContext& loop, const http::Request& req, std::string_view query, std::string* out) {
  Visibility& vis = *loop.service().visibility;
  std::string rule, by_text, window_text, limit_text;
  if (!Param(loop, req, query, "rule", "", &rule, out) ||
      !Param(loop, req, query, "by", "", &by_text, out) ||
      !Param(loop, req, query, "window", "15m", &window_text, out) ||
      !Param(loop, req, query, "limit", "", &limit_text, out)) {
    return;
  }
  if (rule.empty()) {
    return Reply(loop, req, 400, "bad_request", "'rule' is required: /v1/admin/top?rule=api", out);
  }
  // A concurrency rule's subjects are ranked by refused or acquired
  // leases (its own words; a rate rule's are synonyms, both ways).
  const Config config = loop.service().services->rules->config();
  const Rule* configured = nullptr;
  for (const Rule& r : config.rules) {
    if (r.name == rule) configured = &r;
  }
  const bool leases = configured != nullptr && configured->is_concurrency();
  if (by_text.empty()) by_text = leases ? "refused" : "denied";
  service::TopBy by;
  if (by_text == "denied" || by_text == "refused") {
    by = service::TopBy::kDenied;
  } else if (by_text == "admitted" || by_text == "acquired") {
    by = service::TopBy::kAdmitted;
  } else {
    return Reply(loop, req, 400, "bad_request",
                 std::string(leases ? "'by' must be refused or acquired, not "
                                    : "'by' must be denied or admitted, not ") +
                     http::QuoteForDetail(by_text, 32),
                 out);
  }
  service::TopWindow window;
  if (window_text == "1m") {
    window = service::TopWindow::k1m;
  } else if (window_text == "15m") {
    window = service::TopWindow::k15m;
  } else if (window_text == "1h") {
    window = service::TopWindow::k1h;
  } else {
    return Reply(loop, req, 400, "bad_request",
                 "'window' must be 1m, 15m or 1h, not " + http::QuoteForDetail(window_text, 32),
                 out);
  }
  size_t limit = kDefaultTopLimit;
  if (!limit_text.empty()) {
    std::string error;
    const std::optional<int64_t> n =
        IntParam("limit", limit_text, 1, static_cast<int64_t>(kMaxTopLimit), &error);
    if (!n) return Reply(loop, req, 400, "bad_request", error, out);
    limit = static_cast<size_t>(*n);
  }
  if (vis.top() == nullptr) {
    return Reply(loop, req, 404, "not_found",
                 "the top-subjects sketch is off (visibility.top_subjects: false)", out);
  }
  if (configured == nullptr && rule != "CL.THROTTLE") {
    return Reply(loop, req, 404, "not_found",
                 "unknown rule " + http::QuoteForDetail(rule, 64) + "; see GET /v1/rules", out);
  }
  const std::vector<service::TopEntry> top =
      vis.Top(rule, by, window, limit, loop.service().clock().NowMs());
  std::string body = "{\"rule\":\"";
  http::AppendJsonEscaped(&body, rule);
  body += "\",\"by\":\"" + by_text + "\",\"window\":\"" + window_text + "\",\"servers\":";
  body += std::to_string(vis.Servers());
  body += ",\"subjects\":[";
  for (size_t i = 0; i < top.size(); ++i) {
    if (i > 0) body += ',';
    body += "{\"key\":\"";
    http::AppendJsonEscaped(&body, ShownKey(top[i].key, vis.redact_keys()));
    body += "\",\"count\":" + std::to_string(top[i].count);
    body += ",\"error\":" + std::to_string(top[i].error) + "}";
  }
  body += "]}";
  Json(req, body, out);
}

void Stats(LoopContext& loop, const http::Request& req, std::string* out) {
  std::string body;
  loop.service().visibility->AppendStatsJson(loop.service().clock().NowMs(), &body);
  Json(req, body, out);
}

void Events(LoopContext& loop, const http::Request& req, const HttpAsync& async, std::string* out) {
  if (!async.start_stream || !async.start_stream()) {
    const http::HeaderField retry[] = {{"Retry-After", "5"}};
    return Reply(loop, req, 503, "unavailable",
                 "no event stream can start here: " + std::to_string(kMaxEventStreams) +
                     " are open, or this connection has requests in flight; retry later on a "
                     "connection of its own",
                 out, retry);
  }
  // No length: the body is the stream, until either side closes. The
  // first comment line lets a client see the stream is open at once.
  *out +=
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
      "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n: floodgate events, once a second\n"
      "retry: 2000\n\n";
}

void Simulate(LoopContext& loop, const http::Request& req, std::string_view query,
              const HttpAsync& async, std::string* out) {
  std::string rule, tier;
  if (!Param(loop, req, query, "rule", "", &rule, out) ||
      !Param(loop, req, query, "tier", "", &tier, out)) {
    return;
  }
  if (rule.empty()) {
    return Reply(loop, req, 400, "bad_request",
                 "'rule' is required: POST /v1/admin/simulate?rule=api with the log as the body",
                 out);
  }
  Visibility& vis = *loop.service().visibility;
  const ServiceContext& service = loop.service();
  if (!service.simulate) {
    return Reply(loop, req, 501, "not_implemented", "this server cannot simulate", out);
  }
  const uint64_t tag = async.replies->Reserve();
  const ConnectionRef self = async.self;
  const bool keep_alive = req.keep_alive;
  auto job = [fn = service.simulate, config = service.services->rules->config(), rule, tier,
              log = std::string(req.body), self, tag, keep_alive] {
    std::string json;
    const Status s = fn(config, rule, tier, log, &json);
    return std::function<void()>([self, tag, s, json = std::move(json), keep_alive]() mutable {
      self.Complete(tag, [s, json = std::move(json), keep_alive](std::string* reply) {
        if (!s.ok()) {
          const int status = s.code() == StatusCode::kNotFound ? 404 : 400;
          http::AppendProblem(reply, status, http::StatusReason(status), s.message(), keep_alive);
          return;
        }
        const http::HeaderField headers[] = {{"Content-Type", "application/json"},
                                             {"Cache-Control", "no-store"}};
        http::AppendResponse(reply, 200, "OK", headers, json, keep_alive);
      });
    });
  };
  if (!vis.RunSimulation(std::move(job))) {
    // Nothing was started: the reserved place is answered at once.
    self.Complete(tag, [keep_alive](std::string* reply) {
      const http::HeaderField retry[] = {{"Retry-After", "1"}};
      http::AppendProblem(reply, 503, http::StatusReason(503),
                          "a simulation is running; retry when it is done", keep_alive, retry);
    });
  }
}

}  // namespace

namespace {

// Whether this server keeps visibility data; a 404 answered when not.
bool Kept(const RouteCall& c) {
  if (c.loop.service().visibility != nullptr) return true;
  Reply(c.loop, c.req, 404, "not_found", "this server keeps no visibility data", c.out);
  return false;
}

}  // namespace

void TopRoute(const RouteCall& c) {
  if (Kept(c)) Top(c.loop, c.req, c.query, c.out);
}

void StatsRoute(const RouteCall& c) {
  if (Kept(c)) Stats(c.loop, c.req, c.out);
}

void EventsRoute(const RouteCall& c) {
  if (Kept(c)) Events(c.loop, c.req, c.async, c.out);
}

void SimulateRoute(const RouteCall& c) {
  if (Kept(c)) Simulate(c.loop, c.req, c.query, c.async, c.out);
}

}  // namespace floodgate::server
