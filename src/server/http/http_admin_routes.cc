// The control plane's routes under /v1/admin/: see http_admin_routes.h.
// Access is checked before any of these runs (http_route_table.cc).
#include "server/http/http_admin_routes.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/json_text.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/context/admin_access.h"
#include "server/context/error_labels.h"
#include "server/http/http_routes.h"
#include "service/control/control_plane.h"
#include "service/slices/slice_state.h"

namespace floodgate::server {
namespace {

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  json::AppendEscaped(&out, text);
  out += '"';
  return out;
}

void Problem(const RouteCall& c, int status, std::string_view detail) {
  c.loop.service().metrics->CountError(status == 404   ? "not_found"
                                       : status == 409 ? "conflict"
                                       : status >= 500 ? "unavailable"
                                                       : "bad_request");
  http::AppendProblem(c.out, status, http::StatusReason(status), detail, c.req.keep_alive);
}

// Who makes a change, for the change log: how the client got in, and from
// where.
service::Actor Who(const RouteCall& c) {
  return AdminActor(c.loop.service(), c.admin, c.async.self);
}

void Json(std::string* out, bool keep_alive, int status, std::string_view body) {
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  http::AppendResponse(out, status, http::StatusReason(status), json, body, keep_alive);
}

int HttpStatusOf(const Status& s) { return LabelError(Operation::kAdmin, s).http_status; }

// The answer of a control-plane change, now or from its thread.
service::ControlPlane::Done Answer(const RouteCall& c) {
  auto later = c.async.To(c.out).Later<std::string>(
      [keep_alive = c.req.keep_alive](const Status& s, const std::string& body,
                                      std::string* reply) {
        if (!s.ok()) {
          const int status = HttpStatusOf(s);
          http::AppendProblem(reply, status, http::StatusReason(status), s.message(), keep_alive);
          return;
        }
        Json(reply, keep_alive, 200, body);
      });
  return [later](const Status& s, const std::string& json) { later(s, json); };
}

// The body as a JSON object, or a 400 answered.
std::optional<nlohmann::json> Body(const RouteCall& c, std::string_view example) {
  nlohmann::json body = nlohmann::json::parse(c.req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    Problem(c, 400, "the body must be a JSON object, e.g. " + std::string(example));
    return std::nullopt;
  }
  return body;
}

// Every limit's figures of a peek: limit, used, remaining, reset, period;
// after a refund, what the limit gave back (`refunded`, one per limit).
void AppendLimits(std::string* body, const Decision& d, const int64_t* refunded = nullptr) {
  const bool known = d.fallback == Fallback::kNone;
  *body += "\"limits\":[";
  for (int i = 0; i < d.num_limits; ++i) {
    const LimitStatus& st = d.limits[i];
    if (i > 0) *body += ',';
    *body += "{\"limit\":" + std::to_string(st.limit);
    *body += ",\"used\":" +
             (known ? std::to_string(std::max<int64_t>(0, st.limit - st.remaining)) : "null");
    *body += ",\"remaining\":" + (known ? std::to_string(st.remaining) : "null");
    *body += ",\"reset_after_ms\":" + (known ? std::to_string(st.reset_after_ms) : "null");
    *body += ",\"period_ms\":" + std::to_string(st.period_ms);
    if (refunded != nullptr) *body += ",\"refunded\":" + std::to_string(refunded[i]);
    *body += '}';
  }
  *body += "]";
}

// GET /v1/admin/subjects/{rule}/{key}: every limit's figures from a peek
// (cost 0, blocks aside), the override in force and the blocks.
void SubjectState(const RouteCall& c, const std::string& rule, const std::string& key) {
  std::string error;
  const std::optional<std::string> tier = http::QueryParam(c.query, "tier", &error);
  if (!error.empty()) return Problem(c, 400, error);
  service::Services& services = *c.loop.service().services;
  service::LimiterCore& limiter = *services.core;
  service::LimiterCore::CheckArgs args;
  args.rule = rule;
  args.key = key;
  args.cost = 0;
  args.tier = tier.value_or("");
  args.ignore_blocks = true;
  service::ControlPlane& control = *services.control;
  std::string extra = ",\"override\":";
  const auto o = services.rules->HasOverride(rule, key, services.clock.NowMs())
                     ? control.GetOverride(rule, key)
                     : std::nullopt;
  extra += o ? control.OverrideJson(*o) : "null";
  extra += ",\"blocks\":[";
  bool first = true;
  for (const service::BlockRecord& b : control.BlocksOf(key)) {
    if (!b.rule.empty() && b.rule != rule) continue;
    if (!first) extra += ',';
    first = false;
    extra += control.BlockJson(b);
  }
  extra += "]";
  // A rule with slices: this server's holding (docs/slices.md); the shared
  // count is in the limits' used.
  if (const std::optional<store::SliceHolding> slices = service::SlicesOf(
          *services.rules, services.rooms.slices, rule, key, args.tier, services.clock.NowMs())) {
    extra += ",\"slices\":{\"held\":" + std::to_string(slices->held) +
             ",\"taken\":" + std::to_string(slices->taken) + "}";
  }
  extra += "}";
  auto write = [rule, key, tier, extra, keep_alive = c.req.keep_alive](
                   const Status& s, const Decision& d, std::string* reply) {
    if (!s.ok()) {
      const int status = HttpStatusOf(s);
      http::AppendProblem(reply, status, http::StatusReason(status), s.message(), keep_alive);
      return;
    }
    std::string body = "{\"rule\":" + Quoted(rule) + ",\"key\":" + Quoted(key) + ",\"tier\":";
    body += tier ? Quoted(*tier) : "null";
    body += ",\"fallback\":";
    body += d.fallback == Fallback::kNone ? "null" : Quoted(FallbackName(d.fallback));
    body += ',';
    AppendLimits(&body, d);
    body += extra;
    Json(reply, keep_alive, 200, body);
  };
  Decision d;
  Status s;
  const ReplyTo to = c.async.To(c.out);
  if (limiter.Check(args, &d, &s, [&] { return to.Later<Decision>(write); }) ==
      store::Answer::kNow) {
    write(s, d, c.out);
  }
}

void ResetSubject(const RouteCall& c, const std::string& rule, const std::string& key) {
  c.loop.service().limiter->Reset(
      rule, key,
      c.async.To(c.out).Later<>([rule, key, keep_alive = c.req.keep_alive](const Status& s,
                                                                           std::string* reply) {
        if (!s.ok()) {
          const int status = HttpStatusOf(s);
          http::AppendProblem(reply, status, http::StatusReason(status), s.message(), keep_alive);
          return;
        }
        Json(reply, keep_alive, 200,
             "{\"rule\":" + Quoted(rule) + ",\"key\":" + Quoted(key) + ",\"reset\":true}");
      }));
}

// Reads the integer field `name` of `body` into *out when it is there
// (absent or null: *out unchanged), in [min, max]. Otherwise false, with a
// 400 naming the field and its range: a fraction, 1e308, a string such as
// "1e3", true, or an integer past int64 (nlohmann reads 2^63..2^64-1 as
// unsigned and larger ones as floats) changes nothing.
bool IntField(const RouteCall& c, const nlohmann::json& body, std::string_view name, int64_t min,
              int64_t max, std::string_view meaning, int64_t* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  const bool in_int64 =
      it->is_number_integer() &&
      !(it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
  const int64_t v = in_int64 ? it->get<int64_t>() : 0;
  if (!in_int64 || v < min || v > max) {
    Problem(c, 400,
            std::string(name) + ": must be an integer from " + std::to_string(min) + " to " +
                std::to_string(max) + std::string(meaning));
    return false;
  }
  *out = v;
  return true;
}

constexpr std::string_view kTtlMeaning = " milliseconds (366 days)";

// Reads ttl_ms (absent: 0) in [min_ttl, ControlPlane::kMaxTtlMs] and reason
// (absent: "") from `body`; false with a 400 answered when one is wrong.
bool TtlAndReason(const RouteCall& c, const nlohmann::json& body, int64_t min_ttl, int64_t* ttl_ms,
                  std::string* reason) {
  *ttl_ms = 0;
  if (!IntField(c, body, "ttl_ms", min_ttl, service::ControlPlane::kMaxTtlMs, kTtlMeaning,
                ttl_ms)) {
    return false;
  }
  if (auto it = body.find("reason"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      Problem(c, 400, "reason: must be a string");
      return false;
    }
    *reason = it->get<std::string>();
  }
  return true;
}

bool OnlyFields(const RouteCall& c, const nlohmann::json& body,
                std::initializer_list<std::string_view> known) {
  for (const auto& [name, value] : body.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || name == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      Problem(c, 400, "unknown field '" + name + "'; expected " + list);
      return false;
    }
  }
  return true;
}

void PutOverride(const RouteCall& c, const std::string& rule, const std::string& key) {
  const auto body = Body(c, R"({"limits":["5000/day"],"ttl_ms":86400000,"reason":"..."})");
  if (!body || !OnlyFields(c, *body, {"limits", "ttl_ms", "reason"})) return;
  std::vector<std::string> limits;
  auto it = body->find("limits");
  if (it == body->end() || !it->is_array()) {
    return Problem(c, 400, "limits: required, an array of limits such as [\"5000/day\"]");
  }
  for (const auto& l : *it) {
    if (!l.is_string())
      return Problem(c, 400, "limits: each limit is a string such as \"5000/day\"");
    limits.push_back(l.get<std::string>());
  }
  int64_t ttl_ms = 0;
  std::string reason;
  if (!TtlAndReason(c, *body, 0, &ttl_ms, &reason)) return;
  c.loop.service().services->control->SetOverride(Who(c), rule, key, std::move(limits), ttl_ms,
                                                  std::move(reason), Answer(c));
}

}  // namespace

