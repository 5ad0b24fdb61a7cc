// The leases' HTTP routes: see http_lease_routes.h.
#include "server/http/http_lease_routes.h"

#include <vector>

#include "protocol/http/json_fields.h"
#include "protocol/http/response.h"
#include "server/context/error_labels.h"
#include "server/http/http_routes.h"

namespace floodgate::server {
namespace {

using service::Leases;
using service::Waiting;

void AppendString(std::string* out, std::string_view name, std::string_view value) {
  out->append("\"").append(name).append("\":\"");
  http::AppendJsonEscaped(out, value);
  out->append("\"");
}

std::string Subject(std::string_view rule, std::string_view key) {
  std::string body = "{";
  AppendString(&body, "rule", rule);
  body += ',';
  AppendString(&body, "key", key);
  return body;
}

struct Asked {
  std::string rule, key, tier, lease;
  int64_t ttl_ms = 0;
  bool keep_alive = true;
};

void AnswerAcquire(LoopContext& loop, const Asked& a, const Status& s, const Leases::LeaseAnswer& r,
                   std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kCheck, a.keep_alive, s, out);
  loop.CountAcquire(a.rule, a.key, r.ok);
  std::string body = Subject(a.rule, a.key);
  std::vector<http::HeaderField> headers = {{"Content-Type", "application/json"}};
  if (r.fallback != Fallback::kNone) {
    headers.push_back({"Floodgate-Fallback", FallbackName(r.fallback)});
    body += ",\"fallback\":\"" + std::string(FallbackName(r.fallback)) + "\"";
  }
  body += ",\"in_flight\":" + std::to_string(r.in_flight);
  body += ",\"limit\":" + std::to_string(r.limit);
  if (r.ok) {
    body += ',';
    AppendString(&body, "lease", r.lease);
    body += ",\"expires_in_ms\":" + std::to_string(r.ms) + "}";
    http::AppendResponse(out, 200, http::StatusReason(200), headers, body, a.keep_alive);
    return;
  }
  body += ",\"acquired\":false,\"retry_after_ms\":" + std::to_string(r.ms);
  if (r.blocked) {
    body += ",\"blocked\":true,";
    AppendString(&body, "reason", r.block_reason);
  }
  body += "}";
  std::string retry;
  if (r.ms >= 0) {
    retry = std::to_string(CeilSeconds(r.ms));
    headers.push_back({"Retry-After", retry});
  }
  http::AppendResponse(out, 429, http::StatusReason(429), headers, body, a.keep_alive);
}

void Acquire(LoopContext& loop, const http::Request& req, const HttpAsync& async,
             std::string* out) {
  Asked a;
  a.keep_alive = req.keep_alive;
  int64_t wait_ms = 0;
  std::string error;
  http::JsonField fields[] = {
      {"rule", http::JsonField::Kind::kString, true, &a.rule, nullptr},
      {"key", http::JsonField::Kind::kString, true, &a.key, nullptr},
      {"tier", http::JsonField::Kind::kString, false, &a.tier, nullptr},
      {"ttl_ms", http::JsonField::Kind::kInteger, false, nullptr, &a.ttl_ms},
      {"wait_ms", http::JsonField::Kind::kInteger, false, nullptr, &wait_ms},
  };
  if (!http::DecodeJsonFields(req.body, fields, "{\"rule\":\"exports\",\"key\":\"customer:42\"}",
                              &error)) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, out);
  }
  if (a.rule.empty() || a.key.empty()) {
    return AppendRouteProblem(
        loop, a.keep_alive, 400, "bad_request",
        a.rule.empty() ? "\"rule\" must not be empty" : "\"key\" must not be empty", out);
  }
  if (fields[3].present && (a.ttl_ms < 1 || a.ttl_ms > kMaxLeaseTtlMs)) {
    return AppendRouteProblem(
        loop, a.keep_alive, 400, "bad_request",
        "\"ttl_ms\" must be an integer from 1 to " + std::to_string(kMaxLeaseTtlMs), out);
  }
  if (wait_ms < 0 || wait_ms > Waiting::kMaxWaitMs) {
    return AppendRouteProblem(
        loop, a.keep_alive, 400, "bad_request",
        "\"wait_ms\" must be an integer from 0 to " + std::to_string(Waiting::kMaxWaitMs), out);
  }
  auto done = async.To(out).Later<Leases::LeaseAnswer>(
      [loop = &loop, a](const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
        AnswerAcquire(*loop, a, s, r, reply);
      });
  service::Services& services = *loop.service().services;
  const Leases::LeaseArgs args{a.rule, a.key, a.tier, {}, a.ttl_ms};
  if (wait_ms > 0 && async.waits != nullptr) {
    services.waiting->Acquire(args, {wait_ms, async.waits->Take()}, std::move(done));
    return;
  }
  services.leases->Acquire(args, std::move(done));
}

