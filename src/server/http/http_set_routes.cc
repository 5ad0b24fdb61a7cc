// /v1/sets/{key}: request to SetRequest, answer to JSON. See http_set_routes.h.
#include "server/http/http_set_routes.h"

#include <charconv>
#include <memory>
#include <vector>

#include "floodgate/expiring_sets.h"
#include "protocol/http/json_fields.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"
#include "server/context/error_labels.h"
#include "server/http/http_routes.h"

namespace floodgate::server {
namespace {

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, end);
}

void AppendString(std::string& out, std::string_view name, std::string_view value) {
  out += '"';
  out += name;
  out += "\":\"";
  http::AppendJsonEscaped(&out, value);
  out += '"';
}

// What the request asked for, owning its strings until the answer.
struct Asked {
  SetRequest request;
  std::string key, member;
  bool keep_alive = true;
  bool head = false;
};

void AppendAnswer(LoopContext& loop, const Asked& a, const Status& s, const SetReply& r,
                  std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kSet, a.keep_alive, s, out);
  std::string body = "{";
  AppendString(body, "key", a.key);
  switch (a.request.op) {
    case SetOp::kAdd:
      body += ',';
      AppendString(body, "member", a.member);
      body += r.value == 1 ? ",\"added\":true" : ",\"added\":false";
      body += ",\"ttl_ms\":";
      AppendInt(body, a.request.ttl_ms);
      body += ",\"expires_at_ms\":";
      AppendInt(body, r.now_ms + a.request.ttl_ms);
      break;
    case SetOp::kContains:
    case SetOp::kRemove:
      body += ',';
      AppendString(body, "member", a.member);
      body += a.request.op == SetOp::kContains ? ",\"present\":" : ",\"removed\":";
      body += r.value == 1 ? "true" : "false";
      break;
    case SetOp::kCount:
    case SetOp::kMembers:
      body += ",\"count\":";
      AppendInt(body, static_cast<int64_t>(r.members.size()));
      body += ",\"members\":[";
      for (size_t i = 0; i < r.members.size(); ++i) {
        if (i > 0) body += ',';
        body += '{';
        AppendString(body, "member", r.members[i].member);
        body += ",\"ttl_ms\":";
        AppendInt(body, r.members[i].expires_at_ms - r.now_ms);
        body += ",\"expires_at_ms\":";
        AppendInt(body, r.members[i].expires_at_ms);
        body += '}';
      }
      body += ']';
      break;
  }
  body += '}';
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  const size_t start = out->size();
  http::AppendResponse(out, 200, "OK", json, body, a.keep_alive);
  if (a.head) StripBody(out, start);
}

}  // namespace

void SetRoute(const RouteCall& c) {
  LoopContext& loop = c.loop;
  const http::Request& req = c.req;
  const HttpAsync& async = c.async;
  std::string* out = c.out;
  const std::string_view query = c.query;
  // GET (HEAD), POST or DELETE: the route table answers any other method.
  Asked a;
  a.key = c.params[0];
  a.keep_alive = req.keep_alive;
  a.head = req.method == "HEAD";
  // The query: only "member", and only for GET and DELETE.
  std::vector<std::pair<std::string, std::string>> params;
  std::string error;
  if (!http::ParseQuery(query, &params, &error)) {
    return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, out);
  }
  bool has_member = false;
  for (auto& [name, value] : params) {
    if (name != "member" || req.method == "POST") {
      return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                                "unknown query parameter " + http::QuoteForDetail(name) +
                                    (req.method == "POST" ? "; POST takes a JSON body"
                                                          : "; the only parameter is member"),
                                out);
    }
    if (has_member) {
      return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                                "query parameter \"member\" is given more than once", out);
    }
    has_member = true;
    a.member = std::move(value);
  }
  if (req.method == "POST") {
    http::JsonField fields[] = {
        {"member", http::JsonField::Kind::kString, true, &a.member, nullptr},
        {"ttl_ms", http::JsonField::Kind::kInteger, true, nullptr, &a.request.ttl_ms},
    };
    if (!http::DecodeJsonFields(req.body, fields, "{\"member\":\"device-1\",\"ttl_ms\":60000}",
                                &error)) {
      return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request", error, out);
    }
    a.request.op = SetOp::kAdd;
  } else if (req.method == "DELETE") {
    if (!has_member) {
      return AppendRouteProblem(loop, a.keep_alive, 400, "bad_request",
                                "DELETE needs the member to remove: /v1/sets/{key}?member=...",
                                out);
    }
    a.request.op = SetOp::kRemove;
  } else {
    a.request.op = has_member ? SetOp::kContains : SetOp::kMembers;
  }
  a.request.key = a.key;
  a.request.member = a.member;

  // The request's views point into `a`, which the callback keeps; they are
  // read only before RunAsync returns.
  auto asked = std::make_shared<Asked>(std::move(a));
  asked->request.key = asked->key;
  asked->request.member = asked->member;
  loop.service().services->sets->RunAsync(
      asked->request,
      async.To(out).Later<SetReply>(
          [loop = &loop, asked](const Status& s, const SetReply& r, std::string* reply) {
            AppendAnswer(*loop, *asked, s, r, reply);
          }));
}

}  // namespace floodgate::server