void OverrideListRoute(const RouteCall& c) {
  std::string error;
  const std::optional<std::string> rule = http::QueryParam(c.query, "rule", &error);
  if (!error.empty()) return Problem(c, 400, error);
  service::ControlPlane& control = *c.loop.service().services->control;
  // An unknown rule is a 404, as /top answers it: an empty list would
  // read as "no overrides" for a misspelt name.
  if (rule && !rule->empty() && !control.IsKnownRule(*rule)) {
    return Problem(c, 404, "unknown rule '" + *rule + "'");
  }
  std::string body = "{\"overrides\":[";
  bool first = true;
  for (const service::OverrideRecord& o : control.ListOverrides(rule.value_or(""))) {
    if (!first) body += ',';
    first = false;
    body += control.OverrideJson(o);
  }
  body += "]}";
  Json(c.out, c.req.keep_alive, 200, body);
}

void OverrideGetRoute(const RouteCall& c) {
  const std::string& rule = c.params[0];
  service::ControlPlane& control = *c.loop.service().services->control;
  const auto o = control.GetOverride(rule, c.params[1]);
  if (!o) return Problem(c, 404, "no override of rule '" + rule + "' for this key");
  Json(c.out, c.req.keep_alive, 200, control.OverrideJson(*o));
}

void OverridePutRoute(const RouteCall& c) { PutOverride(c, c.params[0], c.params[1]); }

