// The RESP command table and handlers: FG.CHECK (VERBOSE names a fallback
// decision's reason), CL.THROTTLE, FG.RESET and the housekeeping commands
// that redis-cli, client libraries and redis-benchmark send (PING, ECHO,
// QUIT, AUTH, HELLO, SELECT, CLIENT, COMMAND, CONFIG GET, INFO). The expiring
// sets' and OTP's handlers live in resp_set_commands.cc and
// resp_otp_commands.cc.
#include "server/resp/resp_commands.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "common/text.h"
#include "protocol/resp/writer.h"
#include "server/context/admin_access.h"
#include "server/context/error_labels.h"
#include "server/resp/resp_admin_commands.h"
#include "server/resp/resp_lease_commands.h"
#include "server/resp/resp_otp_commands.h"
#include "server/resp/resp_reservation_commands.h"
#include "server/resp/resp_set_commands.h"

namespace floodgate::server {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  return out;
}

using text::EqualsIgnoreCase;

void ReplyStatusError(const Status& s, std::string* out) { resp::AppendError(out, s.message()); }

void CountCheckError(LoopContext& loop, const Status& s) {
  loop.service().metrics->CountError(LabelError(Operation::kCheck, s).kind);
}

// FG.CHECK's reply (and its metrics), on the client's loop.
void ReplyCheck(LoopContext& loop, std::string_view rule, std::string_view key, int64_t cost,
                bool verbose, const Status& s, const Decision& d, std::string* out) {
  if (!s.ok()) {
    CountCheckError(loop, s);
    ReplyStatusError(s, out);
    return;
  }
  loop.CountDecision(rule, key, cost, d);
  AppendCheckReply(d, verbose, out);
}

void ReplyThrottle(LoopContext& loop, std::string_view key, int64_t quantity, const Status& s,
                   const ThrottleResult& r, std::string* out) {
  if (!s.ok()) {
    loop.service().metrics->CountError("bad_request");
    ReplyStatusError(s, out);
    return;
  }
  Decision d;  // counted like a rule decision, under the command's name
  d.allowed = !r.limited;
  d.retry_after_ms = r.retry_after_s < 0 ? -1 : r.retry_after_s * 1000;
  d.binding_limit = Limit{r.limit, 1, TimeUnit::kSecond};
  loop.CountDecision("CL.THROTTLE", key, quantity, d);
  AppendThrottleReply(r, out);
}

// A rule's deny_list or allow_list holds the key, an IP address
// (docs/keys-from-requests.md): the answer without a count. A deny is
// [0, 0, 0, -1, -1]: never admitted, no usage to show; an allow is
// [1, -1, -1, 0, -1]: admitted, nothing counted. VERBOSE names the list's
// verdict where it names a fallback.
bool ReplyListVerdict(RespClient& c, std::string_view rule, std::string_view key, bool verbose,
                      std::string* out) {
  service::Subjects& subjects = *c.loop->service().services->subjects;
  const service::SubjectRules& rules = subjects.ForThisThread();
  if (!rules.any_lists()) return false;
  const service::SubjectAnswer a = subjects.ResolveKey(rules, rule, key);
  if (a.kind == service::SubjectAnswer::Kind::kCheck) return false;
  const bool deny = a.kind == service::SubjectAnswer::Kind::kDenyListed;
  resp::AppendArrayHeader(out, verbose ? 6 : 5);
  resp::AppendInteger(out, deny ? 0 : 1);
  resp::AppendInteger(out, deny ? 0 : -1);
  resp::AppendInteger(out, deny ? 0 : -1);
  resp::AppendInteger(out, deny ? -1 : 0);
  resp::AppendInteger(out, -1);
  if (verbose) resp::AppendBulk(out, deny ? "deny_list" : "allow_list");
  return true;
}

