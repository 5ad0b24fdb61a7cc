// OTP on a real redis-server: the script against the embedded store on the
// same random steps at explicit instants, then through Limiters on Redis's
// own clock: issue, verify, replay, brute force, the live-code cap, only
// HMACs stored and every key with a TTL, codes expiring on Redis's clock,
// and racing verifications of one code from two Limiters (two servers)
// with exactly one valid.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory_store.h"
#include "engine/otp_store.h"
#include "floodgate/limiter.h"
#include "redis/client.h"
#include "redis/otp_store.h"
#include "service/otp/otp_codes.h"
#include "testing/redis_cluster.h"
#include "testing/redis_peek.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr char kSecret[] = "redis-test-secret-0123";

std::unique_ptr<Client> MakeClient(const std::string& url) {
  auto parsed = ParseStoreUrl(url);
  EXPECT_TRUE(parsed.ok());
  ClientOptions options;
  options.url = *parsed;
  options.timeout_ms = 5000;
  options.connect_timeout_ms = 5000;
  auto client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

using Peek = testing::RedisPeek;

OtpPolicy SmallPolicy() {
  OtpPolicy p;
  p.code_ttl_ms = 20'000;
  p.max_live_codes = 2;
  p.issue_count = 3;
  p.issue_period_ms = 30'000;
  p.verify_count = 4;
  p.verify_period_ms = 50'000;
  return p;
}

// The same random steps on both stores at the same explicit instants give
// the same outcomes. Steps advance 1..3 s, far more than one takes in real
// time even on a loaded machine (see set_store_test.cc on explicit instants
// and real TTLs).
TEST(RedisOtpStoreTest, AgreesWithTheEmbeddedStore) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(redis.url());
  OtpStore remote(*client);
  ManualClock clock(kT0);
  EngineConfig engine_config;
  engine_config.sweep_interval_ms = 0;
  engine::MemoryStore memory(engine_config, {engine::OtpStore::Layout()}, clock);
  engine::OtpStore local(memory, 0, clock);
  const OtpPolicy policy = SmallPolicy();
  std::mt19937_64 rng(7);
  const std::vector<std::string> subjects = {"+15550100", "+15550101"};
  std::vector<std::string> hashes;  // codes issued so far
  int64_t now = kT0;
  int issued = 0, limited = 0, consumed = 0, attempts_refused = 0;
  for (int step = 0; step < 300; ++step) {
    now += 1000 + static_cast<int64_t>(rng() % 2000);
    const std::string& subject = subjects[rng() % subjects.size()];
    const std::string id = "e" + std::to_string(step);
    SCOPED_TRACE("step " + std::to_string(step));
    switch (rng() % 3) {
      case 0: {
        const std::string hash = "h" + std::to_string(step);
        hashes.push_back(hash);
        OtpIssueOutcome want;
        ASSERT_TRUE(local.Issue(subject, hash, id, policy, now, &want).ok());
        std::promise<std::pair<Status, OtpIssueOutcome>> p;
        remote.Issue(subject, hash, id, policy, now,
                     [&p](const Status& s, const OtpIssueOutcome& o) {
                       p.set_value({s, o});
                     });
        auto [s, got] = p.get_future().get();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(got.now_ms, now);
        EXPECT_EQ(got.issued, want.issued);
        EXPECT_EQ(got.retry_after_ms, want.retry_after_ms);
        EXPECT_EQ(got.expires_at_ms, want.expires_at_ms);
        (want.issued ? issued : limited) += 1;
        break;
      }
      case 1: {
        OtpAttemptOutcome want;
        ASSERT_TRUE(local.Attempt(subject, id, policy, now, &want).ok());
        std::promise<std::pair<Status, OtpAttemptOutcome>> p;
        remote.Attempt(subject, id, policy, now, [&p](const Status& s, const OtpAttemptOutcome& o) {
          p.set_value({s, o});
        });
        auto [s, got] = p.get_future().get();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(got.allowed, want.allowed);
        EXPECT_EQ(got.retry_after_ms, want.retry_after_ms);
        // Redis lists live codes by expiry then bytes, the engine likewise.
        EXPECT_EQ(got.codes, want.codes);
        attempts_refused += want.allowed ? 0 : 1;
        break;
      }
      default: {
        if (hashes.empty()) break;
        const std::string& hash = hashes[rng() % hashes.size()];
        bool want = false;
        ASSERT_TRUE(local.Consume(subject, hash, now, &want).ok());
        std::promise<std::pair<Status, bool>> p;
        remote.Consume(subject, hash, now, [&p](const Status& s, bool c) { p.set_value({s, c}); });
        auto [s, got] = p.get_future().get();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(got, want);
        consumed += want ? 1 : 0;
        break;
      }
    }
  }
  // The sequence reached every branch.
  EXPECT_GT(issued, 5);
  EXPECT_GT(limited, 0);
  EXPECT_GT(consumed, 0);
  EXPECT_GT(attempts_refused, 0);
  Peek peek(redis.port());
  for (const std::string& key : peek.Keys()) EXPECT_GT(peek.Integer({"PTTL", key}), 0) << key;
}