void OverrideDeleteRoute(const RouteCall& c) {
  c.loop.service().services->control->DeleteOverride(Who(c), c.params[0], c.params[1], Answer(c));
}

void BlockListRoute(const RouteCall& c) {
  service::ControlPlane& control = *c.loop.service().services->control;
  std::string body = "{\"blocks\":[";
  bool first = true;
  for (const service::BlockRecord& b : control.ListBlocks()) {
    if (!first) body += ',';
    first = false;
    body += control.BlockJson(b);
  }
  body += "]}";
  Json(c.out, c.req.keep_alive, 200, body);
}

void BlocksOfRoute(const RouteCall& c) {
  service::ControlPlane& control = *c.loop.service().services->control;
  const std::string& key = c.params[0];
  std::string body = "{\"key\":" + Quoted(key) + ",\"blocks\":[";
  bool first = true;
  for (const service::BlockRecord& b : control.BlocksOf(key)) {
    if (!first) body += ',';
    first = false;
    body += control.BlockJson(b);
  }
  Json(c.out, c.req.keep_alive, 200, body + "]}");
}

void BlockDeleteRoute(const RouteCall& c) {
  std::string error;
  const std::optional<std::string> rule = http::QueryParam(c.query, "rule", &error);
  if (!error.empty()) return Problem(c, 400, error);
  c.loop.service().services->control->Unblock(Who(c), c.params[0], rule.value_or(""), Answer(c));
}

