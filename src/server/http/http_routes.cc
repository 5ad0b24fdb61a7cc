// The data plane's HTTP routes: /v1/check (POST JSON or GET query),
// /healthz, /readyz, /metrics and /v1/rules; and the helpers every route's
// handler shares. Errors are application/problem+json (RFC 9457).
#include "server/http/http_routes.h"

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "protocol/http/check_request.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/context/error_labels.h"
#include "server/http/http_request_view.h"
#include "server/observability/alert_metrics.h"
#include "server/observability/feature_metrics.h"
#include "server/observability/lease_metrics.h"
#include "server/observability/priority_metrics.h"
#include "server/observability/subject_metrics.h"

namespace floodgate::server {
namespace {

// Appends an sf-string's content: backslash and double quote escaped
// (RFC 8941); other bytes outside printable ASCII become '?'.
void AppendStructuredFieldString(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c < 0x20 || c > 0x7e) {
      out += '?';
    } else {
      out += c;
    }
  }
}

// A check's response, from the limiter's answer.
void AppendCheckResponse(LoopContext& loop, const http::CheckRequest& cr, bool keep_alive,
                         const Status& s, const Decision& d, std::string* out) {
  if (!s.ok()) {
    const ErrorLabel label = LabelError(Operation::kCheck, s);
    loop.service().metrics->CountError(label.kind);
    http::AppendProblem(out, label.http_status, http::StatusReason(label.http_status), s.message(),
                        keep_alive);
    return;
  }
  loop.CountDecision(cr.rule, cr.key, cr.cost, d);
  // Reused per thread: the hot path builds its reply without allocating.
  thread_local std::string body, policy, state;
  body.clear();
  policy.clear();
  state.clear();
  AppendDecisionJson(body, cr.rule, cr.key, d);
  AppendRateLimitFields(policy, state, cr.rule, d);
  char retry[24];
  http::HeaderField headers[5] = {
      {"Content-Type", "application/json"}, {"RateLimit-Policy", policy}, {}, {}, {}};
  size_t num_headers = 2;
  // RateLimit is the subject's current state, which a fallback does not
  // know: the field says why instead. The policy is configuration and stays.
  if (d.fallback == Fallback::kNone) {
    headers[num_headers++] = {"RateLimit", state};
  } else {
    headers[num_headers++] = {"Floodgate-Fallback", FallbackName(d.fallback)};
  }
  if (!d.allowed && d.retry_after_ms >= 0) {
    auto [end, ec] = std::to_chars(retry, retry + sizeof(retry), CeilSeconds(d.retry_after_ms));
    headers[num_headers++] = {"Retry-After", std::string_view(retry, end - retry)};
  }
  // Which limit bound a denial, as the rule writes it: "api;3/hour".
  thread_local std::string bound;
  if (DeniedByLimit(d)) {
    bound.assign(cr.rule);
    bound += ';';
    bound += d.binding_limit.ToString();
    headers[num_headers++] = {"Floodgate-Limit", bound};
  }
  const int status = d.allowed ? 200 : cr.deny_status;
  http::AppendResponse(out, status, http::StatusReason(status),
                       std::span<const http::HeaderField>(headers, num_headers), body, keep_alive);
}

// The answer to a check that no limit decided: a list's verdict or a
// missing part's on_missing (docs/keys-from-requests.md). Nothing counted.
void AppendUncheckedAnswer(const http::CheckRequest& cr, bool keep_alive, bool allowed,
                           std::string_view reason, std::string_view list, std::string_view missing,
                           bool skipped, std::string_view key, std::string* out) {
  std::string body = "{\"allowed\":";
  body += allowed ? "true" : "false";
  if (skipped) body += ",\"skipped\":true";
  if (!reason.empty()) {
    body += ",\"reason\":\"";
    body += reason;
    body += '"';
  }
  if (!list.empty()) {
    body += ",\"list\":\"";
    http::AppendJsonEscaped(&body, list);
    body += '"';
  }
  if (!missing.empty()) {
    body += ",\"missing\":\"";
    http::AppendJsonEscaped(&body, missing);
    body += '"';
  }
  body += ",\"rule\":\"";
  http::AppendJsonEscaped(&body, cr.rule);
  body += '"';
  if (!key.empty()) {
    body += ",\"key\":\"";
    http::AppendJsonEscaped(&body, key);
    body += '"';
  }
  body += '}';
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  const int status = allowed ? 200 : cr.deny_status;
  http::AppendResponse(out, status, http::StatusReason(status), json, body, keep_alive);
}