// FG.CHECK rule key [COST n] [TIER t] [PRIORITY p] [WAIT ms] [VERBOSE]
void FgCheck(RespClient& c, const Args& a, std::string* out) {
  int64_t cost = 1;
  int64_t wait_ms = 0;
  std::string_view tier;
  std::string_view priority;
  bool verbose = false;
  for (size_t i = 3; i < a.size(); ++i) {
    if (EqualsIgnoreCase(a[i], "VERBOSE")) {
      verbose = true;
      continue;
    }
    const bool is_cost = EqualsIgnoreCase(a[i], "COST");
    const bool is_wait = EqualsIgnoreCase(a[i], "WAIT");
    const bool is_priority = EqualsIgnoreCase(a[i], "PRIORITY");
    if (!is_cost && !is_wait && !is_priority && !EqualsIgnoreCase(a[i], "TIER")) {
      resp::AppendError(out, "syntax error: unknown option '" + std::string(a[i]) +
                                 "' (expected COST n, TIER t, PRIORITY p, WAIT ms or VERBOSE)");
      return;
    }
    if (i + 1 >= a.size()) {
      resp::AppendError(out, "syntax error: option '" + std::string(a[i]) + "' needs a value");
      return;
    }
    ++i;
    if (is_wait) {
      if (!ParseWaitMs(a[i], &wait_ms, out)) return;
    } else if (is_priority) {
      priority = a[i];
    } else if (!is_cost) {
      tier = a[i];
    } else if (!ParseRespInt(a[i], &cost) || cost < 0) {
      resp::AppendError(out,
                        "COST must be a non-negative integer, got '" + std::string(a[i]) + "'");
      return;
    }
  }
  // One relaxed load while no rule has a list.
  if (c.loop->service().services->subjects->active() &&
      ReplyListVerdict(c, a[1], a[2], verbose, out)) {
    return;
  }
  const ReplyTo to = c.To(out);
  service::LimiterCore::CheckArgs args{a[1], a[2], cost, tier, nullptr, c.now_ms};
  args.priority = priority;
  if (wait_ms > 0) {
    // Held until it can be admitted or the wait is over: always a later
    // answer, in its turn among the connection's replies.
    c.waited = true;
    c.loop->service().services->waiting->Check(
        args, {wait_ms, static_cast<uint64_t>(c.id)},
        to.Later<Decision>([loop = c.loop, rule = std::string(a[1]), key = std::string(a[2]), cost,
                            verbose](const Status& s, const Decision& d, std::string* reply) {
          ReplyCheck(*loop, rule, key, cost, verbose, s, d, reply);
        }),
        c.loop->batch());
    return;
  }
  Decision d;
  Status s;
  if (c.loop->service().limiter->Check(
          args, &d, &s,
          [&] {
            return to.Later<Decision>(
                [loop = c.loop, rule = std::string(a[1]), key = std::string(a[2]), cost, verbose](
                    const Status& s, const Decision& d, std::string* reply) {
                  ReplyCheck(*loop, rule, key, cost, verbose, s, d, reply);
                });
          },
          c.loop->batch()) == store::Answer::kNow) {
    ReplyCheck(*c.loop, a[1], a[2], cost, verbose, s, d, out);
  }
}

// CL.THROTTLE key max_burst count period [quantity]  (redis-cell)
void ClThrottle(RespClient& c, const Args& a, std::string* out) {
  int64_t v[4] = {0, 0, 0, 1};
  const char* names[4] = {"max_burst", "count", "period", "quantity"};
  for (size_t i = 2; i < a.size(); ++i) {
    if (!ParseRespInt(a[i], &v[i - 2])) {
      resp::AppendError(
          out, std::string(names[i - 2]) + " must be an integer, got '" + std::string(a[i]) + "'");
      return;
    }
  }
  const ReplyTo to = c.To(out);
  ThrottleResult r;
  Status s;
  if (c.loop->service().limiter->Throttle(
          {a[1], v[0], v[1], v[2], v[3], nullptr, c.now_ms}, &r, &s, [&] {
            return to.Later<ThrottleResult>(
                [loop = c.loop, key = std::string(a[1]), quantity = v[3]](
                    const Status& s, const ThrottleResult& r, std::string* reply) {
                  ReplyThrottle(*loop, key, quantity, s, r, reply);
                });
          }) == store::Answer::kNow) {
    ReplyThrottle(*c.loop, a[1], v[3], s, s.ok() ? r : ThrottleResult{}, out);
  }
}

