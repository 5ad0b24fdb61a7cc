// The reservations' RESP commands: arguments to the Reservations room's
// calls, its answers to RESP replies (now on the embedded store, later
// through the reply queue on Redis).
#include "server/resp/resp_reservation_commands.h"

#include <string>
#include <string_view>

#include "common/text.h"
#include "protocol/resp/writer.h"
#include "server/context/error_labels.h"
#include "service/reservations/reservations.h"
#include "store/reservations.h"

namespace floodgate::server {
namespace {

using service::Reservations;

void ReplyError(LoopContext& loop, const Status& s, std::string* out) {
  loop.service().metrics->CountError(LabelError(Operation::kReservation, s).kind);
  resp::AppendError(out, s.message());
}

void ReplyReserve(LoopContext& loop, std::string_view rule, std::string_view key, int64_t estimate,
                  const Status& s, const Reservations::Reserved& r, std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  loop.CountDecision(rule, key, estimate, r.decision);
  resp::AppendArrayHeader(out, 4);
  resp::AppendInteger(out, r.decision.allowed ? 1 : 0);
  resp::AppendBulk(out, r.id);
  resp::AppendInteger(out, r.decision.remaining);
  resp::AppendInteger(out, r.decision.reset_after_ms);
}

void ReplySettle(LoopContext& loop, const Status& s, const Reservations::Settled& r,
                 std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  resp::AppendArrayHeader(out, 2);
  resp::AppendInteger(out, r.charged);
  resp::AppendInteger(out, r.after.remaining);
}

void BadRequest(RespClient& c, const std::string& message, std::string* out) {
  c.loop->service().metrics->CountError("bad_request");
  resp::AppendError(out, message);
}

// The room, or null with the error in `out` (a store without a ledger).
Reservations* Room(RespClient& c, std::string* out) {
  Reservations* room = c.loop->service().services->reservations.get();
  if (room == nullptr) BadRequest(c, "this store keeps no reservations", out);
  return room;
}

}  // namespace

// FG.RESERVE rule key estimate [TTL ms] [TIER t] [PRIORITY p]
void FgReserve(RespClient& c, const Args& a, std::string* out) {
  Reservations* room = Room(c, out);
  if (room == nullptr) return;
  Reservations::ReserveArgs args;
  args.rule = a[1];
  args.key = a[2];
  if (!ParseRespInt(a[3], &args.estimate) || args.estimate < 1 || args.estimate > kMaxLimitCount) {
    return BadRequest(c,
                      "estimate must be an integer from 1 to " + std::to_string(kMaxLimitCount) +
                          ", got '" + std::string(a[3]) + "'",
                      out);
  }
  for (size_t i = 4; i < a.size(); ++i) {
    const bool is_ttl = text::EqualsIgnoreCase(a[i], "TTL");
    const bool is_tier = text::EqualsIgnoreCase(a[i], "TIER");
    const bool is_priority = text::EqualsIgnoreCase(a[i], "PRIORITY");
    if (!is_ttl && !is_tier && !is_priority) {
      return BadRequest(c,
                        "syntax error: unknown option '" + std::string(a[i]) +
                            "' (expected TTL ms, TIER t or PRIORITY p)",
                        out);
    }
    if (i + 1 >= a.size()) {
      return BadRequest(c, "syntax error: option '" + std::string(a[i]) + "' needs a value", out);
    }
    ++i;
    if (is_tier) {
      args.tier = a[i];
    } else if (is_priority) {
      args.priority = a[i];
    } else if (!ParseRespInt(a[i], &args.ttl_ms) || args.ttl_ms < 1 ||
               args.ttl_ms > store::kMaxReservationTtlMs) {
      return BadRequest(c,
                        "TTL must be an integer from 1 to " +
                            std::to_string(store::kMaxReservationTtlMs) + " ms, got '" +
                            std::string(a[i]) + "'",
                        out);
    }
  }
  room->Reserve(args,
                c.To(out).Later<Reservations::Reserved>(
                    [loop = c.loop, rule = std::string(a[1]), key = std::string(a[2]),
                     estimate = args.estimate](const Status& s, const Reservations::Reserved& r,
                                               std::string* reply) {
                      ReplyReserve(*loop, rule, key, estimate, s, r, reply);
                    }));
}

// FG.SETTLE rule key reservation actual
void FgSettle(RespClient& c, const Args& a, std::string* out) {
  Reservations* room = Room(c, out);
  if (room == nullptr) return;
  Reservations::SettleArgs args;
  args.rule = a[1];
  args.key = a[2];
  args.id = a[3];
  if (!ParseRespInt(a[4], &args.actual) || args.actual < 0 || args.actual > kMaxLimitCount) {
    return BadRequest(c,
                      "actual must be an integer from 0 to " + std::to_string(kMaxLimitCount) +
                          ", got '" + std::string(a[4]) + "'",
                      out);
  }
  room->Settle(args, c.To(out).Later<Reservations::Settled>(
                         [loop = c.loop](const Status& s, const Reservations::Settled& r,
                                         std::string* reply) { ReplySettle(*loop, s, r, reply); }));
}

}  // namespace floodgate::server