// A check whose client a network block holds: denied as a block is
// (blocked, its reason, Retry-After the block's time left), nothing counted.
void AppendBlockedAnswer(const http::CheckRequest& cr, bool keep_alive, int64_t left_ms,
                         std::string_view reason, std::string* out) {
  std::string body = "{\"allowed\":false,\"blocked\":true,\"reason\":\"";
  http::AppendJsonEscaped(&body, reason);
  body += "\",\"rule\":\"";
  http::AppendJsonEscaped(&body, cr.rule);
  body += "\",\"key\":\"";
  http::AppendJsonEscaped(&body, cr.key);
  body += "\",\"retry_after_ms\":";
  body += std::to_string(left_ms);
  body += '}';
  char retry[24];
  auto [end, ec] = std::to_chars(retry, retry + sizeof(retry), CeilSeconds(left_ms));
  const http::HeaderField headers[] = {{"Content-Type", "application/json"},
                                       {"Retry-After", std::string_view(retry, end - retry)}};
  http::AppendResponse(out, cr.deny_status, http::StatusReason(cr.deny_status), headers, body,
                       keep_alive);
}

// The subject of a check whose rule reads the request (a key template, a
// list): true with cr->key set when the check goes on to the limiter,
// false when it was answered here.
bool ResolveSubject(LoopContext& loop, const http::Request& req, const HttpAsync& async,
                    bool from_query, http::CheckRequest* cr, std::string* out) {
  service::Subjects& subjects = *loop.service().services->subjects;
  const HttpRequestView view(req, async.self);
  std::string key;
  const service::SubjectAnswer a = subjects.Resolve(
      subjects.ForThisThread(), cr->rule, cr->key_given ? cr->key : std::string_view(), view,
      loop.service().services->clock.NowMs(), &key);
  using Kind = service::SubjectAnswer::Kind;
  switch (a.kind) {
    case Kind::kCheck: {
      cr->key = std::move(key);
      // A network block holds the client (docs/control-plane.md): a key
      // given that is an address is the limiter's to test, as on every
      // front; a key built from the request names no address to it.
      const service::Controls& controls = *loop.service().services->controls;
      if (cr->key_given || !a.address.has_value() || !controls.any_address_block()) return true;
      const int64_t now = loop.service().services->clock.NowMs();
      std::string_view reason;
      const int64_t until = controls.AddressBlockedUntil(*a.address, cr->rule, now, &reason);
      if (until == 0) return true;
      AppendBlockedAnswer(*cr, req.keep_alive, until - now, reason, out);
      return false;
    }
    case Kind::kNoKey:
      AppendRouteProblem(loop, req.keep_alive, 400, "bad_request",
                         std::string("missing required ") +
                             (from_query ? "query parameter" : "field") + " \"key\" (rule '" +
                             cr->rule + "' has no key template to build it from the request)",
                         out);
      return false;
    case Kind::kDenyListed:
    case Kind::kAllowListed: {
      const bool allowed = a.kind == Kind::kAllowListed;
      AppendUncheckedAnswer(
          *cr, req.keep_alive, allowed, allowed ? "allow_list" : "deny_list", a.list->name, {},
          false,
          cr->key_given ? std::string_view(cr->key) : std::string_view(a.address->ToString()), out);
      return false;
    }
    case Kind::kMissing:
      break;
  }
  const std::string& part = a.missing->written;
  subjects.CountMissing(cr->rule, *a.missing);
  const std::string_view name = std::string_view(part).substr(1, part.size() - 2);
  switch (a.on_missing) {
    case OnMissing::kError:
      AppendRouteProblem(loop, req.keep_alive, 400, "bad_request",
                         "rule '" + cr->rule + "': " + part + " is missing from the request" +
                             (a.missing->kind == KeyPartKind::kJwt
                                  ? " (no bearer token, or one that does not verify)"
                                  : ""),
                         out);
      break;
    case OnMissing::kDeny:
      AppendUncheckedAnswer(*cr, req.keep_alive, false, "missing", {}, name, false, {}, out);
      break;
    case OnMissing::kAllow:
      AppendUncheckedAnswer(*cr, req.keep_alive, true, "missing", {}, name, false, {}, out);
      break;
    case OnMissing::kSkip:
      AppendUncheckedAnswer(*cr, req.keep_alive, true, {}, {}, name, true, {}, out);
      break;
  }
  return false;
}

