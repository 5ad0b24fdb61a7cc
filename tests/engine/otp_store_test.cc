// Unit tests of the embedded OTP state (OtpStore) on explicit instants: the
// issue limit as a sliding log and its retry, the cap on live codes
// (oldest dropped), attempts refused past the limit without codes, consume
// clearing codes and attempts, expiry of codes at the TTL edge, the state
// freed when everything has expired, and exactly one of many consumes.
#include "engine/otp_store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

EngineConfig TestConfig() {
  EngineConfig config;
  config.max_entries = 100;
  config.shards = 2;
  config.sweep_interval_ms = 0;
  return config;
}

OtpPolicy Policy() {
  OtpPolicy p;
  p.code_ttl_ms = 300'000;
  p.max_live_codes = 2;
  p.issue_count = 3;
  p.issue_period_ms = 300'000;
  p.verify_count = 5;
  p.verify_period_ms = 900'000;
  return p;
}

class OtpStoreTest : public ::testing::Test {
 protected:
  OtpStoreTest() : memory_(TestConfig(), {OtpStore::Layout()}, clock_), otp_(memory_, 0, clock_) {}

  OtpIssueOutcome Issue(std::string_view code, int64_t at) {
    OtpIssueOutcome out;
    const Status s =
        otp_.Issue("+15550100", code, "i" + std::to_string(next_++), policy_, at, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  OtpAttemptOutcome Attempt(int64_t at) {
    OtpAttemptOutcome out;
    const Status s = otp_.Attempt("+15550100", "a" + std::to_string(next_++), policy_, at, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  bool Consume(std::string_view code, int64_t at) {
    bool consumed = false;
    EXPECT_TRUE(otp_.Consume("+15550100", code, at, &consumed).ok());
    return consumed;
  }

  ManualClock clock_{kT0};
  MemoryStore memory_;
  OtpStore otp_;
  OtpPolicy policy_ = Policy();
  int next_ = 0;
};

TEST_F(OtpStoreTest, IssueLimitIsASlidingLogWithExactRetry) {
  const OtpIssueOutcome first = Issue("h1", kT0);
  EXPECT_TRUE(first.issued);
  EXPECT_EQ(first.expires_at_ms, kT0 + 300'000);
  EXPECT_TRUE(Issue("h2", kT0 + 1000).issued);
  EXPECT_TRUE(Issue("h3", kT0 + 2000).issued);
  const OtpIssueOutcome refused = Issue("h4", kT0 + 3000);
  EXPECT_FALSE(refused.issued);
  EXPECT_EQ(refused.retry_after_ms, 297'000);  // until the first issue ages out
  EXPECT_FALSE(Issue("h4", kT0 + 299'999).issued);
  EXPECT_TRUE(Issue("h4", kT0 + 300'000).issued);
  EXPECT_FALSE(Issue("h5", kT0 + 300'000).issued);
}

TEST_F(OtpStoreTest, TheOldestCodeGoesPastTheCap) {
  Issue("h1", kT0);
  Issue("h2", kT0 + 1);
  Issue("h3", kT0 + 2);  // cap 2: h1 is dropped
  const OtpAttemptOutcome a = Attempt(kT0 + 3);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.codes, (std::vector<std::string>{"h2", "h3"}));
  EXPECT_FALSE(Consume("h1", kT0 + 4));
  EXPECT_TRUE(Consume("h2", kT0 + 5));
  // Success invalidates the subject's other codes.
  EXPECT_FALSE(Consume("h3", kT0 + 6));
  EXPECT_TRUE(Attempt(kT0 + 7).codes.empty());
}

TEST_F(OtpStoreTest, CodesIssuedInOneMillisecondKeepTheirOrder) {
  // "zz" sorts after "aa": were the tie broken by bytes, "zz" would stay.
  EXPECT_EQ(Issue("zz", kT0).expires_at_ms, kT0 + 300'000);
  EXPECT_EQ(Issue("mm", kT0).expires_at_ms, kT0 + 300'001);
  EXPECT_EQ(Issue("aa", kT0).expires_at_ms, kT0 + 300'002);  // cap 2: zz goes
  EXPECT_EQ(Attempt(kT0).codes, (std::vector<std::string>{"mm", "aa"}));
}

TEST_F(OtpStoreTest, CodesExpireAtTheirTtl) {
  Issue("h1", kT0);
  EXPECT_EQ(Attempt(kT0 + 299'999).codes, (std::vector<std::string>{"h1"}));
  EXPECT_TRUE(Attempt(kT0 + 300'000).codes.empty());
  EXPECT_FALSE(Consume("h1", kT0 + 300'000));
}

TEST_F(OtpStoreTest, AttemptsPastTheLimitAreRefusedWithoutCodes) {
  Issue("h1", kT0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Attempt(kT0 + i).allowed) << i;
  const OtpAttemptOutcome refused = Attempt(kT0 + 10);
  EXPECT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.codes.empty());
  EXPECT_EQ(refused.retry_after_ms, 900'000 - 10);
  EXPECT_TRUE(Attempt(kT0 + 900'000).allowed);  // the first attempt aged out
}

TEST_F(OtpStoreTest, ASuccessClearsTheAttempts) {
  Issue("h1", kT0);
  for (int i = 0; i < 4; ++i) Attempt(kT0);
  EXPECT_TRUE(Consume("h1", kT0 + 1));
  Issue("h2", kT0 + 2);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Attempt(kT0 + 3).allowed) << i;
}

TEST_F(OtpStoreTest, StateIsFreedWhenEverythingExpired) {
  Issue("h1", kT0);
  Attempt(kT0);
  EXPECT_EQ(memory_.GetStats().entries, 1);
  // The attempt lives longest (15 min); whole seconds after it, it is freed.
  EXPECT_EQ(memory_.SweepExpired(kT0 + 899'999), 0);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 901'000), 1);
  EXPECT_EQ(memory_.GetStats().entries, 0);
}

TEST_F(OtpStoreTest, ExactlyOneOfManyConsumesWins) {
  Issue("h1", kT0);
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      bool consumed = false;
      ASSERT_TRUE(otp_.Consume("+15550100", "h1", kT0 + 1, &consumed).ok());
      if (consumed) ++wins;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
}

TEST(OtpStoreFullTest, ANewSubjectInAFullStoreIsAClearErrorThatChangesNothing) {
  ManualClock clock(kT0);
  EngineConfig config = TestConfig();
  config.max_entries = 1;
  MemoryStore memory(config, {OtpStore::Layout()}, clock);
  OtpStore otp(memory, 0, clock);
  const OtpPolicy policy = Policy();
  OtpIssueOutcome issued;
  ASSERT_TRUE(otp.Issue("+15550100", "h1", "i1", policy, kT0, &issued).ok());

  OtpIssueOutcome refused;
  Status s = otp.Issue("+15550199", "h2", "i2", policy, kT0, &refused);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "cannot issue a code for a new OTP subject: store is full (engine.max_entries: 1)");
  EXPECT_FALSE(refused.issued);  // the outcome describes no step
  OtpAttemptOutcome attempt;
  s = otp.Attempt("+15550199", "a1", policy, kT0, &attempt);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "cannot record a verification attempt for a new OTP subject: store is full "
            "(engine.max_entries: 1)");
  EXPECT_FALSE(attempt.allowed);
  // Consuming keeps nothing for an unknown subject: no error.
  bool consumed = true;
  EXPECT_TRUE(otp.Consume("+15550199", "h2", kT0, &consumed).ok());
  EXPECT_FALSE(consumed);
  // The known subject keeps working.
  OtpAttemptOutcome known;
  EXPECT_TRUE(otp.Attempt("+15550100", "a2", policy, kT0, &known).ok());
  EXPECT_TRUE(known.allowed);
}

}  // namespace
}  // namespace floodgate::engine