// FG.RESET rule key
void FgReset(RespClient& c, const Args& a, std::string* out) {
  c.loop->service().limiter->Reset(a[1], a[2],
                                   c.To(out).Later<>([](const Status& s, std::string* reply) {
                                     if (!s.ok()) {
                                       ReplyStatusError(s, reply);
                                     } else {
                                       resp::AppendSimpleString(reply, "OK");
                                     }
                                   }));
}

void Ping(RespClient&, const Args& a, std::string* out) {
  if (a.size() == 1) {
    resp::AppendSimpleString(out, "PONG");
  } else if (a.size() == 2) {
    resp::AppendBulk(out, a[1]);
  } else {
    resp::AppendError(out, "wrong number of arguments for 'ping' command");
  }
}

void Echo(RespClient&, const Args& a, std::string* out) { resp::AppendBulk(out, a[1]); }

void Quit(RespClient& c, const Args&, std::string* out) {
  resp::AppendSimpleString(out, "OK");
  c.quit = true;
}

// Checks a password against the configured token; replies on failure.
bool Authenticate(RespClient& c, std::string_view password, std::string* out) {
  const ServiceContext& service = c.loop->service();
  const std::string& token = service.auth_token;
  // The admin token opens the admin commands and the data plane too (an
  // operator's session needs both), as on HTTP; the read token opens the
  // reads alone, not the data plane (a check consumes quota).
  if (!service.admin_token.empty()) {
    // Only the admin tokens are refused in clear; the data plane's
    // password stays Redis-like.
    const AdminAccess access = AdminAccessOf(service, password, {});
    if (access != AdminAccess::kNone) {
      if (const std::string why =
              PlaintextTokenRefusal(service, password, c.self.Peer(), c.self.Secure());
          !why.empty()) {
        resp::AppendErrorWithCode(out, "NOPERM", why);
        return false;
      }
    }
    if (access != AdminAccess::kNone) {
      c.admin = access;
      if (access == AdminAccess::kWrite) c.authenticated = true;
      return true;
    }
  }
  if (token.empty() && service.admin_token.empty()) {
    resp::AppendError(out,
                      "AUTH <password> called without any password configured for the default "
                      "user. Are you sure your configuration is correct?");
    return false;
  }
  // A wrong password where some password exists (the data plane's, or only
  // the admin tokens): Redis's answer to a wrong password.
  if (token.empty() || !ConstantTimeEquals(password, token)) {
    c.loop->service().metrics->CountError("unauthorized");
    resp::AppendErrorWithCode(out, "WRONGPASS",
                              "invalid username-password pair or user is disabled.");
    return false;
  }
  c.authenticated = true;
  return true;
}

