// The feature stores' sections: `sets` and `otp` (sets_and_otp_section.h).
#include "config/sets_and_otp_section.h"

#include <cstdint>
#include <string>
#include <utility>

namespace floodgate::config {
namespace {

// Expiring sets keep every live member: a bound per set, and on TTLs.
constexpr int64_t kMaxSetMembers = 1'000'000;
constexpr int64_t kMaxSetTtlMs = 366 * kDayMs;
// The OTP limits keep one event per issue or attempt in the window.
constexpr int64_t kMaxOtpLimitCount = 1000;
constexpr int64_t kMaxOtpPeriodMs = 366 * kDayMs;
constexpr int64_t kMaxOtpCodeTtlMs = kDayMs;
constexpr int64_t kMaxOtpLiveCodes = 100;

// An OTP limit: one "N/period" string, N small (each event is kept).
Result<Limit> OtpLimit(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& field) {
  if (!value.IsScalar()) return fields.WrongType(key, value, field, "a limit like 3/5m");
  Result<Limit> limit = ParseLimit(value.Scalar());
  if (!limit.ok()) return fields.Fail(value.Mark(), limit.status().message(), value.Scalar());
  if (limit->count > kMaxOtpLimitCount || limit->PeriodMs() > kMaxOtpPeriodMs) {
    return fields.Fail(value.Mark(),
                       "'" + field + "' must allow at most " + std::to_string(kMaxOtpLimitCount) +
                           " per period of at most 366 days (each one is kept until it ages out)",
                       value.Scalar());
  }
  return *limit;
}

Status ParseDelivery(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                     OtpDeliveryConfig& delivery) {
  if (!value.IsMap()) return fields.WrongType(key, value, "otp.delivery", "a map with a url");
  bool has_url = false;
  Status s = fields.ForEachEntry(
      value, "key",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        if (name == "url") {
          Result<std::string> url = fields.HttpUrl(k, v, "otp.delivery.url");
          if (!url.ok()) return url.status();
          delivery.url = *std::move(url);
          has_url = true;
        } else if (name == "timeout_ms") {
          Result<int64_t> n = fields.Int(k, v, "otp.delivery.timeout_ms", 1, 60'000);
          if (!n.ok()) return n.status();
          delivery.timeout_ms = *n;
        } else if (name == "queue_size") {
          Result<int64_t> n = fields.Int(k, v, "otp.delivery.queue_size", 1, 1'000'000);
          if (!n.ok()) return n.status();
          delivery.queue_size = *n;
        } else if (name == "auth_header_env") {
          Result<std::string> variable =
              fields.EnvironmentVariable(k, v, "otp.delivery.auth_header_env");
          if (!variable.ok()) return variable.status();
          delivery.auth_header_env = *std::move(variable);
        } else {
          return fields.Fail(k.Mark(),
                             "unknown key '" + name +
                                 "' in otp.delivery; expected url, timeout_ms, queue_size or "
                                 "auth_header_env",
                             name);
        }
        return Status::Ok();
      });
  if (!s.ok()) return s;
  if (!has_url) return fields.Fail(key.Mark(), "'otp.delivery' needs a url", "delivery");
  return Status::Ok();
}

// Messages never quote a secret: the file names a variable, never a value.
Status ParseOtpEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                     const YAML::Node& value, OtpConfig& otp) {
  if (name == "digits") {
    Result<int64_t> n = fields.Int(key, value, "otp.digits", 4, 10);
    if (!n.ok()) return n.status();
    otp.digits = static_cast<int>(*n);
  } else if (name == "ttl") {
    Result<int64_t> ms = fields.Duration(key, value, "otp.ttl", 1000, kMaxOtpCodeTtlMs);
    if (!ms.ok()) return ms.status();
    otp.ttl_ms = *ms;
  } else if (name == "issue_limit" || name == "verify_limit") {
    Result<Limit> limit = OtpLimit(fields, key, value, "otp." + name);
    if (!limit.ok()) return limit.status();
    (name == "issue_limit" ? otp.issue_limit : otp.verify_limit) = *limit;
  } else if (name == "max_live_codes") {
    Result<int64_t> n = fields.Int(key, value, "otp.max_live_codes", 1, kMaxOtpLiveCodes);
    if (!n.ok()) return n.status();
    otp.max_live_codes = *n;
  } else if (name == "secret_env") {
    Result<std::string> variable = fields.EnvironmentVariable(key, value, "otp.secret_env");
    if (!variable.ok()) return variable.status();
    otp.secret_env = *std::move(variable);
  } else if (name == "secret") {
    return fields.Fail(key.Mark(),
                       "the OTP secret does not go in the file: put it in an environment variable "
                       "and name that with 'otp.secret_env'",
                       name);
  } else if (name == "delivery") {
    return ParseDelivery(fields, key, value, otp.delivery);
  } else {
    return fields.Fail(key.Mark(),
                       "unknown key '" + name +
                           "' in otp; expected digits, ttl, issue_limit, verify_limit, "
                           "max_live_codes, secret_env or delivery",
                       name);
  }
  return Status::Ok();
}

}  // namespace

Status ParseSets(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                 SetsConfig& sets) {
  sets.in_file = true;
  return fields.ForEachInSection(
      key, value, "sets",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        if (name == "max_members") {
          Result<int64_t> n = fields.Int(k, v, "sets.max_members", 1, kMaxSetMembers);
          if (!n.ok()) return n.status();
          sets.max_members = *n;
        } else if (name == "max_ttl") {
          Result<int64_t> ms = fields.Duration(k, v, "sets.max_ttl", 1, kMaxSetTtlMs);
          if (!ms.ok()) return ms.status();
          sets.max_ttl_ms = *ms;
        } else {
          return fields.Fail(k.Mark(),
                             "unknown key '" + name + "' in sets; expected max_members or max_ttl",
                             name);
        }
        return Status::Ok();
      });
}

Status ParseOtp(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                OtpConfig& otp) {
  otp.enabled = true;  // "otp:" alone too: every default
  return fields.ForEachInSection(
      key, value, "otp", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseOtpEntry(fields, name, k, v, otp);
      });
}

}  // namespace floodgate::config