std::unique_ptr<Limiter> RedisLimiter(const std::string& url, const std::string& otp_yaml,
                                      const Clock& clock) {
  auto parsed = ParseConfig(otp_yaml, "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  Config config = *parsed;
  config.store = url;
  config.redis.timeout_ms = 5000;
  config.engine.sweep_interval_ms = 0;
  config.otp.secret = kSecret;
  auto limiter = Limiter::Create(config, clock);
  EXPECT_TRUE(limiter.ok()) << limiter.status().ToString();
  return limiter.ok() ? std::move(*limiter) : nullptr;
}

TEST(RedisOtpTest, IssueVerifyReplayAndWhatRedisHolds) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto limiter =
      RedisLimiter(redis.url(), "otp: { issue_limit: 3/5m, max_live_codes: 2 }\n", clock);
  Otp& otp = limiter->otp();
  auto a = otp.Issue("+15550100");
  auto b = otp.Issue("+15550100");
  auto c = otp.Issue("+15550100");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(a->issued && b->issued && c->issued);
  auto limited = otp.Issue("+15550100");
  ASSERT_TRUE(limited.ok());
  EXPECT_FALSE(limited->issued);
  EXPECT_GT(limited->retry_after_ms, 290'000);
  EXPECT_LE(limited->retry_after_ms, 300'000);

  // Redis holds the HMACs of the two live codes (the cap dropped the first),
  // never a code, and every key has a TTL.
  Peek peek(redis.port());
  const auto keys = OtpKeys("+15550100");
  const auto stored = peek.Strings({"ZRANGE", keys[0], "0", "-1"});
  EXPECT_EQ(stored, (std::vector<std::string>{service::CodeHmac(kSecret, "+15550100", b->code),
                                              service::CodeHmac(kSecret, "+15550100", c->code)}));
  for (const std::string& key : peek.Keys()) {
    const int64_t ttl = peek.Integer({"PTTL", key});
    EXPECT_GT(ttl, 0) << key;
    for (const std::string& member : peek.Strings({"ZRANGE", key, "0", "-1"})) {
      for (const auto* code : {&a->code, &b->code, &c->code}) {
        EXPECT_EQ(member.find(*code), std::string::npos) << key;
      }
    }
  }
  // (up to 2 ms more when the three issues fell in one millisecond)
  EXPECT_LE(peek.Integer({"PTTL", keys[0]}), 300'002);

  if (a->code != c->code) {
    EXPECT_FALSE(otp.Verify("+15550100", a->code)->valid);
  }
  EXPECT_TRUE(otp.Verify("+15550100", c->code)->valid);
  EXPECT_FALSE(otp.Verify("+15550100", c->code)->valid);  // replay
  if (b->code != c->code) {
    EXPECT_FALSE(otp.Verify("+15550100", b->code)->valid);
  }
  EXPECT_EQ(peek.Integer({"EXISTS", keys[0]}), 0);  // consumed: no codes left
  EXPECT_EQ(peek.Integer({"EXISTS", keys[2]}), 1);  // the two failures since
}

TEST(RedisOtpTest, BruteForceIsRefusedPastTheLimit) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto limiter = RedisLimiter(redis.url(), "otp: { verify_limit: 5/15m }\n", clock);
  Otp& otp = limiter->otp();
  const std::string code = otp.Issue("ana@example.com")->code;
  std::string wrong = code;
  wrong[5] = code[5] == '0' ? '1' : '0';
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(otp.Verify("ana@example.com", wrong)->valid);
  auto r = otp.Verify("ana@example.com", code);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->limited);
  EXPECT_GT(r->retry_after_ms, 890'000);
  EXPECT_EQ(otp.GetStats().verify_limited, 1);
  EXPECT_EQ(otp.GetStats().verified_invalid, 5);
}

TEST(RedisOtpTest, CodesExpireOnRedisTime) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto limiter = RedisLimiter(redis.url(), "otp: { ttl: 1s }\n", clock);
  Otp& otp = limiter->otp();
  const std::string code = otp.Issue("+15550100")->code;
  Peek peek(redis.port());
  const std::string codes_key = OtpKeys("+15550100")[0];
  const int64_t ttl = peek.Integer({"PTTL", codes_key});
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 1000);
  // Redis drops the codes at their expiry by itself; the code is then invalid.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (peek.Integer({"EXISTS", codes_key}) == 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(otp.Verify("+15550100", code)->valid);
}

TEST(RedisOtpTest, RacingVerificationsFromTwoServersExactlyOneValid) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  const std::string yaml = "otp: { issue_limit: 1000/5m, verify_limit: 1000/15m }\n";
  auto one = RedisLimiter(redis.url(), yaml, clock);
  auto two = RedisLimiter(redis.url(), yaml, clock);
  for (int round = 0; round < 30; ++round) {
    const std::string subject = "race:" + std::to_string(round);
    const std::string code = one->otp().Issue(subject)->code;
    std::atomic<int> valid{0}, ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        Otp& otp = (t % 2 == 0 ? one : two)->otp();
        ready.fetch_add(1);
        while (ready.load() < 4) {
        }
        auto r = otp.Verify(subject, code);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (r->valid) valid.fetch_add(1);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(valid.load(), 1) << "round " << round;
  }
}

TEST(RedisOtpTest, Cluster) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start(3)) << cluster.error();
  SystemClock clock;
  auto limiter = RedisLimiter(cluster.url(), "otp: {}\n", clock);
  Otp& otp = limiter->otp();
  for (int i = 0; i < 12; ++i) {
    const std::string subject = "+1555010" + std::to_string(i);
    const std::string code = otp.Issue(subject)->code;
    EXPECT_FALSE(otp.Verify(subject, code == "000000" ? "000001" : "000000")->valid);
    EXPECT_TRUE(otp.Verify(subject, code)->valid) << subject;
  }
  EXPECT_EQ(otp.GetStats().backend_errors, 0);
}

}  // namespace
}  // namespace floodgate::redis