void Check(LoopContext& loop, const http::Request& req, std::string_view query,
           const HttpAsync& async, std::string* out) {
  http::CheckRequest cr;
  std::string error;
  // HEAD is GET without the body (nginx auth_request can send it): the
  // query says what to check.
  const bool from_query = req.method == "GET" || req.method == "HEAD";
  const bool parsed = from_query ? http::DecodeCheckRequestQuery(query, &cr, &error)
                                 : http::DecodeCheckRequestJson(req.body, &cr, &error) &&
                                       http::DecodeDenyStatusQuery(query, &cr, &error);
  if (!parsed) {
    AppendRouteProblem(loop, req.keep_alive, 400, "bad_request", error, out);
    return;
  }
  // One relaxed load while no rule reads the request.
  if ((!cr.key_given || loop.service().services->subjects->active()) &&
      !ResolveSubject(loop, req, async, from_query, &cr, out)) {
    return;
  }
  const ReplyTo to = async.To(out);
  service::LimiterCore::CheckArgs args{cr.rule, cr.key, cr.cost, cr.tier};
  args.priority = cr.priority;
  if (cr.wait_ms > 0 && async.waits != nullptr) {
    // Held until it can be admitted or the wait is over: a later answer.
    loop.service().services->waiting->Check(
        args, {cr.wait_ms, async.waits->Take()},
        to.Later<Decision>(
            [loop = &loop, cr, keep_alive = req.keep_alive, head = req.method == "HEAD"](
                const Status& s, const Decision& d, std::string* reply) {
              const size_t start = reply->size();
              AppendCheckResponse(*loop, cr, keep_alive, s, d, reply);
              if (head) StripBody(reply, start);
            }),
        loop.batch());
    return;
  }
  Decision d;
  Status s;
  if (loop.service().limiter->Check(
          args, &d, &s,
          [&] {
            return to.Later<Decision>(
                [loop = &loop, cr, keep_alive = req.keep_alive, head = req.method == "HEAD"](
                    const Status& s, const Decision& d, std::string* reply) {
                  const size_t start = reply->size();
                  AppendCheckResponse(*loop, cr, keep_alive, s, d, reply);
                  if (head) StripBody(reply, start);
                });
          },
          loop.batch()) == store::Answer::kNow) {
    AppendCheckResponse(loop, cr, req.keep_alive, s, d, out);
  }
}

