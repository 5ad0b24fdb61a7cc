// The reservations' HTTP routes: see http_reservation_routes.h.
#include "server/http/http_reservation_routes.h"

#include <string>
#include <vector>

#include "protocol/http/json_fields.h"
#include "protocol/http/response.h"
#include "server/context/error_labels.h"
#include "server/http/http_routes.h"
#include "service/reservations/reservations.h"
#include "store/reservations.h"

namespace floodgate::server {
namespace {

using service::Reservations;

void AppendString(std::string* out, std::string_view name, std::string_view value) {
  out->append("\"").append(name).append("\":\"");
  http::AppendJsonEscaped(out, value);
  out->append("\"");
}

struct Asked {
  std::string rule, key, tier, priority, id;
  int64_t estimate = 0;
  int64_t ttl_ms = service::kDefaultReservationTtlMs;
  int64_t actual = 0;
  bool keep_alive = true;
};

Reservations* Room(LoopContext& loop, bool keep_alive, std::string* out) {
  Reservations* room = loop.service().services->reservations.get();
  if (room == nullptr) {
    AppendRouteProblem(loop, keep_alive, 400, "bad_request", "this store keeps no reservations",
                       out);
  }
  return room;
}

void AnswerReserve(LoopContext& loop, const Asked& a, const Status& s,
                   const Reservations::Reserved& r, std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kReservation, a.keep_alive, s, out);
  const Decision& d = r.decision;
  loop.CountDecision(a.rule, a.key, a.estimate, d);
  std::string body, policy, state;
  AppendDecisionJson(body, a.rule, a.key, d);
  AppendRateLimitFields(policy, state, a.rule, d);
  body.pop_back();  // the object's '}': the reservation's members follow
  if (r.id.empty()) {
    body += ",\"reservation\":null";
  } else {
    body += ',';
    AppendString(&body, "reservation", r.id);
  }
  body += ",\"estimate\":" + std::to_string(a.estimate) +
          ",\"ttl_ms\":" + std::to_string(a.ttl_ms) + "}";
  std::vector<http::HeaderField> headers = {{"Content-Type", "application/json"},
                                            {"RateLimit-Policy", policy}};
  if (d.fallback == Fallback::kNone) {
    headers.push_back({"RateLimit", state});
  } else {
    headers.push_back({"Floodgate-Fallback", FallbackName(d.fallback)});
  }
  std::string retry;
  if (!d.allowed && d.retry_after_ms >= 0) {
    retry = std::to_string(CeilSeconds(d.retry_after_ms));
    headers.push_back({"Retry-After", retry});
  }
  const int status = d.allowed ? 200 : 429;
  http::AppendResponse(out, status, http::StatusReason(status), headers, body, a.keep_alive);
}

void AnswerSettle(LoopContext& loop, const Asked& a, const Status& s,
                  const Reservations::Settled& r, std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kReservation, a.keep_alive, s, out);
  std::string body = "{";
  AppendString(&body, "rule", a.rule);
  body += ',';
  AppendString(&body, "key", a.key);
  body += ',';
  AppendString(&body, "reservation", a.id);
  const int64_t remaining = r.after.remaining;
  body += ",\"estimate\":" + std::to_string(r.estimate) +
          ",\"actual\":" + std::to_string(r.actual) + ",\"charged\":" + std::to_string(r.charged) +
          ",\"remaining\":" + std::to_string(remaining) +
          ",\"debt\":" + std::to_string(remaining < 0 ? -remaining : 0) + "}";
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  http::AppendResponse(out, 200, http::StatusReason(200), json, body, a.keep_alive);
}

}  // namespace

void ReserveRoute(const RouteCall& c) {
  LoopContext& loop = c.loop;
  Asked a;
  a.keep_alive = c.req.keep_alive;
  std::string error;
  http::JsonField fields[] = {
      {"rule", http::JsonField::Kind::kString, true, &a.rule, nullptr},
      {"key", http::JsonField::Kind::kString, true, &a.key, nullptr},
      {"estimate", http::JsonField::Kind::kInteger, true, nullptr, &a.estimate},
      {"ttl_ms", http::JsonField::Kind::kInteger, false, nullptr, &a.ttl_ms},
      {"tier", http::JsonField::Kind::kString, false, &a.tier, nullptr},
      {"priority", http::JsonField::Kind::kString, false, &a.priority, nullptr},
  };
  if (!http::DecodeJsonFields(c.req.body, fields,
                              "{\"rule\":\"tokens\",\"key\":\"user:42\",\"estimate\":1000}",
                              &error)) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, c.out);
  }
  if (a.rule.empty() || a.key.empty()) {
    return AppendRouteProblem(
        loop, a.keep_alive, 400, "bad_request",
        a.rule.empty() ? "\"rule\" must not be empty" : "\"key\" must not be empty", c.out);
  }
  if (a.estimate < 1 || a.estimate > kMaxLimitCount) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                              "\"estimate\" must be an integer from 1 to 10^15", c.out);
  }
  if (a.ttl_ms < 1 || a.ttl_ms > store::kMaxReservationTtlMs) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                              "\"ttl_ms\" must be an integer from 1 to " +
                                  std::to_string(store::kMaxReservationTtlMs) + " (a day)",
                              c.out);
  }
  Reservations* room = Room(loop, a.keep_alive, c.out);
  if (room == nullptr) return;
  Reservations::ReserveArgs args{a.rule, a.key, a.estimate, a.ttl_ms, a.tier, a.priority};
  room->Reserve(
      args, c.async.To(c.out).Later<Reservations::Reserved>(
                [loop = &loop, a](const Status& s, const Reservations::Reserved& r,
                                  std::string* reply) { AnswerReserve(*loop, a, s, r, reply); }));
}

void SettleRoute(const RouteCall& c) {
  LoopContext& loop = c.loop;
  Asked a;
  a.rule = c.params[0];
  a.key = c.params[1];
  a.id = c.params[2];
  a.keep_alive = c.req.keep_alive;
  std::string error;
  http::JsonField fields[] = {
      {"actual", http::JsonField::Kind::kInteger, true, nullptr, &a.actual},
  };
  if (!http::DecodeJsonFields(c.req.body, fields, "{\"actual\":1234}", &error)) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, c.out);
  }
  if (a.actual < 0 || a.actual > kMaxLimitCount) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                              "\"actual\" must be an integer from 0 to 10^15", c.out);
  }
  Reservations* room = Room(loop, a.keep_alive, c.out);
  if (room == nullptr) return;
  room->Settle({a.rule, a.key, a.id, a.actual},
               c.async.To(c.out).Later<Reservations::Settled>(
                   [loop = &loop, a](const Status& s, const Reservations::Settled& r,
                                     std::string* reply) { AnswerSettle(*loop, a, s, r, reply); }));
}

}  // namespace floodgate::server
