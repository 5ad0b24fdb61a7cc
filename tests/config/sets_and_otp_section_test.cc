// The feature stores' sections (config/sets_and_otp_section.h): `sets` and
// `otp`, their values and defaults, and each mistake's exact message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::L;
using testing::Parse;

TEST(ParseConfigTest, SetsAndOtpDefaults) {
  const Config c = Parse("");
  EXPECT_EQ(c.sets.max_members, 1000);
  EXPECT_EQ(c.sets.max_ttl_ms, 30LL * 86'400'000);
  EXPECT_FALSE(c.otp.enabled);
  const Config bare = Parse("otp:\n");
  EXPECT_TRUE(bare.otp.enabled);
  EXPECT_EQ(bare.otp.digits, 6);
  EXPECT_EQ(bare.otp.max_live_codes, 3);
  EXPECT_TRUE(bare.otp.delivery.url.empty());
}

TEST(ParseConfigTest, SetsAndOtpEveryField) {
  const Config c = Parse(R"(
sets: { max_members: 50, max_ttl: 2h }
otp:
  digits: 8
  ttl: 90s
  issue_limit: 5/1h
  verify_limit: 10/30m
  max_live_codes: 1
  secret_env: MY_OTP_KEY
  delivery:
    url: http://127.0.0.1:9000/sms?x=1
    timeout_ms: 500
    queue_size: 10
    auth_header_env: SMS_AUTH
)");
  EXPECT_EQ(c.sets.max_members, 50);
  EXPECT_EQ(c.sets.max_ttl_ms, 7'200'000);
  EXPECT_EQ(c.otp.digits, 8);
  EXPECT_EQ(c.otp.ttl_ms, 90'000);
  EXPECT_EQ(c.otp.issue_limit, L(5, 1, TimeUnit::kHour));
  EXPECT_EQ(c.otp.verify_limit, L(10, 30, TimeUnit::kMinute));
  EXPECT_EQ(c.otp.max_live_codes, 1);
  EXPECT_EQ(c.otp.secret_env, "MY_OTP_KEY");
  EXPECT_EQ(c.otp.delivery.url, "http://127.0.0.1:9000/sms?x=1");
  EXPECT_EQ(c.otp.delivery.timeout_ms, 500);
  EXPECT_EQ(c.otp.delivery.queue_size, 10);
  EXPECT_EQ(c.otp.delivery.auth_header_env, "SMS_AUTH");
  EXPECT_EQ(
      DescribeConfig(c),
      "store: memory\nrules (0):\nsets: max_members=50, max_ttl=7200000ms\n"
      "otp: digits=8, ttl=90000ms, issue_limit=5/hour, verify_limit=10/30m, max_live_codes=1, "
      "secret_env=MY_OTP_KEY, delivery=http://127.0.0.1:9000/sms?x=1\n");
}

TEST(ParseConfigErrorTest, SetsAndOtp) {
  EXPECT_EQ(Error("sets: { max_members: 0 }\n"),
            "test.yaml:1:22: 'sets.max_members' must be an integer between 1 and 1000000 "
            "(near '0')");
  EXPECT_EQ(Error("sets:\n  max_ttl: 10\n"),
            "test.yaml:2:12: 'sets.max_ttl' must be a number and a unit, e.g. 500ms, 30s, 5m, 1h "
            "or 7d (near '10')");
  EXPECT_EQ(Error("sets:\n  max_ttl: 2y\n"),
            "test.yaml:2:12: 'sets.max_ttl' must be from 1ms to 366d (near '2y')");
  EXPECT_EQ(Error("sets:\n  max_size: 3\n"),
            "test.yaml:2:3: unknown key 'max_size' in sets; expected max_members or max_ttl "
            "(near 'max_size')");
  EXPECT_EQ(Error("otp: [1]\n"), "test.yaml:1:6: 'otp' must be a map, not a list (near 'otp')");
  EXPECT_EQ(Error("otp:\n  digits: 3\n"),
            "test.yaml:2:11: 'otp.digits' must be an integer between 4 and 10 (near '3')");
  EXPECT_EQ(Error("otp:\n  digits: six\n"),
            "test.yaml:2:11: 'otp.digits' must be an integer between 4 and 10 (near 'six')");
  EXPECT_EQ(Error("otp:\n  ttl: 500ms\n"),
            "test.yaml:2:8: 'otp.ttl' must be from 1s to 1d (near '500ms')");
  EXPECT_EQ(Error("otp:\n  ttl: 5 minutes\n"),
            "test.yaml:2:8: 'otp.ttl' must be a number and a unit, e.g. 500ms, 30s, 5m, 1h or 7d "
            "(near '5 minutes')");
  EXPECT_EQ(Error("otp:\n  issue_limit: 3/5x\n"),
            "test.yaml:2:16: limit \"3/5x\": unknown unit \"x\" (expected ms, s (sec, second), m "
            "(min, minute), h (hr, hour), d (day), w (wk, week), mo (month) or y (yr, year); "
            "plurals accepted) (near '3/5x')");
  EXPECT_EQ(Error("otp:\n  verify_limit: 5000/m\n"),
            "test.yaml:2:17: 'otp.verify_limit' must allow at most 1000 per period of at most 366 "
            "days (each one is kept until it ages out) (near '5000/m')");
  EXPECT_EQ(Error("otp:\n  issue_limit: [3/5m]\n"),
            "test.yaml:2:16: 'otp.issue_limit' must be a limit like 3/5m, not a list "
            "(near 'issue_limit')");
  EXPECT_EQ(Error("otp:\n  max_live_codes: 0\n"),
            "test.yaml:2:19: 'otp.max_live_codes' must be an integer between 1 and 100 (near '0')");
  EXPECT_EQ(Error("otp:\n  secret_env: 1BAD\n"),
            "test.yaml:2:15: 'otp.secret_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near '1BAD')");
  EXPECT_EQ(Error("otp:\n  secret: hunter2\n"),
            "test.yaml:2:3: the OTP secret does not go in the file: put it in an environment "
            "variable and name that with 'otp.secret_env' (near 'secret')");
  EXPECT_EQ(Error("otp:\n  delivery: { timeout_ms: 5 }\n"),
            "test.yaml:2:3: 'otp.delivery' needs a url (near 'delivery')");
  EXPECT_EQ(Error("otp:\n  delivery: { url: 'https://sms.example/send' }\n"),
            "test.yaml:2:20: 'otp.delivery.url': URL \"https://sms.example/send\": https is not "
            "supported; deliver through a local relay on http:// "
            "(near 'https://sms.example/send')");
  EXPECT_EQ(Error("otp:\n  delivery: { url: 'http://h:99999/' }\n"),
            "test.yaml:2:20: 'otp.delivery.url': URL \"http://h:99999/\": port must be between 1 "
            "and 65535 (near 'http://h:99999/')");
  EXPECT_EQ(Error("otp:\n  delivery: { url: http://h/, retries: 3 }\n"),
            "test.yaml:2:31: unknown key 'retries' in otp.delivery; expected url, timeout_ms, "
            "queue_size or auth_header_env (near 'retries')");
  EXPECT_EQ(Error("otp:\n  pin_length: 6\n"),
            "test.yaml:2:3: unknown key 'pin_length' in otp; expected digits, ttl, issue_limit, "
            "verify_limit, max_live_codes, secret_env or delivery (near 'pin_length')");
}

}  // namespace
}  // namespace floodgate
