// Otp through the Limiter on the embedded store and a ManualClock: the
// secret is required, issue and verify, the code TTL at 999/1000 ms edges,
// the issue limit with its retry, brute force refused before any
// comparison, replay, the live-code cap, a success clearing the attempts,
// bad input changing nothing, racing verifications (exactly one valid), the
// delivery hook posting to a real HTTP receiver, and the counters.
#include "floodgate/otp.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/limiter.h"
#include "testing/http_receiver.h"

namespace floodgate {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr char kSecret[] = "test-secret-0123456789";
constexpr char kPhone[] = "+15550100";

Config MakeConfig(const std::string& yaml) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;
  config.otp.secret = kSecret;
  return config;
}

std::unique_ptr<Limiter> MakeLimiter(const std::string& yaml, const Clock& clock) {
  auto l = Limiter::Create(MakeConfig(yaml), clock);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

constexpr char kOtp[] =
    "otp: { ttl: 5m, issue_limit: 3/5m, verify_limit: 5/15m, max_live_codes: 3 }\n";

std::string IssueCode(Otp& otp, std::string_view subject = kPhone) {
  auto r = otp.Issue(subject);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "";
  EXPECT_TRUE(r->issued);
  return r->code;
}

bool Valid(Otp& otp, std::string_view code, std::string_view subject = kPhone) {
  auto r = otp.Verify(subject, code);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r.ok() && r->limited);
  return r.ok() && r->valid;
}

// A well-formed code that is not `code`.
std::string Other(const std::string& code) {
  std::string other = code;
  other[0] = code[0] == '9' ? '0' : static_cast<char>(code[0] + 1);
  return other;
}

TEST(OtpTest, RequiresASecret) {
  ManualClock clock(kT0);
  Config config = MakeConfig(kOtp);
  config.otp.secret.clear();
  config.otp.secret_env = "FLOODGATE_TEST_OTP_SECRET";
  ::unsetenv("FLOODGATE_TEST_OTP_SECRET");
  auto missing = Limiter::Create(config, clock);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "otp: no secret: the environment variable FLOODGATE_TEST_OTP_SECRET (otp.secret_env) "
            "is not set or empty; OTP will not run with a default secret");
  ::setenv("FLOODGATE_TEST_OTP_SECRET", "short", 1);
  auto weak = Limiter::Create(config, clock);
  ASSERT_FALSE(weak.ok());
  EXPECT_NE(weak.status().message().find("is 5 bytes; use at least 16"), std::string::npos);
  EXPECT_EQ(weak.status().message().find("short"), std::string::npos);  // never quoted
  ::setenv("FLOODGATE_TEST_OTP_SECRET", kSecret, 1);
  auto ok = Limiter::Create(config, clock);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE((*ok)->otp().enabled());
  ::unsetenv("FLOODGATE_TEST_OTP_SECRET");
}

TEST(OtpTest, DisabledWithoutASection) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("", clock);
  EXPECT_FALSE(limiter->otp().enabled());
  auto r = limiter->otp().Issue(kPhone);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "OTP is not configured: the config has no otp section");
  EXPECT_EQ(limiter->otp().Verify(kPhone, "123456").status().code(), StatusCode::kNotFound);
}

TEST(OtpTest, IssueVerifyReplay) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  auto issued = otp.Issue(kPhone);
  ASSERT_TRUE(issued.ok());
  EXPECT_TRUE(issued->issued);
  EXPECT_FALSE(issued->queued);
  EXPECT_EQ(issued->code.size(), 6u);
  EXPECT_EQ(issued->expires_in_ms, 300'000);
  EXPECT_FALSE(Valid(otp, Other(issued->code)));
  EXPECT_FALSE(Valid(otp, issued->code, "+15550199"));  // another subject's code
  EXPECT_TRUE(Valid(otp, issued->code));
  EXPECT_FALSE(Valid(otp, issued->code));  // single use: a replay fails
  const Otp::Stats s = otp.GetStats();
  EXPECT_EQ(s.issued, 1);
  EXPECT_EQ(s.verified_valid, 1);
  EXPECT_EQ(s.verified_invalid, 3);
}