void Rules(LoopContext& loop, const http::Request& req, std::string* out) {
  nlohmann::json rules = nlohmann::json::object();
  for (const Rule& r : loop.service().services->rules->config().rules) {
    nlohmann::json j;
    j["algorithm"] = std::string(AlgorithmName(r.algorithm));
    j["max_waiters"] = r.max_waiters;
    if (r.is_concurrency()) {
      // Its fields as written: no rate, no window.
      j["max_in_flight"] = r.max_in_flight();
      j["lease_ttl_ms"] = r.lease_ttl_ms();
      if (!r.tiers.empty()) {
        j["tiers"] = nlohmann::json::object();
        for (const auto& [tier, limits] : r.tiers) j["tiers"][tier] = limits.at(0).count;
      }
      j["on_backend_error"] = r.on_backend_error == OnBackendError::kAllow ? "allow" : "deny";
      j["on_store_full"] = r.on_store_full == OnStoreFull::kAllow ? "allow" : "deny";
      rules[r.name] = std::move(j);
      continue;
    }
    j["limits"] = nlohmann::json::array();
    for (const Limit& l : r.limits) j["limits"].push_back(l.ToString());
    if (!r.burst.empty()) j["burst"] = r.burst;
    if (!r.tiers.empty()) {
      j["tiers"] = nlohmann::json::object();
      for (const auto& [tier, limits] : r.tiers) {
        auto& t = j["tiers"][tier] = nlohmann::json::array();
        for (const Limit& l : limits) t.push_back(l.ToString());
      }
    }
    // The secret never leaves the process; its variable's name may.
    if (r.alerts.enabled()) {
      j["alerts"] = {{"thresholds", r.alerts.thresholds},
                     {"webhook", r.alerts.webhook},
                     {"secret_env", r.alerts.secret_env}};
    }
    j["timezone"] = r.timezone;
    j["shadow"] = r.shadow;
    // Where the subject comes from (docs/keys-from-requests.md), when set.
    if (!r.subject.key.empty()) {
      j["key"] = r.subject.key;
      static constexpr const char* kOnMissing[] = {"error", "deny", "allow", "skip"};
      j["on_missing"] = kOnMissing[static_cast<int>(r.subject.on_missing)];
    }
    if (!r.subject.deny_list.empty()) j["deny_list"] = r.subject.deny_list;
    if (!r.subject.allow_list.empty()) j["allow_list"] = r.subject.allow_list;
    // The share of each limit kept back from each class, in percent.
    if (!r.priorities.empty()) {
      j["priorities"] = nlohmann::json::object();
      for (const PriorityClass& c : r.priorities) j["priorities"][c.name] = c.keep_percent;
    }
    j["on_backend_error"] = r.on_backend_error == OnBackendError::kAllow ? "allow" : "deny";
    j["on_store_full"] = r.on_store_full == OnStoreFull::kAllow ? "allow" : "deny";
    rules[r.name] = std::move(j);
  }
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  http::AppendResponse(out, 200, "OK", json,
                       nlohmann::json{{"rules", rules}}.dump(
                           -1, ' ', false, nlohmann::json::error_handler_t::replace),
                       req.keep_alive);
}

// Readiness, for load balancers: the process serves (else nothing would
// answer), the rules are loaded (a Limiter exists only with them), and the
// store can be expected to answer (Limiter::StoreHealth: what the Redis
// client already knows, so this never waits for Redis). /healthz is
// liveness alone.
void Ready(LoopContext& loop, const http::Request& req, std::string* out) {
  const http::HeaderField json[] = {{"Content-Type", "application/json"},
                                    {"Cache-Control", "no-store"}};
  // Draining (SIGTERM): a load balancer stops sending here; the process
  // that replaces this one answers 200 (docs/operations.md).
  const Status health = loop.service().draining.load(std::memory_order_relaxed)
                            ? UnavailableError("draining")
                            : loop.service().services->rooms.backend->Health();
  if (health.ok()) {
    http::AppendResponse(out, 200, "OK", json, "{\"status\":\"ready\"}", req.keep_alive);
    return;
  }
  std::string body = "{\"status\":\"unavailable\",\"reason\":\"";
  http::AppendJsonEscaped(&body, health.message());
  body += "\"}";
  http::AppendResponse(out, 503, http::StatusReason(503), json, body, req.keep_alive);
}