// AUTH password | AUTH username password (only "default" exists)
void Auth(RespClient& c, const Args& a, std::string* out) {
  if (a.size() > 3) {
    resp::AppendError(out, "syntax error");
    return;
  }
  if (a.size() == 3 && a[1] != "default") {
    resp::AppendErrorWithCode(out, "WRONGPASS",
                              "invalid username-password pair or user is disabled.");
    return;
  }
  if (Authenticate(c, a.back(), out)) resp::AppendSimpleString(out, "OK");
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]: RESP2 only.
void Hello(RespClient& c, const Args& a, std::string* out) {
  if (a.size() >= 2) {
    int64_t version = 0;
    if (!ParseRespInt(a[1], &version)) {
      resp::AppendError(out, "Protocol version is not an integer or out of range");
      return;
    }
    if (version != 2) {
      resp::AppendErrorWithCode(out, "NOPROTO", "sorry, this protocol version is not supported");
      return;
    }
  }
  for (size_t i = 2; i < a.size(); ++i) {
    if (EqualsIgnoreCase(a[i], "AUTH") && i + 2 < a.size()) {
      if (a[i + 1] != "default") {
        resp::AppendErrorWithCode(out, "WRONGPASS",
                                  "invalid username-password pair or user is disabled.");
        return;
      }
      if (!Authenticate(c, a[i + 2], out)) return;
      i += 2;
    } else if (EqualsIgnoreCase(a[i], "SETNAME") && i + 1 < a.size()) {
      c.name = std::string(a[i + 1]);
      i += 1;
    } else {
      resp::AppendError(out, "syntax error in HELLO option '" + std::string(a[i]) + "'");
      return;
    }
  }
  if (!c.authenticated) {
    resp::AppendErrorWithCode(out, "NOAUTH",
                              "HELLO must be called with the client already authenticated, "
                              "otherwise the HELLO <proto> AUTH <user> <pass> option can be used "
                              "to authenticate the client and select the RESP protocol version "
                              "at the same time");
    return;
  }
  resp::AppendArrayHeader(out, 14);
  resp::AppendBulk(out, "server");
  resp::AppendBulk(out, "floodgate");
  resp::AppendBulk(out, "version");
  resp::AppendBulk(out, c.loop->service().version);
  resp::AppendBulk(out, "proto");
  resp::AppendInteger(out, 2);
  resp::AppendBulk(out, "id");
  resp::AppendInteger(out, c.id);
  resp::AppendBulk(out, "mode");
  resp::AppendBulk(out, "standalone");
  resp::AppendBulk(out, "role");
  resp::AppendBulk(out, "master");
  resp::AppendBulk(out, "modules");
  resp::AppendArrayHeader(out, 0);
}

void Select(RespClient&, const Args& a, std::string* out) {
  if (a[1] == "0") {
    resp::AppendSimpleString(out, "OK");
  } else {
    resp::AppendError(out, "DB index is out of range (floodgate has only database 0)");
  }
}

// CLIENT SETNAME name | GETNAME | ID | SETINFO attr value | INFO
void Client(RespClient& c, const Args& a, std::string* out) {
  const std::string sub = Upper(a[1]);
  if (sub == "SETNAME" && a.size() == 3) {
    if (a[2].find_first_of(" \n") != std::string_view::npos) {
      resp::AppendError(out, "Client names cannot contain spaces, newlines or special characters.");
      return;
    }
    c.name = std::string(a[2]);
    resp::AppendSimpleString(out, "OK");
  } else if (sub == "GETNAME" && a.size() == 2) {
    if (c.name.empty()) {
      resp::AppendNullBulk(out);
    } else {
      resp::AppendBulk(out, c.name);
    }
  } else if (sub == "ID" && a.size() == 2) {
    resp::AppendInteger(out, c.id);
  } else if (sub == "SETINFO" && a.size() == 4) {
    resp::AppendSimpleString(out, "OK");  // library name/version: accepted, not kept
  } else if (sub == "INFO" && a.size() == 2) {
    resp::AppendBulk(out, "id=" + std::to_string(c.id) + " name=" + c.name + " db=0\n");
  } else {
    resp::AppendError(out, "unknown subcommand or wrong number of arguments for 'CLIENT|" +
                               std::string(a[1]) + "'");
  }
}

// COMMAND [COUNT | DOCS ... | INFO ...]: enough for redis-cli and clients
// that probe it; floodgate describes no commands.
void Command(RespClient&, const Args& a, std::string* out) {
  if (a.size() >= 2 && EqualsIgnoreCase(a[1], "COUNT")) {
    resp::AppendInteger(out, 0);
  } else {
    resp::AppendArrayHeader(out, 0);
  }
}

