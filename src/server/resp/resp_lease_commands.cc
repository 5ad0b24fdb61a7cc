// The leases' RESP commands: arguments to the Leases room's calls, the
// answer (now on the embedded store, later through the reply queue on
// Redis or after a wait) to a RESP reply.
#include "server/resp/resp_lease_commands.h"

#include <string>
#include <string_view>

#include "common/text.h"
#include "protocol/resp/writer.h"
#include "server/context/error_labels.h"

namespace floodgate::server {
namespace {

using service::Leases;

void ReplyError(LoopContext& loop, const Status& s, std::string* out) {
  loop.service().metrics->CountError(LabelError(Operation::kCheck, s).kind);
  resp::AppendError(out, s.message());
}

void ReplyAcquire(LoopContext& loop, std::string_view rule, std::string_view key, const Status& s,
                  const Leases::LeaseAnswer& a, std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  loop.CountAcquire(rule, key, a.ok);
  resp::AppendArrayHeader(out, 5);
  resp::AppendInteger(out, a.ok ? 1 : 0);
  resp::AppendBulk(out, a.ok ? std::string_view(a.lease) : std::string_view());
  resp::AppendInteger(out, a.in_flight);
  resp::AppendInteger(out, a.limit);
  resp::AppendInteger(out, a.ms);
}

void ReplyFlag(LoopContext& loop, const Status& s, const Leases::LeaseAnswer& a, std::string* out) {
  if (!s.ok()) return ReplyError(loop, s, out);
  resp::AppendInteger(out, a.ok ? 1 : 0);
}

// Reads "TTL ms", "TIER t" and (when `wait` is given) "WAIT ms" from
// a[from..]; false with the error in `out`.
bool ParseLeaseOptions(const Args& a, size_t from, Leases::LeaseArgs* args, int64_t* wait,
                       std::string* out) {
  for (size_t i = from; i < a.size(); ++i) {
    const bool is_ttl = text::EqualsIgnoreCase(a[i], "TTL");
    const bool is_tier = wait != nullptr && text::EqualsIgnoreCase(a[i], "TIER");
    const bool is_wait = wait != nullptr && text::EqualsIgnoreCase(a[i], "WAIT");
    if (!is_ttl && !is_tier && !is_wait) {
      resp::AppendError(out, "syntax error: unknown option '" + std::string(a[i]) +
                                 (wait != nullptr ? "' (expected TTL ms, TIER t or WAIT ms)"
                                                  : "' (expected TTL ms)"));
      return false;
    }
    if (i + 1 >= a.size()) {
      resp::AppendError(out, "syntax error: option '" + std::string(a[i]) + "' needs a value");
      return false;
    }
    ++i;
    if (is_tier) {
      args->tier = a[i];
    } else if (is_wait) {
      if (!ParseWaitMs(a[i], wait, out)) return false;
    } else if (!ParseRespInt(a[i], &args->ttl_ms) || args->ttl_ms < 1 ||
               args->ttl_ms > kMaxLeaseTtlMs) {
      resp::AppendError(out, "TTL must be an integer from 1 to " + std::to_string(kMaxLeaseTtlMs) +
                                 " ms, got '" + std::string(a[i]) + "'");
      return false;
    }
  }
  return true;
}

}  // namespace

// FG.ACQUIRE rule key [TTL ms] [TIER t] [WAIT ms]
void FgAcquire(RespClient& c, const Args& a, std::string* out) {
  Leases::LeaseArgs args{a[1], a[2]};
  int64_t wait_ms = 0;
  if (!ParseLeaseOptions(a, 3, &args, &wait_ms, out)) {
    c.loop->service().metrics->CountError("bad_request");
    return;
  }
  auto done = c.To(out).Later<Leases::LeaseAnswer>(
      [loop = c.loop, rule = std::string(a[1]), key = std::string(a[2])](
          const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
        ReplyAcquire(*loop, rule, key, s, r, reply);
      });
  if (wait_ms > 0) {
    c.waited = true;
    c.loop->service().services->waiting->Acquire(args, {wait_ms, static_cast<uint64_t>(c.id)},
                                                 std::move(done));
    return;
  }
  c.loop->service().services->leases->Acquire(args, std::move(done));
}

// FG.RELEASE rule key lease
void FgRelease(RespClient& c, const Args& a, std::string* out) {
  Leases::LeaseArgs args{a[1], a[2], {}, a[3]};
  c.loop->service().services->leases->Release(
      args, c.To(out).Later<Leases::LeaseAnswer>(
                [loop = c.loop](const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
                  ReplyFlag(*loop, s, r, reply);
                }));
}

// FG.RENEW rule key lease [TTL ms]
void FgRenew(RespClient& c, const Args& a, std::string* out) {
  Leases::LeaseArgs args{a[1], a[2], {}, a[3]};
  if (!ParseLeaseOptions(a, 4, &args, nullptr, out)) {
    c.loop->service().metrics->CountError("bad_request");
    return;
  }
  c.loop->service().services->leases->Renew(
      args, c.To(out).Later<Leases::LeaseAnswer>(
                [loop = c.loop](const Status& s, const Leases::LeaseAnswer& r, std::string* reply) {
                  ReplyFlag(*loop, s, r, reply);
                }));
}

}  // namespace floodgate::server
