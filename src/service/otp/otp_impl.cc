// Otp: the issue and verify flows over either store, the secret, the
// delivery hook and the counters. The stores do the per-subject bookkeeping
// atomically (store/otp_policy.h); this file adds the cryptography and
// the comparison, which stays here so that it is constant-time in C++ on
// both stores.
#include "floodgate/otp.h"

#include <atomic>
#include <cstdlib>
#include <future>
#include <utility>

#include "service/delivery/webhook_queue.h"
#include "service/otp/otp_codes.h"
#include "service/otp/otp_impl.h"
#include "store/otp_policy.h"

namespace floodgate {
namespace {

void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// The gateway's body: {"subject":"...","code":"...","expires_in_ms":N}. A
// checked subject is UTF-8 without control characters and a code is digits,
// so only quotes and backslashes need escaping.
std::string DeliveryBody(std::string_view subject, std::string_view code, int64_t expires_in_ms) {
  std::string body = "{\"subject\":\"";
  for (char c : subject) {
    if (c == '"' || c == '\\') body += '\\';
    body += c;
  }
  body += "\",\"code\":\"";
  body.append(code);
  body += "\",\"expires_in_ms\":" + std::to_string(expires_in_ms) + "}";
  return body;
}

OtpPolicy PolicyOf(const OtpConfig& c) {
  OtpPolicy p;
  p.code_ttl_ms = c.ttl_ms;
  p.max_live_codes = c.max_live_codes;
  p.issue_count = c.issue_limit.count;
  p.issue_period_ms = c.issue_limit.PeriodMs();
  p.verify_count = c.verify_limit.count;
  p.verify_period_ms = c.verify_limit.PeriodMs();
  return p;
}

}  // namespace

struct Otp::Impl {
  Impl(const OtpConfig& c, store::OtpStore& s) : config(c), policy(PolicyOf(c)), store(s) {}

  // A failed store step: counted, then passed on.
  void BackendError(const Status& s) {
    if (s.code() != StatusCode::kResourceExhausted) Bump(backend_errors);
  }

  void FinishIssue(const std::string& subject, const std::string& code, const Status& s,
                   const OtpIssueOutcome& out, const IssueCallback& done) {
    OtpIssueResult r;
    if (!s.ok() || !out.issued) {
      if (delivery != nullptr) delivery->Unreserve();
      if (!s.ok()) {
        BackendError(s);
        return done(s, r);
      }
      Bump(issue_limited);
      r.retry_after_ms = out.retry_after_ms;
      return done(s, r);
    }
    Bump(issued);
    r.issued = true;
    r.expires_in_ms = out.expires_at_ms - out.now_ms;
    if (delivery != nullptr) {
      delivery->Push(DeliveryBody(subject, code, r.expires_in_ms));
      r.queued = true;
    } else {
      r.code = code;
    }
    done(s, r);
  }

  void FinishVerify(const Status& s, bool consumed, const VerifyCallback& done) {
    if (!s.ok()) {
      BackendError(s);
      return done(s, OtpVerifyResult{});
    }
    Bump(consumed ? verified_valid : verified_invalid);
    OtpVerifyResult r;
    r.valid = consumed;
    done(s, r);
  }

  // After the attempt was recorded: compare, then consume on a match.
  void AfterAttempt(const std::string& subject, const std::string& hmac, const Status& s,
                    const OtpAttemptOutcome& a, VerifyCallback done) {
    if (!s.ok()) {
      BackendError(s);
      return done(s, OtpVerifyResult{});
    }
    if (!a.allowed) {
      Bump(verify_limited);
      OtpVerifyResult r;
      r.limited = true;
      r.retry_after_ms = a.retry_after_ms;
      return done(s, r);
    }
    // Every live code is compared, in constant time each; no early exit.
    bool match = false;
    for (const std::string& live : a.codes) match |= service::ConstantTimeEqual(live, hmac);
    if (!match) return FinishVerify(Status::Ok(), false, done);
    // Consuming is the step that decides between racing verifications:
    // only the one that removes the code is valid.
    bool consumed = false;
    Status cs;
    if (store.Consume(subject, hmac, &consumed, &cs, [&]() -> store::Done<bool> {
          return
              [this, done = std::move(done)](const Status& s, bool c) { FinishVerify(s, c, done); };
        }) == store::Answer::kNow) {
      FinishVerify(cs, consumed, done);
    }
  }