void MetricsPage(LoopContext& loop, const http::Request& req, std::string* out) {
  std::string body;
  ServiceContext& s = loop.service();
  s.metrics->Render(&body);
  const LimiterStats stats = s.limiter->GetStats();
  AppendMetric(&body, "floodgate_store_entries", "gauge",
               "Live (rule, subject) entries in the embedded store.", stats.entries);
  AppendMetric(&body, "floodgate_store_rejected_full_total", "counter",
               "New entries, and growths of a known subject's state, the full store could not "
               "take (rules: decided by on_store_full; sets and OTP: refused).",
               stats.rejected_full);
  AppendMetric(&body, "floodgate_store_expired_total", "counter", "Entries freed after expiring.",
               stats.expired_freed);
  AppendMetric(&body, "floodgate_store_bytes", "gauge",
               "Bytes of the embedded store's entries, what their states own, and tables (what "
               "engine.max_memory bounds).",
               stats.store_bytes);
  AppendMetricFamily(
      &body, "floodgate_fallback_decisions_total", "counter",
      "Decisions made without the subject's state, by reason: the rule's "
      "on_backend_error (the remote store failed or was late) or on_store_full "
      "(no room for a new subject).",
      "reason",
      {{"backend_error", stats.fallback_backend_error}, {"store_full", stats.fallback_store_full}});
  // What only the store in use has (Redis: its errors, circuits, cache).
  for (const store::Metric& m : s.services->rooms.store->Metrics()) {
    AppendMetric(&body, m.name, m.type, m.help, m.value);
  }
  AppendFeatureMetrics(*s.services, &body);
  AppendSubjectMetrics(*s.services->subjects, &body);
  AppendPriorityMetrics(*s.services->rules, &body);
  AppendLeaseMetrics(*s.services, &body);
  AppendAlertMetrics(*s.services->alerts, &body);
  if (s.render_connections) s.render_connections(&body);
  const http::HeaderField text[] = {{"Content-Type", "text/plain; version=0.0.4"}};
  http::AppendResponse(out, 200, "OK", text, body, req.keep_alive);
}

}  // namespace

namespace {

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, end);
}

// ,"limit":N,"remaining":N,"retry_after_ms":N,"reset_after_ms":N; with
// `unknown` (a fallback: the subject's usage is not known) remaining and
// reset_after_ms are null.
void AppendFigures(std::string& j, int64_t limit, int64_t remaining, int64_t retry_after_ms,
                   int64_t reset_after_ms, bool unknown) {
  j += ",\"limit\":";
  AppendInt(j, limit);
  j += ",\"remaining\":";
  if (unknown) {
    j += "null";
  } else {
    AppendInt(j, remaining);
  }
  j += ",\"retry_after_ms\":";
  AppendInt(j, retry_after_ms);
  j += ",\"reset_after_ms\":";
  if (unknown) {
    j += "null";
  } else {
    AppendInt(j, reset_after_ms);
  }
}

}  // namespace

void AppendDecisionJson(std::string& j, std::string_view rule, std::string_view key,
                        const Decision& d) {
  j += "{\"allowed\":";
  j += d.allowed ? "true" : "false";
  if (d.shadow_denied) j += ",\"shadow_denied\":true";
  // A fallback: `allowed` is the rule's policy for the reason, not a count.
  const bool fallback = d.fallback != Fallback::kNone;
  if (fallback) {
    j += ",\"fallback\":\"";
    j += FallbackName(d.fallback);
    j += '"';
  }
  // A block denied it (docs/control-plane.md): say so, and why.
  if (d.blocked) {
    j += ",\"blocked\":true,\"reason\":\"";
    http::AppendJsonEscaped(&j, d.block_reason);
    j += '"';
  }
  j += ",\"rule\":\"";
  http::AppendJsonEscaped(&j, rule);
  j += "\",\"key\":\"";
  http::AppendJsonEscaped(&j, key);
  j += '"';
  AppendFigures(j, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms, fallback);
  if (DeniedByLimit(d)) {
    j += ",\"binding\":\"";
    j += d.binding_limit.ToString();
    j += '"';
  }
  j += ",\"limits\":[";
  for (int i = 0; i < d.num_limits; ++i) {
    const LimitStatus& st = d.limits[i];
    if (i > 0) j += ',';
    j += "{\"allowed\":";
    j += st.allowed ? "true" : "false";
    AppendFigures(j, st.limit, st.remaining, st.retry_after_ms, st.reset_after_ms, fallback);
    j += ",\"period_ms\":";
    AppendInt(j, st.period_ms);
    j += '}';
  }
  j += "]}";
}