// CONFIG GET parameter: redis-benchmark asks for "save" and "appendonly"
// (and warns unless both come back); floodgate persists nothing, so they
// read "" and "no". "*" lists both; anything else is an empty list.
void Config(RespClient&, const Args& a, std::string* out) {
  if (EqualsIgnoreCase(a[1], "GET") && a.size() == 3) {
    const bool all = a[2] == "*";
    const bool save = all || EqualsIgnoreCase(a[2], "save");
    const bool aof = all || EqualsIgnoreCase(a[2], "appendonly");
    resp::AppendArrayHeader(out, 2 * ((save ? 1 : 0) + (aof ? 1 : 0)));
    if (save) {
      resp::AppendBulk(out, "save");
      resp::AppendBulk(out, "");
    }
    if (aof) {
      resp::AppendBulk(out, "appendonly");
      resp::AppendBulk(out, "no");
    }
  } else if (EqualsIgnoreCase(a[1], "GET")) {
    resp::AppendError(out, "wrong number of arguments for 'config|get' command");
  } else {
    resp::AppendError(out, "CONFIG " + std::string(a[1]) + " is not supported by floodgate");
  }
}

void Info(RespClient& c, const Args&, std::string* out) {
  ServiceContext& s = c.loop->service();
  const LimiterStats stats = s.limiter->GetStats();
  const int64_t uptime_s = (s.clock().MonotonicNs() - s.started_at_ns) / 1'000'000'000;
  std::string info;
  info += "# Server\r\n";
  info += "redis_version:7.0.0\r\n";  // what clients parse for feature checks
  info += "floodgate_version:" + s.version + "\r\n";
  info += "redis_mode:standalone\r\n";
  info += "uptime_in_seconds:" + std::to_string(uptime_s) + "\r\n";
  info += "io_threads_active:" + std::to_string(s.threads) + "\r\n";
  info += "\r\n# Persistence\r\nloading:0\r\n";
  info += "\r\n# Replication\r\nrole:master\r\n";
  info += "\r\n# Keyspace\r\n";
  info += "\r\n# Floodgate\r\n";
  info += "store_entries:" + std::to_string(stats.entries) + "\r\n";
  info += "store_rejected_full:" + std::to_string(stats.rejected_full) + "\r\n";
  info += "store_expired_freed:" + std::to_string(stats.expired_freed) + "\r\n";
  info += "store_bytes:" + std::to_string(stats.store_bytes) + "\r\n";
  info += "fallback_decisions_store_full:" + std::to_string(stats.fallback_store_full) + "\r\n";
  info +=
      "fallback_decisions_backend_error:" + std::to_string(stats.fallback_backend_error) + "\r\n";
  resp::AppendBulk(out, info);
}

constexpr RespCommand kCommands[] = {
    {"FG.CHECK", -3, true, FgCheck},
    {"CL.THROTTLE", -5, true, ClThrottle},
    {"FG.RESET", 3, true, FgReset},
    {"PING", -1, true, Ping},
    {"ECHO", 2, true, Echo},
    {"QUIT", -1, false, Quit},
    {"AUTH", -2, false, Auth},
    {"HELLO", -1, false, Hello},
    {"SELECT", 2, true, Select},
    {"CLIENT", -2, true, Client},
    {"COMMAND", -1, true, Command},
    {"CONFIG", -2, true, Config},
    {"INFO", -1, true, Info},
    {"FG.SADD", 4, true, FgSadd},
    {"FG.SREM", 3, true, FgSrem},
    {"FG.SISMEMBER", 3, true, FgSismember},
    {"FG.SCARD", 2, true, FgScard},
    {"FG.SMEMBERS", -2, true, FgSmembers},
    {"FG.OTP.ISSUE", 2, true, FgOtpIssue},
    {"FG.OTP.VERIFY", 3, true, FgOtpVerify},
    {"FG.ACQUIRE", -3, true, FgAcquire},
    {"FG.RELEASE", 4, true, FgRelease},
    {"FG.RENEW", -4, true, FgRenew},
    {"FG.RESERVE", -4, true, FgReserve},
    {"FG.SETTLE", 5, true, FgSettle},
    // The control plane's (resp_admin_commands.h): they check admin access.
    {"FG.STATE", -3, false, FgState},
    {"FG.REFUND", 4, false, FgRefund},
    {"FG.OVERRIDE", -4, false, FgOverride},
    {"FG.BLOCK", -3, false, FgBlock},
    {"FG.UNBLOCK", -2, false, FgUnblock},
};

}  // namespace

