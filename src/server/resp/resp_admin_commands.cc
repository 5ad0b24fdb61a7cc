// FG.STATE, FG.REFUND, FG.OVERRIDE, FG.BLOCK, FG.UNBLOCK: see
// resp_admin_commands.h.
#include "server/resp/resp_admin_commands.h"

#include <optional>
#include <vector>

#include "common/text.h"
#include "protocol/resp/writer.h"
#include "service/control/control_plane.h"
#include "service/slices/slice_state.h"

namespace floodgate::server {
namespace {

using text::EqualsIgnoreCase;

// Whether this connection may run an admin command (a write or not);
// replies with the error when not.
bool Allowed(RespClient& c, bool write, std::string* out) {
  const ServiceContext& service = c.loop->service();
  AdminAccess access = c.admin;
  if (!AdminClientName(service, c.self.ClientNames()).empty()) {
    access = AdminAccess::kWrite;
  } else if (service.admin_token.empty()) {
    access = AdminAccessOf(service, "", c.self.Peer());
  }
  if (access == AdminAccess::kNone) {
    c.loop->service().metrics->CountError("unauthorized");
    resp::AppendErrorWithCode(
        out, "NOPERM",
        service.admin_token.empty()
            ? "no admin token is set (admin.token_env): admin commands answer loopback clients only"
            : "admin commands need AUTH with the admin token first");
    return false;
  }
  if (write && access == AdminAccess::kRead) {
    c.loop->service().metrics->CountError("unauthorized");
    resp::AppendErrorWithCode(out, "NOPERM", "the read token cannot change anything");
    return false;
  }
  return true;
}

service::Actor Who(RespClient& c) { return AdminActor(c.loop->service(), c.admin, c.self); }

// A change's answer: +OK, or the error.
service::ControlPlane::Done ReplyOk(RespClient& c, std::string* out) {
  auto later =
      c.To(out).Later<std::string>([](const Status& s, const std::string&, std::string* reply) {
        if (!s.ok()) return resp::AppendError(reply, s.message());
        resp::AppendSimpleString(reply, "OK");
      });
  return [later](const Status& s, const std::string& json) { later(s, json); };
}

service::ControlPlane::Done ReplyDone(RespClient& c, std::string* out) {
  auto later =
      c.To(out).Later<std::string>([](const Status& s, const std::string&, std::string* reply) {
        if (s.code() == StatusCode::kNotFound) return resp::AppendInteger(reply, 0);
        if (!s.ok()) return resp::AppendError(reply, s.message());
        resp::AppendInteger(reply, 1);
      });
  return [later](const Status& s, const std::string& json) { later(s, json); };
}

}  // namespace

void FgState(RespClient& c, const Args& a, std::string* out) {
  if (!Allowed(c, false, out)) return;
  std::string_view tier;
  if (a.size() == 5 && EqualsIgnoreCase(a[3], "TIER")) {
    tier = a[4];
  } else if (a.size() != 3) {
    return resp::AppendError(out, "syntax error: FG.STATE rule key [TIER t]");
  }
  service::Services& services = *c.loop->service().services;
  service::LimiterCore& limiter = *services.core;
  service::ControlPlane& control = *services.control;
  const std::string rule(a[1]), key(a[2]);
  std::vector<std::string> limits;
  if (services.rules->HasOverride(rule, key, services.clock.NowMs())) {
    if (auto o = control.GetOverride(rule, key)) limits = o->limits;
  }
  int64_t block_left = 0;
  std::string reason;
  const int64_t now = services.clock.NowMs();
  for (const service::BlockRecord& b : control.BlocksOf(key)) {
    if ((b.rule.empty() || b.rule == rule) && b.expires_at_ms - now > block_left) {
      block_left = b.expires_at_ms - now;
      reason = b.reason;
    }
  }
  // A rule with slices: a fifth element, this server's [held, taken]
  // (docs/slices.md); the shared count is in the limits' used.
  const std::optional<store::SliceHolding> slices = service::SlicesOf(
      *services.rules, services.rooms.slices, rule, key, tier, services.clock.NowMs());
  auto write = [limits, block_left, reason, slices](const Status& s, const Decision& d,
                                                    std::string* reply) {
    if (!s.ok()) return resp::AppendError(reply, s.message());
    const bool known = d.fallback == Fallback::kNone;
    resp::AppendArrayHeader(reply, slices.has_value() ? 5 : 4);
    resp::AppendArrayHeader(reply, d.num_limits);
    for (int i = 0; i < d.num_limits; ++i) {
      const LimitStatus& st = d.limits[i];
      resp::AppendArrayHeader(reply, 4);
      resp::AppendInteger(reply, st.limit);
      resp::AppendInteger(reply, known ? std::max<int64_t>(0, st.limit - st.remaining) : -1);
      resp::AppendInteger(reply, known ? st.remaining : -1);
      resp::AppendInteger(reply, known ? st.reset_after_ms : -1);
    }
    resp::AppendArrayHeader(reply, limits.size());
    for (const std::string& l : limits) resp::AppendBulk(reply, l);
    resp::AppendInteger(reply, block_left);
    resp::AppendBulk(reply, reason);
    if (slices.has_value()) {
      resp::AppendArrayHeader(reply, 2);
      resp::AppendInteger(reply, slices->held);
      resp::AppendInteger(reply, slices->taken);
    }
  };
  service::LimiterCore::CheckArgs args;
  args.rule = rule;
  args.key = key;
  args.cost = 0;
  args.tier = tier;
  args.ignore_blocks = true;
  Decision d;
  Status s;
  const ReplyTo to = c.To(out);
  if (limiter.Check(args, &d, &s, [&] { return to.Later<Decision>(write); }) ==
      store::Answer::kNow) {
    write(s, d, out);
  }
}

void FgOverride(RespClient& c, const Args& a, std::string* out) {
  const bool set = EqualsIgnoreCase(a[1], "SET");
  const bool get = EqualsIgnoreCase(a[1], "GET");
  const bool del = EqualsIgnoreCase(a[1], "DEL");
  if (!set && !get && !del) {
    return resp::AppendError(out, "syntax error: FG.OVERRIDE SET|GET|DEL rule key ...");
  }
  if ((get || del) && a.size() != 4) {
    return resp::AppendError(out, "syntax error: FG.OVERRIDE GET|DEL rule key");
  }
  if (set && a.size() < 6) {
    return resp::AppendError(out,
                             "syntax error: FG.OVERRIDE SET rule key ttl_ms limit [limit ...]");
  }
  if (!Allowed(c, !get, out)) return;
  service::ControlPlane& control = *c.loop->service().services->control;
  if (get) {
    const auto o = control.GetOverride(a[2], a[3]);
    if (!o) return resp::AppendNullArray(out);
    resp::AppendArrayHeader(out, 3);
    resp::AppendArrayHeader(out, o->limits.size());
    for (const std::string& l : o->limits) resp::AppendBulk(out, l);
    resp::AppendInteger(
        out, o->expires_at_ms == 0
                 ? -1
                 : std::max<int64_t>(0, o->expires_at_ms - c.loop->service().clock().NowMs()));
    resp::AppendBulk(out, o->reason);
    return;
  }
  if (del) return control.DeleteOverride(Who(c), a[2], a[3], ReplyDone(c, out));
  int64_t ttl_ms = 0;
  if (!ParseRespInt(a[4], &ttl_ms) || ttl_ms < 0 || ttl_ms > service::ControlPlane::kMaxTtlMs) {
    return resp::AppendError(out, "ttl_ms must be an integer from 0 (no expiry) to " +
                                      std::to_string(service::ControlPlane::kMaxTtlMs) +
                                      " (366 days)");
  }
  std::vector<std::string> limits(a.begin() + 5, a.end());
  control.SetOverride(Who(c), a[2], a[3], std::move(limits), ttl_ms, "", ReplyOk(c, out));
}

void FgBlock(RespClient& c, const Args& a, std::string* out) {
  int64_t ttl_ms = 0;
  if (!ParseRespInt(a[2], &ttl_ms) || ttl_ms <= 0 || ttl_ms > service::ControlPlane::kMaxTtlMs) {
    return resp::AppendError(out, "ttl_ms must be an integer from 1 to " +
                                      std::to_string(service::ControlPlane::kMaxTtlMs) +
                                      " (366 days): a block always expires");
  }
  std::string_view rule, reason;
  for (size_t i = 3; i < a.size(); i += 2) {
    if (i + 1 >= a.size()) return resp::AppendError(out, "syntax error: option without a value");
    if (EqualsIgnoreCase(a[i], "RULE")) {
      rule = a[i + 1];
    } else if (EqualsIgnoreCase(a[i], "REASON")) {
      reason = a[i + 1];
    } else {
      return resp::AppendError(out, "syntax error: unknown option '" + std::string(a[i]) +
                                        "' (expected RULE or REASON)");
    }
  }
  if (!Allowed(c, true, out)) return;
  c.loop->service().services->control->Block(Who(c), a[1], rule, ttl_ms, std::string(reason),
                                             ReplyOk(c, out));
}

void FgUnblock(RespClient& c, const Args& a, std::string* out) {
  std::string_view rule;
  if (a.size() == 4 && EqualsIgnoreCase(a[2], "RULE")) {
    rule = a[3];
  } else if (a.size() != 2) {
    return resp::AppendError(out, "syntax error: FG.UNBLOCK key [RULE r]");
  }
  if (!Allowed(c, true, out)) return;
  service::ControlPlane& control = *c.loop->service().services->control;
  // What Unblock removes: the key's blocks on `rule` (or all of them).
  int64_t n = 0;
  for (const service::BlockRecord& b : control.BlocksOf(a[1])) {
    n += rule.empty() || b.rule == rule ? 1 : 0;
  }
  auto later =
      c.To(out).Later<std::string>([n](const Status& s, const std::string&, std::string* reply) {
        if (s.code() == StatusCode::kNotFound) return resp::AppendInteger(reply, 0);
        if (!s.ok()) return resp::AppendError(reply, s.message());
        resp::AppendInteger(reply, n);
      });
  control.Unblock(Who(c), a[1], rule,
                  [later](const Status& s, const std::string& json) { later(s, json); });
}

void FgRefund(RespClient& c, const Args& a, std::string* out) {
  int64_t cost = 0;
  if (!ParseRespInt(a[3], &cost) || cost < 1 || cost > kMaxLimitCount) {
    return resp::AppendError(out,
                             "cost must be an integer from 1 to " + std::to_string(kMaxLimitCount));
  }
  if (!Allowed(c, true, out)) return;
  // FG.CHECK's reply, as clients parse it: the state after. What each
  // limit gave back is in the HTTP route's answer.
  c.loop->service().limiter->Refund(
      {a[1], a[2], cost}, c.To(out).Later<core::RefundResult>(
                              [](const Status& s, const core::RefundResult& r, std::string* reply) {
                                if (!s.ok()) return resp::AppendError(reply, s.message());
                                AppendCheckReply(r.after, false, reply);
                              }));
}

}  // namespace floodgate::server