void AppendRateLimitFields(std::string& policy, std::string& state, std::string_view rule,
                           const Decision& d) {
  for (int i = 0; i < d.num_limits; ++i) {
    const LimitStatus& st = d.limits[i];
    if (i > 0) {
      policy += ", ";
      state += ", ";
    }
    for (std::string* field : {&policy, &state}) {
      *field += '"';
      AppendStructuredFieldString(*field, rule);
      if (d.num_limits > 1) {
        *field += ':';
        AppendInt(*field, i);
      }
      *field += '"';
    }
    policy += ";q=";
    AppendInt(policy, st.limit);
    policy += ";w=";
    AppendInt(policy, CeilSeconds(st.period_ms));
    state += ";r=";
    AppendInt(state, st.remaining);
    state += ";t=";
    AppendInt(state, CeilSeconds(st.reset_after_ms));
  }
}

std::string_view BearerToken(const http::Request& req) {
  const std::string_view auth = req.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() <= kBearer.size()) return {};
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if ((auth[i] | 0x20) != (kBearer[i] | 0x20)) return {};  // scheme is case-insensitive
  }
  return auth.substr(kBearer.size());
}

void StripBody(std::string* response, size_t start) {
  const size_t head_end = response->find("\r\n\r\n", start);
  if (head_end != std::string::npos) response->resize(head_end + 4);
}

void CheckRoute(const RouteCall& c) { Check(c.loop, c.req, c.query, c.async, c.out); }

void HealthzRoute(const RouteCall& c) {
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  http::AppendResponse(c.out, 200, "OK", json, "{\"status\":\"ok\"}", c.req.keep_alive);
}

void ReadyzRoute(const RouteCall& c) { Ready(c.loop, c.req, c.out); }

void MetricsRoute(const RouteCall& c) { MetricsPage(c.loop, c.req, c.out); }

void RulesRoute(const RouteCall& c) { Rules(c.loop, c.req, c.out); }

void AppendRouteProblem(LoopContext& loop, bool keep_alive, int status, std::string_view kind,
                        std::string_view detail, std::string* out,
                        std::span<const http::HeaderField> headers) {
  if (!kind.empty()) loop.service().metrics->CountError(kind);
  http::AppendProblem(out, status, http::StatusReason(status), detail, keep_alive, headers);
}

void AppendStatusProblem(LoopContext& loop, Operation op, bool keep_alive, const Status& s,
                         std::string* out) {
  const ErrorLabel label = LabelError(op, s);
  AppendRouteProblem(loop, keep_alive, label.http_status, label.kind, s.message(), out);
}

int64_t CeilSeconds(int64_t ms) { return ms <= 0 ? 0 : (ms + 999) / 1000; }

std::optional<int64_t> IntParam(std::string_view name, std::string_view text, int64_t min,
                                int64_t max, std::string* error) {
  int64_t n = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
  if (r.ec == std::errc() && r.ptr == text.data() + text.size() && n >= min && n <= max) return n;
  *error = "'" + std::string(name) + "' must be an integer between " + std::to_string(min) +
           " and " + std::to_string(max) + ", not " + http::QuoteForDetail(text, 32);
  return std::nullopt;
}

}  // namespace floodgate::server