TEST(OtpTest, CodeTtlEdges) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  const std::string a = IssueCode(otp);
  clock.SetMs(kT0 + 299'999);
  EXPECT_TRUE(Valid(otp, a));  // 1 ms before its expiry
  clock.SetMs(kT0 + 400'000);  // the issue above aged out of the 5-minute window
  const std::string b = IssueCode(otp);
  clock.SetMs(kT0 + 400'000 + 300'000);
  EXPECT_FALSE(Valid(otp, b));  // at its expiry: gone
}

TEST(OtpTest, IssueLimitWithRetryAfter) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  IssueCode(otp);
  clock.AdvanceMs(1000);
  IssueCode(otp);
  IssueCode(otp);
  auto refused = otp.Issue(kPhone);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->issued);
  EXPECT_TRUE(refused->code.empty());
  EXPECT_EQ(refused->retry_after_ms, 299'000);
  IssueCode(otp, "+15550101");  // other subjects are not limited
  clock.SetMs(kT0 + 299'999);
  EXPECT_FALSE(otp.Issue(kPhone)->issued);
  clock.SetMs(kT0 + 300'000);
  EXPECT_TRUE(otp.Issue(kPhone)->issued);
  EXPECT_EQ(otp.GetStats().issue_limited, 2);
}

TEST(OtpTest, BruteForceIsRefusedBeforeAnyComparison) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  const std::string code = IssueCode(otp);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(Valid(otp, Other(code))) << i;
  // Past the limit even the right code is refused: nothing was compared.
  auto r = otp.Verify(kPhone, code);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->limited);
  EXPECT_FALSE(r->valid);
  EXPECT_EQ(r->retry_after_ms, 900'000);
  // The code was not consumed: once an attempt ages out it still works.
  clock.SetMs(kT0 + 299'999);
  EXPECT_TRUE(otp.Verify(kPhone, code)->limited);
  // (the code's TTL ends before the attempt window: a new one is needed)
  clock.SetMs(kT0 + 900'000);
  const std::string fresh = IssueCode(otp);
  EXPECT_TRUE(Valid(otp, fresh));
  EXPECT_EQ(otp.GetStats().verify_limited, 2);
}

TEST(OtpTest, ASuccessClearsTheAttemptCount) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  const std::string code = IssueCode(otp);
  for (int i = 0; i < 4; ++i) Valid(otp, Other(code));
  EXPECT_TRUE(Valid(otp, code));
  const std::string next = IssueCode(otp);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Valid(otp, Other(next)));
  EXPECT_TRUE(Valid(otp, next));  // the 5th attempt since the success
}

TEST(OtpTest, TheLiveCodeCapDropsTheOldest) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("otp: { issue_limit: 10/5m, max_live_codes: 2 }\n", clock);
  Otp& otp = limiter->otp();
  const std::string first = IssueCode(otp);
  clock.AdvanceMs(1);
  const std::string second = IssueCode(otp);
  clock.AdvanceMs(1);
  const std::string third = IssueCode(otp);
  if (first != second && first != third) {
    EXPECT_FALSE(Valid(otp, first));
  }
  EXPECT_TRUE(Valid(otp, third));
  // The success consumed the subject's other live code too.
  if (second != third) {
    EXPECT_FALSE(Valid(otp, second));
  }
}

TEST(OtpTest, BadInputIsRefusedAndCountsNoAttempt) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(kOtp, clock);
  Otp& otp = limiter->otp();
  const std::string code = IssueCode(otp);
  const std::pair<std::string, std::string> bad[] = {
      {"", code},         {"+1 555", code},    {std::string(513, '1'), code},
      {"a\nb", code},     {"\xff\xfe", code},  {kPhone, ""},
      {kPhone, "12345"},  {kPhone, "1234567"}, {kPhone, "12a456"},
      {kPhone, " 12345"}, {kPhone, "-12345"},  {kPhone, "１２３４５６"},
  };
  for (const auto& [subject, c] : bad) {
    auto r = otp.Verify(subject, c);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << subject << " " << c;
  }
  EXPECT_EQ(otp.Issue("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(otp.Issue("+1 555").status().code(), StatusCode::kInvalidArgument);
  // None of them was an attempt, and the code is intact.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Valid(otp, Other(code)));
  EXPECT_TRUE(Valid(otp, code));
  EXPECT_EQ(otp.GetStats().issued, 1);
}

TEST(OtpTest, RacingVerificationsOfOneCodeExactlyOneValid) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("otp: { issue_limit: 1000/5m, verify_limit: 1000/15m }\n", clock);
  Otp& otp = limiter->otp();
  for (int round = 0; round < 50; ++round) {
    const std::string code = IssueCode(otp, "race:" + std::to_string(round));
    std::atomic<int> valid{0}, go{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        go.fetch_add(1);
        while (go.load() < 4) {
        }
        auto r = otp.Verify("race:" + std::to_string(round), code);
        ASSERT_TRUE(r.ok());
        if (r->valid) valid.fetch_add(1);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(valid.load(), 1) << "round " << round;
  }
}

TEST(OtpTest, DeliveryPostsTheCodeInsteadOfReturningIt) {
  testing::HttpReceiver gateway(200);
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("otp:\n  delivery: { url: '" + gateway.url("/sms") + "' }\n", clock);
  Otp& otp = limiter->otp();
  auto r = otp.Issue("ana@example.com");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->issued);
  EXPECT_TRUE(r->queued);
  EXPECT_TRUE(r->code.empty());
  const auto got = gateway.WaitFor(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].head.rfind("POST /sms HTTP/1.1", 0), 0u);
  // {"subject":"ana@example.com","code":"NNNNNN","expires_in_ms":300000}
  const std::string& body = got[0].body;
  const std::string prefix = R"({"subject":"ana@example.com","code":")";
  ASSERT_EQ(body.rfind(prefix, 0), 0u) << body;
  const std::string code = body.substr(prefix.size(), 6);
  EXPECT_EQ(body.substr(prefix.size() + 6), R"(","expires_in_ms":300000})");
  EXPECT_TRUE(Valid(otp, code, "ana@example.com"));
  for (int i = 0; i < 200 && otp.GetStats().delivered < 1; ++i) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(10));  // the worker counts after the answer
  }
  EXPECT_EQ(otp.GetStats().delivered, 1);
}

}  // namespace
}  // namespace floodgate