namespace {

// The body of a block's PUT, a key's or a network's: ttl_ms (required),
// rule and reason; false with a 400 answered when one is wrong.
bool BlockBody(const RouteCall& c, int64_t* ttl_ms, std::string* rule, std::string* reason) {
  const auto body = Body(c, R"({"ttl_ms":3600000,"rule":"api","reason":"..."})");
  if (!body || !OnlyFields(c, *body, {"ttl_ms", "rule", "reason"})) return false;
  if (body->find("ttl_ms") == body->end() || (*body)["ttl_ms"].is_null()) {
    Problem(c, 400, "ttl_ms: required; a block always expires");
    return false;
  }
  if (!TtlAndReason(c, *body, 1, ttl_ms, reason)) return false;
  if (auto it = body->find("rule"); it != body->end() && !it->is_null()) {
    if (!it->is_string()) {
      Problem(c, 400, "rule: must be a string");
      return false;
    }
    *rule = it->get<std::string>();
  }
  return true;
}

// The network a /v1/admin/blocks/cidr/{addr}/{len} path names, as the
// control plane reads it (ControlPlane::ParseNetwork), or a 400 answered.
std::optional<std::string> PathNetwork(const RouteCall& c) {
  Result<std::string> cidr = service::ControlPlane::ParseNetwork(c.params[0] + "/" + c.params[1]);
  if (!cidr.ok()) {
    Problem(c, 400, cidr.status().message());
    return std::nullopt;
  }
  return std::move(*cidr);
}

}  // namespace

void BlockPutRoute(const RouteCall& c) {
  int64_t ttl_ms = 0;
  std::string reason, rule;
  if (!BlockBody(c, &ttl_ms, &rule, &reason)) return;
  c.loop.service().services->control->Block(Who(c), c.params[0], rule, ttl_ms, std::move(reason),
                                            Answer(c));
}

void CidrBlocksRoute(const RouteCall& c) {
  const std::optional<std::string> cidr = PathNetwork(c);
  if (!cidr) return;
  service::ControlPlane& control = *c.loop.service().services->control;
  std::string body = "{\"cidr\":" + Quoted(*cidr) + ",\"blocks\":[";
  bool first = true;
  for (const service::BlockRecord& b : control.BlocksOfNetwork(*cidr)) {
    if (!first) body += ',';
    first = false;
    body += control.BlockJson(b);
  }
  Json(c.out, c.req.keep_alive, 200, body + "]}");
}

void CidrBlockPutRoute(const RouteCall& c) {
  const std::optional<std::string> cidr = PathNetwork(c);
  if (!cidr) return;
  int64_t ttl_ms = 0;
  std::string reason, rule;
  if (!BlockBody(c, &ttl_ms, &rule, &reason)) return;
  c.loop.service().services->control->BlockNetwork(Who(c), *cidr, rule, ttl_ms, std::move(reason),
                                                   Answer(c));
}

void CidrUnblockRoute(const RouteCall& c) {
  const std::optional<std::string> cidr = PathNetwork(c);
  if (!cidr) return;
  std::string error;
  const std::optional<std::string> rule = http::QueryParam(c.query, "rule", &error);
  if (!error.empty()) return Problem(c, 400, error);
  c.loop.service().services->control->UnblockNetwork(Who(c), *cidr, rule.value_or(""), Answer(c));
}

