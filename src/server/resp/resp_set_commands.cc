// The expiring sets' RESP commands: arguments to a SetRequest, the answer
// (now on the embedded store, later through the reply queue on Redis) to a
// RESP reply.
#include "server/resp/resp_set_commands.h"

#include <charconv>
#include <string_view>

#include "common/text.h"
#include "floodgate/expiring_sets.h"
#include "protocol/resp/writer.h"
#include "server/context/error_labels.h"

namespace floodgate::server {
namespace {

// Appends the reply to a finished operation; `with_ttl` for FG.SMEMBERS WITHTTL.
void ReplySet(LoopContext& loop, SetOp op, bool with_ttl, const Status& s, const SetReply& r,
              std::string* out) {
  if (!s.ok()) {
    loop.service().metrics->CountError(LabelError(Operation::kSet, s).kind);
    resp::AppendError(out, s.message());
    return;
  }
  if (op != SetOp::kMembers) {
    resp::AppendInteger(out, r.value);
    return;
  }
  resp::AppendArrayHeader(out, r.members.size() * (with_ttl ? 2 : 1));
  for (const SetMember& m : r.members) {
    resp::AppendBulk(out, m.member);
    if (with_ttl) resp::AppendInteger(out, m.expires_at_ms - r.now_ms);
  }
}

// Runs `request`; its reply goes out in turn, whenever the store answers.
void Run(RespClient& c, const SetRequest& request, bool with_ttl, std::string* out) {
  c.loop->service().services->sets->RunAsync(
      request,
      c.To(out).Later<SetReply>([loop = c.loop, op = request.op, with_ttl](
                                    const Status& s, const SetReply& r, std::string* reply) {
        ReplySet(*loop, op, with_ttl, s, r, reply);
      }));
}

// The argument quoted for an error message, ASCII only (other bytes as
// '?'): client libraries decode error lines as text, and raw bytes would
// break them.
std::string QuoteArgument(std::string_view arg) {
  std::string ascii(arg);
  for (char& c : ascii) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return text::QuoteForMessage(ascii, 32, '\'');
}

}  // namespace

// FG.SADD key member ttl_ms
void FgSadd(RespClient& c, const Args& a, std::string* out) {
  int64_t ttl_ms = 0;
  const auto [p, ec] = std::from_chars(a[3].data(), a[3].data() + a[3].size(), ttl_ms);
  if (a[3].empty() || ec != std::errc() || p != a[3].data() + a[3].size()) {
    c.loop->service().metrics->CountError("bad_request");
    resp::AppendError(
        out, "ttl_ms must be an integer number of milliseconds, got " + QuoteArgument(a[3]));
    return;
  }
  Run(c, SetRequest{SetOp::kAdd, a[1], a[2], ttl_ms}, false, out);
}

// FG.SREM key member
void FgSrem(RespClient& c, const Args& a, std::string* out) {
  Run(c, SetRequest{SetOp::kRemove, a[1], a[2], 0}, false, out);
}

// FG.SISMEMBER key member
void FgSismember(RespClient& c, const Args& a, std::string* out) {
  Run(c, SetRequest{SetOp::kContains, a[1], a[2], 0}, false, out);
}

// FG.SCARD key
void FgScard(RespClient& c, const Args& a, std::string* out) {
  Run(c, SetRequest{SetOp::kCount, a[1], {}, 0}, false, out);
}

// FG.SMEMBERS key [WITHTTL]
void FgSmembers(RespClient& c, const Args& a, std::string* out) {
  if (a.size() > 3 || (a.size() == 3 && !text::EqualsIgnoreCase(a[2], "WITHTTL"))) {
    c.loop->service().metrics->CountError("bad_request");
    resp::AppendError(out, "syntax error: FG.SMEMBERS key [WITHTTL]");
    return;
  }
  Run(c, SetRequest{SetOp::kMembers, a[1], {}, 0}, a.size() == 3, out);
}

}  // namespace floodgate::server
