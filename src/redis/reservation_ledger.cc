// ReservationLedger on Redis: see reservation_ledger.h and
// scripts/reservations.lua.
#include "redis/reservation_ledger.h"

#include <span>
#include <utility>
#include <vector>

#include "floodgate/rule.h"
#include "redis/eval.h"
#include "redis/reply_util.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "reservations";

// The script's take outcomes.
constexpr int64_t kUnknownReply = 0;
constexpr int64_t kTakenReply = 1;
constexpr int64_t kSettledReply = 2;

// Appends `part` to `key` with '%' written %25 and `special` (':' or '}')
// %3A or %7D.
void AppendEscaped(std::string* key, std::string_view part, char special) {
  for (char c : part) {
    if (c == special) {
      key->append(special == ':' ? "%3A" : "%7D");
    } else if (c == '%') {
      key->append("%25");
    } else {
      key->push_back(c);
    }
  }
}

// An explicit instant the script can add a TTL to exactly: Lua's numbers
// are doubles, whole up to 2^53.
Status CheckInstant(const int64_t* at_ms) {
  constexpr int64_t kMaxInstantMs = (int64_t{1} << 53) - store::kMaxReservationTtlMs;
  if (at_ms != nullptr && (*at_ms < 0 || *at_ms > kMaxInstantMs)) {
    return InvalidArgumentError("the instant " + std::to_string(*at_ms) + " is out of range");
  }
  return Status::Ok();
}

// EVALSHA reservations 1 key <op> <now>
std::vector<std::string> Head(std::string key, std::string_view op, std::optional<int64_t> now_ms) {
  const Script& script = ScriptFor(Feature::kReservations);
  return {"EVALSHA",
          std::string(script.sha1),
          "1",
          std::move(key),
          std::string(op),
          now_ms.has_value() ? NumberArgument(*now_ms) : std::string()};
}

// Sends `argv` (Head's, and the op's arguments); `decode(status, reply)`
// gets Redis's answer, an error reply as its Status, a WRONGTYPE one
// noted on the client.
template <typename Decode>
void Send(Client& client, std::vector<std::string> argv, Decode decode) {
  std::string key = argv[3];
  const std::string route = key;
  SendScript(client, nullptr, route, ScriptFor(Feature::kReservations).source, std::move(argv),
             [client = &client, key = std::move(key), decode = std::move(decode)](
                 const Status& s, const redisReply* reply) mutable {
               Status result = s;
               if (result.ok()) {
                 result =
                     reply == nullptr ? InternalError("redis: no reply") : ErrorReplyStatus(*reply);
               }
               if (!result.ok()) {
                 client->NoteWrongType(result.message(), std::span<const std::string>(&key, 1));
                 return decode(result, nullptr);
               }
               decode(result, reply);
             });
}

// The take reply {outcome, now, estimate, tier} as a TakeResult.
Status DecodeTake(const redisReply& reply, store::TakeResult* out) {
  int64_t outcome = 0, now_ms = 0;
  std::string_view tier;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4 || !ReplyInteger(reply, 0, &outcome) ||
      !ReplyInteger(reply, 1, &now_ms) || !ReplyInteger(reply, 2, &out->estimate) ||
      !ReplyString(reply, 3, &tier)) {
    return MalformedReply(kScript, "take: not {outcome, now, estimate, tier}", &reply);
  }
  switch (outcome) {
    case kTakenReply:
      if (out->estimate < 1 || out->estimate > kMaxLimitCount ||
          tier.size() > store::kMaxReservationTierBytes) {
        return MalformedReply(kScript, "take: a record out of range", &reply);
      }
      out->outcome = store::TakeOutcome::kTaken;
      out->tier = std::string(tier);
      return Status::Ok();
    case kSettledReply:
      out->outcome = store::TakeOutcome::kSettled;
      break;
    case kUnknownReply:
      out->outcome = store::TakeOutcome::kUnknown;
      break;
    default:
      return MalformedReply(kScript, "take: an outcome out of range", &reply);
  }
  out->estimate = 0;
  return Status::Ok();
}

}  // namespace

std::string ReservationKey(std::string_view rule, std::string_view subject, std::string_view id) {
  std::string key;
  key.reserve(11 + rule.size() + subject.size() + id.size());
  key.append("fg:rsv:{");
  AppendEscaped(&key, rule, ':');
  key.append(":").append(subject).append("}:");
  AppendEscaped(&key, id, '}');
  return key;
}

void ReservationLedger::Count(const Status& s) {
  if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
      s.code() == StatusCode::kInternal) {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

store::Answer ReservationLedger::Hold(const store::HoldOp& op, Status* status,
                                      store::Later<> later) {
  Status s = store::CheckHoldArgs(op);
  if (s.ok()) s = CheckInstant(op.at_ms);
  if (!s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  HoldAt(op, op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt,
         [this, done = later()](const Status& s) mutable {
           Count(s);
           done(s);
         });
  return store::Answer::kLater;
}

store::Answer ReservationLedger::Take(const store::TakeOp& op, store::TakeResult* result,
                                      Status* status, store::Later<store::TakeResult> later) {
  Status s = store::CheckReservationId(op.id);
  if (s.ok()) s = CheckInstant(op.at_ms);
  if (!s.ok()) {
    *result = store::TakeResult{};
    *status = std::move(s);
    return store::Answer::kNow;
  }
  TakeAt(op, op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt,
         [this, done = later()](const Status& s, const store::TakeResult& r) mutable {
           Count(s);
           done(s, r);
         });
  return store::Answer::kLater;
}

void ReservationLedger::HoldAt(const store::HoldOp& op, std::optional<int64_t> now_ms,
                               HoldDone done) {
  std::vector<std::string> argv = Head(ReservationKey(op.rule, op.subject, op.id), "hold", now_ms);
  argv.push_back(NumberArgument(op.ttl_ms));
  argv.push_back(NumberArgument(op.estimate));
  argv.emplace_back(op.tier);
  Send(client_, std::move(argv),
       [done = std::move(done)](const Status& s, const redisReply* reply) mutable {
         if (!s.ok()) return done(s);
         int64_t ok = 0, now = 0;
         if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
             !ReplyInteger(*reply, 0, &ok) || !ReplyInteger(*reply, 1, &now) ||
             (ok != 0 && ok != 1)) {
           return done(MalformedReply(kScript, "hold: not {0|1, now}", reply));
         }
         // The id is not repeated: it is what settles the reservation.
         done(ok == 1 ? Status::Ok()
                      : AlreadyExistsError("a reservation of this id is held already"));
       });
}

void ReservationLedger::TakeAt(const store::TakeOp& op, std::optional<int64_t> now_ms,
                               TakeDone done) {
  Send(client_, Head(ReservationKey(op.rule, op.subject, op.id), "take", now_ms),
       [done = std::move(done)](const Status& s, const redisReply* reply) mutable {
         store::TakeResult out;
         Status result = s.ok() ? DecodeTake(*reply, &out) : s;
         if (!result.ok()) out = store::TakeResult{};
         done(result, out);
       });
}

}  // namespace floodgate::redis