  const OtpConfig config;
  const OtpPolicy policy;
  store::OtpStore& store;
  bool enabled = false;
  std::string secret;
  std::unique_ptr<service::WebhookQueue> delivery;  // null without a delivery URL
  std::atomic<int64_t> issued{0}, issue_limited{0}, verified_valid{0}, verified_invalid{0},
      verify_limited{0}, backend_errors{0};
};

Otp::Otp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Otp::~Otp() = default;

bool Otp::enabled() const { return impl_->enabled; }

namespace {

Status NotConfigured() {
  return NotFoundError("OTP is not configured: the config has no otp section");
}

}  // namespace

void Otp::IssueAsync(std::string_view subject, IssueCallback done) {
  Impl& impl = *impl_;
  if (!impl.enabled) return done(NotConfigured(), OtpIssueResult{});
  if (Status s = service::CheckSubject(subject); !s.ok()) return done(s, OtpIssueResult{});
  Result<std::string> code = service::GenerateCode(impl.config.digits);
  Result<std::string> event = service::RandomEventId();
  if (!code.ok() || !event.ok()) {
    return done(code.ok() ? event.status() : code.status(), OtpIssueResult{});
  }
  if (impl.delivery != nullptr && !impl.delivery->TryReserve()) {
    return done(UnavailableError("the delivery queue is full: " +
                                 std::to_string(impl.config.delivery.queue_size) +
                                 " codes are waiting for the gateway (otp.delivery.queue_size)"),
                OtpIssueResult{});
  }
  const std::string hmac = service::CodeHmac(impl.secret, subject, *code);
  OtpIssueOutcome out;
  Status s;
  if (impl.store.Issue(
          subject, hmac, *event, impl.policy, &out, &s, [&]() -> store::Done<OtpIssueOutcome> {
            return [&impl, subject = std::string(subject), code = *code, done = std::move(done)](
                       const Status& st, const OtpIssueOutcome& o) {
              impl.FinishIssue(subject, code, st, o, done);
            };
          }) == store::Answer::kNow) {
    impl.FinishIssue(std::string(subject), *code, s, out, done);
  }
}

void Otp::VerifyAsync(std::string_view subject, std::string_view code, VerifyCallback done) {
  Impl& impl = *impl_;
  if (!impl.enabled) return done(NotConfigured(), OtpVerifyResult{});
  if (Status s = service::CheckSubject(subject); !s.ok()) return done(s, OtpVerifyResult{});
  if (!service::IsWellFormedCode(code, impl.config.digits)) {
    return done(InvalidArgumentError("code must be " + std::to_string(impl.config.digits) +
                                     " digits (0-9)"),
                OtpVerifyResult{});
  }
  Result<std::string> event = service::RandomEventId();
  if (!event.ok()) return done(event.status(), OtpVerifyResult{});
  std::string hmac = service::CodeHmac(impl.secret, subject, code);
  OtpAttemptOutcome a;
  Status s;
  if (impl.store.Attempt(
          subject, *event, impl.policy, &a, &s, [&]() -> store::Done<OtpAttemptOutcome> {
            return [&impl, subject = std::string(subject), hmac, done = std::move(done)](
                       const Status& st, const OtpAttemptOutcome& o) {
              impl.AfterAttempt(subject, hmac, st, o, done);
            };
          }) == store::Answer::kNow) {
    impl.AfterAttempt(std::string(subject), hmac, s, a, std::move(done));
  }
}

Result<OtpIssueResult> Otp::Issue(std::string_view subject) {
  std::promise<std::pair<Status, OtpIssueResult>> promise;
  IssueAsync(subject, [&promise](const Status& s, const OtpIssueResult& r) {
    promise.set_value({s, r});
  });
  auto [status, result] = promise.get_future().get();
  if (!status.ok()) return status;
  return result;
}

Result<OtpVerifyResult> Otp::Verify(std::string_view subject, std::string_view code) {
  std::promise<std::pair<Status, OtpVerifyResult>> promise;
  VerifyAsync(subject, code, [&promise](const Status& s, const OtpVerifyResult& r) {
    promise.set_value({s, r});
  });
  auto [status, result] = promise.get_future().get();
  if (!status.ok()) return status;
  return result;
}

std::string Otp::IssueLimitText() const { return impl_->config.issue_limit.ToString(); }
std::string Otp::VerifyLimitText() const { return impl_->config.verify_limit.ToString(); }

Otp::Stats Otp::GetStats() const {
  const Impl& impl = *impl_;
  Stats s;
  s.issued = impl.issued.load(std::memory_order_relaxed);
  s.issue_limited = impl.issue_limited.load(std::memory_order_relaxed);
  s.verified_valid = impl.verified_valid.load(std::memory_order_relaxed);
  s.verified_invalid = impl.verified_invalid.load(std::memory_order_relaxed);
  s.verify_limited = impl.verify_limited.load(std::memory_order_relaxed);
  s.backend_errors = impl.backend_errors.load(std::memory_order_relaxed);
  if (impl.delivery != nullptr) {
    const service::WebhookQueue::Stats d = impl.delivery->GetStats();
    s.delivered = d.sent;
    s.delivery_failed = d.failed;
    s.delivery_dropped = d.dropped;
    s.delivery_queued = d.queued;
  }
  return s;
}

namespace service {

namespace {

// The value of environment variable `name`, or "" when unset.
std::string Getenv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

Result<std::unique_ptr<Otp>> MakeOtp(const OtpConfig& config, store::OtpStore& store,
                                     const Clock& clock) {
  auto impl = std::make_unique<Otp::Impl>(config, store);
  if (!config.enabled) return std::make_unique<Otp>(std::move(impl));
  // Messages name the variable, never the secret.
  std::string secret = config.secret;
  if (secret.empty()) secret = Getenv(config.secret_env);
  if (secret.empty()) {
    return InvalidArgumentError("otp: no secret: the environment variable " + config.secret_env +
                                " (otp.secret_env) is not set or empty; OTP will not run with a "
                                "default secret");
  }
  if (secret.size() < 16) {
    return InvalidArgumentError("otp: the secret in " + config.secret_env + " is " +
                                std::to_string(secret.size()) +
                                " bytes; use at least 16 random bytes");
  }
  impl->secret = std::move(secret);
  if (!config.delivery.url.empty()) {
    Result<HttpUrl> url = ParseHttpUrl(config.delivery.url);
    if (!url.ok()) return InvalidArgumentError("otp.delivery.url: " + url.status().message());
    WebhookQueue::Options options;
    options.url = *std::move(url);
    options.timeout_ms = config.delivery.timeout_ms;
    options.capacity = static_cast<size_t>(config.delivery.queue_size);
    options.what = "otp gateway " + options.url.HostHeader();
    options.clock = &clock;
    if (!config.delivery.auth_header_env.empty()) {
      const std::string auth = Getenv(config.delivery.auth_header_env);
      if (auth.empty()) {
        return InvalidArgumentError("otp.delivery: the environment variable " +
                                    config.delivery.auth_header_env +
                                    " (auth_header_env) is not set or empty");
      }
      options.headers.emplace_back("Authorization", auth);
    }
    impl->delivery = std::make_unique<WebhookQueue>(std::move(options));
  }
  impl->enabled = true;
  return std::make_unique<Otp>(std::move(impl));
}

}  // namespace service
}  // namespace floodgate