bool ParseWaitMs(std::string_view arg, int64_t* wait_ms, std::string* out) {
  if (!ParseRespInt(arg, wait_ms) || *wait_ms < 0 || *wait_ms > service::Waiting::kMaxWaitMs) {
    resp::AppendError(out, "WAIT must be an integer from 0 to " +
                               std::to_string(service::Waiting::kMaxWaitMs) + " ms, got '" +
                               std::string(arg) + "'");
    return false;
  }
  return true;
}

void AppendCheckReply(const Decision& d, bool verbose, std::string* out) {
  // A fallback does not know the subject's usage: -1, not a made-up figure.
  const bool fallback = d.fallback != Fallback::kNone;
  resp::AppendArrayHeader(out, verbose ? 6 : 5);
  resp::AppendInteger(out, d.allowed ? 1 : 0);
  resp::AppendInteger(out, d.limit);
  resp::AppendInteger(out, fallback ? -1 : d.remaining);
  resp::AppendInteger(out, d.retry_after_ms);
  resp::AppendInteger(out, fallback ? -1 : d.reset_after_ms);
  if (verbose) resp::AppendBulk(out, FallbackName(d.fallback));
}

void AppendThrottleReply(const ThrottleResult& r, std::string* out) {
  const bool fallback = r.fallback != Fallback::kNone;
  resp::AppendArrayHeader(out, 5);
  resp::AppendInteger(out, r.limited ? 1 : 0);
  resp::AppendInteger(out, r.limit);
  resp::AppendInteger(out, fallback ? -1 : r.remaining);
  resp::AppendInteger(out, r.retry_after_s);
  resp::AppendInteger(out, fallback ? -1 : r.reset_after_s);
}

bool ParseRespInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

void PrefetchResp(RespClient& client, const Args& args) {
  if (!client.authenticated || args.size() < 2) return;
  if (args.size() >= 3 && EqualsIgnoreCase(args[0], "FG.CHECK")) {
    std::string_view tier;
    for (size_t i = 3; i < args.size(); ++i) {
      if (EqualsIgnoreCase(args[i], "VERBOSE")) continue;
      if (EqualsIgnoreCase(args[i], "TIER") && i + 1 < args.size()) tier = args[i + 1];
      ++i;  // an option's value
    }
    client.loop->service().limiter->Prefetch(args[1], args[2], tier);
  } else if (EqualsIgnoreCase(args[0], "CL.THROTTLE")) {
    client.loop->service().limiter->PrefetchThrottle(args[1]);
  }
}

const RespCommand* FindRespCommand(std::string_view name) {
  for (const RespCommand& c : kCommands) {
    if (EqualsIgnoreCase(name, c.name)) return &c;
  }
  return nullptr;
}

void DispatchResp(RespClient& client, const Args& args, std::string* out) {
  const RespCommand* cmd = FindRespCommand(args[0]);
  if (cmd == nullptr) {
    std::string msg =
        "unknown command '" + std::string(args[0].substr(0, 128)) + "', with args beginning with: ";
    for (size_t i = 1; i < args.size() && i < 4; ++i) {
      msg += "'" + std::string(args[i].substr(0, 64)) + "' ";
    }
    client.loop->service().metrics->CountError("unknown_command");
    resp::AppendError(out, msg);
    return;
  }
  const int argc = static_cast<int>(args.size());
  if ((cmd->arity > 0 && argc != cmd->arity) || (cmd->arity < 0 && argc < -cmd->arity) ||
      (std::strcmp(cmd->name, "CL.THROTTLE") == 0 && argc > 6)) {
    std::string lower(cmd->name);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    resp::AppendError(out, "wrong number of arguments for '" + lower + "' command");
    return;
  }
  if (cmd->needs_auth && !client.authenticated) {
    client.loop->service().metrics->CountError("unauthorized");
    resp::AppendErrorWithCode(out, "NOAUTH", "Authentication required.");
    return;
  }
  cmd->handler(client, args, out);
}

}  // namespace floodgate::server
