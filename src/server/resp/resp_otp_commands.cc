// The OTP RESP commands: see resp_otp_commands.h. Answered in place on the
// embedded store, through the connection's reply queue on Redis.
#include "server/resp/resp_otp_commands.h"

#include "floodgate/otp.h"
#include "protocol/resp/writer.h"
#include "server/context/error_labels.h"

namespace floodgate::server {
namespace {

void ReplyError(LoopContext& loop, const Status& s, std::string* out) {
  loop.service().metrics->CountError(LabelError(Operation::kOtp, s).kind);
  resp::AppendError(out, s.message());
}

void ReplyIssue(LoopContext& loop, const Status& s, const OtpIssueResult& r, std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  if (!r.issued) {
    resp::AppendError(out, "rate limited: the OTP issue limit (" +
                               loop.service().services->otp->IssueLimitText() +
                               ") is reached for this subject; retry after " +
                               std::to_string(r.retry_after_ms) + " ms");
    return;
  }
  if (r.queued) {
    resp::AppendSimpleString(out, "QUEUED");
  } else {
    resp::AppendBulk(out, r.code);
  }
}

void ReplyVerify(LoopContext& loop, const Status& s, const OtpVerifyResult& r, std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  if (r.limited) {
    resp::AppendError(out, "rate limited: the OTP verify limit (" +
                               loop.service().services->otp->VerifyLimitText() +
                               ") is reached for this subject; retry after " +
                               std::to_string(r.retry_after_ms) + " ms");
    return;
  }
  resp::AppendInteger(out, r.valid ? 1 : 0);
}

}  // namespace

// FG.OTP.ISSUE subject
void FgOtpIssue(RespClient& c, const Args& a, std::string* out) {
  c.loop->service().services->otp->IssueAsync(
      a[1], c.To(out).Later<OtpIssueResult>(
                [loop = c.loop](const Status& s, const OtpIssueResult& r, std::string* reply) {
                  ReplyIssue(*loop, s, r, reply);
                }));
}

// FG.OTP.VERIFY subject code
void FgOtpVerify(RespClient& c, const Args& a, std::string* out) {
  c.loop->service().services->otp->VerifyAsync(
      a[1], a[2],
      c.To(out).Later<OtpVerifyResult>(
          [loop = c.loop](const Status& s, const OtpVerifyResult& r, std::string* reply) {
            ReplyVerify(*loop, s, r, reply);
          }));
}

}  // namespace floodgate::server