void NotLive(LoopContext& loop, const Asked& a, std::string* out) {
  AppendRouteProblem(loop, a.keep_alive, 404, "",
                     "no live lease '" + a.lease + "' of rule '" + a.rule +
                         "' for this key: it was released, it expired, or it was never given",
                     out);
}

void Release(LoopContext& loop, const Asked& a, const HttpAsync& async, std::string* out) {
  loop.service().services->leases->Release(
      {a.rule, a.key, {}, a.lease},
      async.To(out).Later<Leases::LeaseAnswer>(
          [loop = &loop, a](const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
            if (!s.ok())
              return AppendStatusProblem(*loop, Operation::kCheck, a.keep_alive, s, reply);
            if (!r.ok) return NotLive(*loop, a, reply);
            http::AppendResponse(reply, 204, http::StatusReason(204), {}, "", a.keep_alive);
          }));
}

void Renew(LoopContext& loop, const http::Request& req, Asked a, const HttpAsync& async,
           std::string* out) {
  bool blank = true;
  for (char c : req.body) blank = blank && (c == ' ' || c == '\t' || c == '\n' || c == '\r');
  if (!blank) {
    std::string error;
    http::JsonField fields[] = {
        {"ttl_ms", http::JsonField::Kind::kInteger, false, nullptr, &a.ttl_ms},
    };
    if (!http::DecodeJsonFields(req.body, fields, "{\"ttl_ms\":30000}", &error)) {
      return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, out);
    }
    if (fields[0].present && (a.ttl_ms < 1 || a.ttl_ms > kMaxLeaseTtlMs)) {
      return AppendRouteProblem(
          loop, a.keep_alive, 400, "bad_request",
          "\"ttl_ms\" must be an integer from 1 to " + std::to_string(kMaxLeaseTtlMs), out);
    }
  }
  loop.service().services->leases->Renew(
      {a.rule, a.key, {}, a.lease, a.ttl_ms},
      async.To(out).Later<Leases::LeaseAnswer>(
          [loop = &loop, a](const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
            if (!s.ok())
              return AppendStatusProblem(*loop, Operation::kCheck, a.keep_alive, s, reply);
            if (!r.ok) return NotLive(*loop, a, reply);
            std::string body = Subject(a.rule, a.key) + ",";
            AppendString(&body, "lease", a.lease);
            body += ",\"expires_in_ms\":" + std::to_string(r.ms) + "}";
            const http::HeaderField json[] = {{"Content-Type", "application/json"}};
            http::AppendResponse(reply, 200, http::StatusReason(200), json, body, a.keep_alive);
          }));
}

// The lease a path names: params rule, key, lease (decoded).
Asked Named(const RouteCall& c) {
  Asked a;
  a.rule = c.params[0];
  a.key = c.params[1];
  a.lease = c.params[2];
  a.keep_alive = c.req.keep_alive;
  return a;
}

}  // namespace

void LeaseAcquireRoute(const RouteCall& c) { Acquire(c.loop, c.req, c.async, c.out); }

void LeaseReleaseRoute(const RouteCall& c) { Release(c.loop, Named(c), c.async, c.out); }

void LeaseRenewRoute(const RouteCall& c) { Renew(c.loop, c.req, Named(c), c.async, c.out); }

}  // namespace floodgate::server