namespace {

// A rule of the config file cannot be changed here: 409, answered.
bool IsFileRule(const RouteCall& c, const std::string& name) {
  if (!c.loop.service().services->control->IsFileRule(name)) return false;
  Problem(c, 409, "rule '" + name + "' comes from the config file; change it there and reload");
  return true;
}

}  // namespace

void RulePutRoute(const RouteCall& c) {
  const std::string& name = c.params[0];
  if (IsFileRule(c, name)) return;
  const auto body = Body(c, R"({"algorithm":"sliding_window","limits":["60/minute"]})");
  if (!body) return;
  c.loop.service().services->control->PutRule(Who(c), name, body->dump(), Answer(c));
}

void RuleDeleteRoute(const RouteCall& c) {
  const std::string& name = c.params[0];
  if (IsFileRule(c, name)) return;
  c.loop.service().services->control->DeleteRule(Who(c), name, Answer(c));
}

void ChangeLogRoute(const RouteCall& c) {
  std::string error;
  const std::optional<std::string> limit_text = http::QueryParam(c.query, "limit", &error);
  if (!error.empty()) return Problem(c, 400, error);
  int64_t limit = 100;
  if (limit_text) {
    char* end = nullptr;
    limit = std::strtoll(limit_text->c_str(), &end, 10);
    if (limit_text->empty() || *end != '\0' || limit < 1 || limit > 1000) {
      return Problem(c, 400, "limit: an integer from 1 to 1000");
    }
  }
  auto later = c.async.To(c.out).Later<std::vector<std::string>>(
      [keep_alive = c.req.keep_alive](const Status& s, const std::vector<std::string>& entries,
                                      std::string* reply) {
        if (!s.ok()) {
          http::AppendProblem(reply, 503, http::StatusReason(503), s.message(), keep_alive);
          return;
        }
        std::string body = "{\"entries\":[";
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) body += ',';
          body += entries[i];
        }
        Json(reply, keep_alive, 200, body + "]}");
      });
  c.loop.service().services->control->RecentLog(
      static_cast<size_t>(limit),
      [later](const Status& s, std::vector<std::string> entries) { later(s, entries); });
}

// POST /v1/admin/subjects/{rule}/{key}/refund {"cost":n}: the state after.
void SubjectRefundRoute(const RouteCall& c) {
  const std::string& rule = c.params[0];
  const std::string& key = c.params[1];
  const auto body = Body(c, R"({"cost":1})");
  if (!body || !OnlyFields(c, *body, {"cost", "tier"})) return;
  int64_t cost = 0;
  if (body->find("cost") == body->end() || (*body)["cost"].is_null()) {
    return Problem(c, 400,
                   "cost: required, an integer from 1 to " + std::to_string(kMaxLimitCount));
  }
  if (!IntField(c, *body, "cost", 1, kMaxLimitCount, "", &cost)) return;
  std::string tier;
  if (auto t = body->find("tier"); t != body->end() && !t->is_null()) {
    if (!t->is_string()) return Problem(c, 400, "tier: must be a string");
    tier = t->get<std::string>();
  }
  c.loop.service().limiter->Refund(
      {rule, key, cost, tier},
      c.async.To(c.out).Later<core::RefundResult>([rule, key, keep_alive = c.req.keep_alive](
                                                      const Status& s, const core::RefundResult& r,
                                                      std::string* reply) {
        if (!s.ok()) {
          const int status = HttpStatusOf(s);
          http::AppendProblem(reply, status, http::StatusReason(status), s.message(), keep_alive);
          return;
        }
        // Units given back, not asked for: each limit's, and the most
        // any gave (a refund is not all-or-nothing).
        std::string out = "{\"rule\":" + Quoted(rule) + ",\"key\":" + Quoted(key) +
                          ",\"refunded\":" + std::to_string(r.most_refunded()) + ",";
        AppendLimits(&out, r.after, r.refunded.data());
        Json(reply, keep_alive, 200, out + "}");
      }));
}

void SubjectStateRoute(const RouteCall& c) { SubjectState(c, c.params[0], c.params[1]); }

void SubjectResetRoute(const RouteCall& c) { ResetSubject(c, c.params[0], c.params[1]); }

}  // namespace floodgate::server
