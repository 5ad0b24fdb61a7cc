// /v1/otp/issue and /v1/otp/verify: see http_otp_routes.h.
#include "server/http/http_otp_routes.h"

#include <memory>

#include "floodgate/otp.h"
#include "protocol/http/json_fields.h"
#include "protocol/http/response.h"
#include "server/context/error_labels.h"
#include "server/http/http_routes.h"

namespace floodgate::server {
namespace {

// 429 with Retry-After (whole seconds, rounded up).
void Limited(LoopContext& loop, bool keep_alive, std::string_view what, std::string_view limit,
             int64_t retry_after_ms, std::string* out) {
  const std::string retry = std::to_string(CeilSeconds(retry_after_ms));
  const http::HeaderField headers[] = {{"Retry-After", retry}};
  AppendRouteProblem(loop, keep_alive, 429, "",
                     "the OTP " + std::string(what) + " limit (" + std::string(limit) +
                         ") is reached for this subject; retry after " +
                         std::to_string(retry_after_ms) + " ms",
                     out, headers);
}

void Json(int status, std::string_view body, bool keep_alive, std::string* out) {
  const http::HeaderField json[] = {{"Content-Type", "application/json"}};
  http::AppendResponse(out, status, http::StatusReason(status), json, body, keep_alive);
}

std::string SubjectField(std::string_view subject) {
  std::string out = "{\"subject\":\"";
  http::AppendJsonEscaped(&out, subject);
  out += '"';
  return out;
}

void AnswerIssue(LoopContext& loop, const std::string& subject, bool keep_alive, const Status& s,
                 const OtpIssueResult& r, std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kOtp, keep_alive, s, out);
  Otp& otp = *loop.service().services->otp;
  if (!r.issued)
    return Limited(loop, keep_alive, "issue", otp.IssueLimitText(), r.retry_after_ms, out);
  std::string body = SubjectField(subject);
  if (r.queued) {
    body += ",\"delivery\":\"queued\"";
  } else {
    body += ",\"code\":\"" + r.code + "\"";
  }
  body += ",\"expires_in_ms\":" + std::to_string(r.expires_in_ms) + "}";
  Json(r.queued ? 202 : 200, body, keep_alive, out);
}

void AnswerVerify(LoopContext& loop, const std::string& subject, bool keep_alive, const Status& s,
                  const OtpVerifyResult& r, std::string* out) {
  if (!s.ok()) return AppendStatusProblem(loop, Operation::kOtp, keep_alive, s, out);
  Otp& otp = *loop.service().services->otp;
  if (r.limited) {
    return Limited(loop, keep_alive, "verify", otp.VerifyLimitText(), r.retry_after_ms, out);
  }
  Json(200, SubjectField(subject) + (r.valid ? ",\"valid\":true}" : ",\"valid\":false}"),
       keep_alive, out);
}

// Issue or verify (both POST: the route table answers other methods).
void IssueOrVerify(const RouteCall& c, bool issue) {
  LoopContext& loop = c.loop;
  const http::Request& req = c.req;
  std::string* out = c.out;
  const bool keep_alive = req.keep_alive;
  std::string subject, code, error;
  http::JsonField fields[] = {
      {"subject", http::JsonField::Kind::kString, true, &subject, nullptr},
      {"code", http::JsonField::Kind::kString, true, &code, nullptr},
  };
  const std::span<http::JsonField> wanted(fields, issue ? 1 : 2);
  if (!http::DecodeJsonFields(
          req.body, wanted,
          issue ? "{\"subject\":\"+15550100\"}" : "{\"subject\":\"+15550100\",\"code\":\"012345\"}",
          &error)) {
    return AppendRouteProblem(loop, keep_alive, 400, "bad_request", error, out);
  }
  Otp& otp = *loop.service().services->otp;
  const ReplyTo to = c.async.To(out);
  if (issue) {
    otp.IssueAsync(subject, to.Later<OtpIssueResult>(
                                [loop = &loop, subject, keep_alive](
                                    const Status& s, const OtpIssueResult& r, std::string* reply) {
                                  AnswerIssue(*loop, subject, keep_alive, s, r, reply);
                                }));
    return;
  }
  otp.VerifyAsync(
      subject, code,
      to.Later<OtpVerifyResult>([loop = &loop, subject, keep_alive](
                                    const Status& s, const OtpVerifyResult& r, std::string* reply) {
        AnswerVerify(*loop, subject, keep_alive, s, r, reply);
      }));
}

}  // namespace

void OtpIssueRoute(const RouteCall& c) { IssueOrVerify(c, /*issue=*/true); }

void OtpVerifyRoute(const RouteCall& c) { IssueOrVerify(c, /*issue=*/false); }

}  // namespace floodgate::server
