// Quota alerts through the public Limiter on the embedded store, against a
// real HTTP receiver: many threads crossing a threshold at once send one
// event per threshold, signed; pending events survive a restart through the
// spool; a missing secret or spool is refused with a clear error.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/limiter.h"
#include "nlohmann/json.hpp"
#include "testing/eventually.h"
#include "testing/http_receiver.h"

namespace floodgate {
namespace {

using namespace std::chrono_literals;

constexpr char kSecret[] = "alerts-test-secret";

std::string Hmac(std::string_view secret, std::string_view body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &n);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex = "sha256=";
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[mac[i] >> 4];
    hex += kHex[mac[i] & 0xf];
  }
  return hex;
}

class LimiterAlertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-alerts-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::setenv("FG_TEST_ALERT_SECRET", kSecret, 1);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    ::unsetenv("FG_TEST_ALERT_SECRET");
  }

  Config MakeConfig(const std::string& webhook, const std::string& limit = "100/day") {
    Config c;
    c.engine.sweep_interval_ms = 0;
    Rule r;
    r.name = "quota";
    r.limits = {*ParseLimit(limit)};
    r.alerts.thresholds = {80, 100};
    r.alerts.webhook = webhook;
    r.alerts.secret_env = "FG_TEST_ALERT_SECRET";
    c.rules.push_back(r);
    c.alert_delivery.spool = dir_ + "/alerts.spool";
    c.alert_delivery.backoff_initial_ms = 20;
    c.alert_delivery.backoff_max_ms = 100;
    c.alert_delivery.timeout_ms = 5000;  // a late 200 would be retried: a duplicate
    return c;
  }

  std::string dir_;
  SystemClock clock_;
};

TEST_F(LimiterAlertsTest, ConcurrentRequestsCrossingSendOneSignedEventPerThreshold) {
  testing::HttpReceiver receiver;
  auto limiter = Limiter::Create(MakeConfig(receiver.url("/quota")), clock_);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  ASSERT_TRUE((*limiter)->alerts().enabled());
  ASSERT_TRUE((*limiter)->Check("quota", "user:42", 70).ok());
  // 100 requests at once from 100 threads: 30 fit, taking usage past 80 %
  // and to 100 %.
  std::atomic<int> admitted{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      auto d = (*limiter)->Check("quota", "user:42");
      if (d.ok() && d->allowed) admitted.fetch_add(1);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 30);
  ASSERT_TRUE((*limiter)->alerts().WaitIdle(5s));
  const auto got = receiver.WaitFor(2);
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(receiver.WaitFor(3, 0ms).size(), 2u) << "one event per threshold, no more";
  std::set<int> thresholds;
  for (const auto& r : got) {
    EXPECT_EQ(r.Header("X-Floodgate-Signature"), Hmac(kSecret, r.body)) << r.body;
    const auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(r.Header("Idempotency-Key"), j.at("event_id").get<std::string>());
    EXPECT_EQ(j.at("rule"), "quota");
    EXPECT_EQ(j.at("key"), "user:42");
    EXPECT_TRUE(j.at("tier").is_null());
    EXPECT_EQ(j.at("limit"), "100/day");
    EXPECT_EQ(j.at("capacity"), 100);
    EXPECT_EQ(j.at("window_end").get<int64_t>() - j.at("window_start").get<int64_t>(), 86'400'000);
    const int threshold = j.at("threshold").get<int>();
    thresholds.insert(threshold);
    EXPECT_EQ(j.at("used").get<int>(), threshold);  // one unit at a time: exactly at it
  }
  EXPECT_EQ(thresholds, (std::set<int>{80, 100}));
  const Alerts::Stats s = (*limiter)->alerts().GetStats();
  EXPECT_EQ(s.emitted, 2);
  EXPECT_EQ(s.delivered, 2);
  EXPECT_EQ(s.pending, 0);
  const auto recent = (*limiter)->alerts().Recent(10);
  ASSERT_EQ(recent.size(), 2u);
  // Two threads crossed the two thresholds and emitted after their
  // decisions, in either order: the list holds both, each delivered once.
  std::set<int> listed;
  for (const AlertRecord& r : recent) {
    listed.insert(r.event.threshold);
    EXPECT_EQ(r.status, AlertStatus::kDelivered);
    EXPECT_EQ(r.attempts, 1);
  }
  EXPECT_EQ(listed, (std::set<int>{80, 100}));
}

TEST_F(LimiterAlertsTest, PendingEventsSurviveARestartThroughTheSpool) {
  int port = 0;
  {
    testing::HttpReceiver probe;
    port = probe.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/quota";
  const Config config = MakeConfig(url, "10/day");
  std::string first_id;
  {
    auto limiter = Limiter::Create(config, clock_);
    ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
    ASSERT_TRUE((*limiter)->Check("quota", "k", 10).ok());  // 80 % and 100 % at once
    ASSERT_TRUE(testing::Eventually(
        [&] { return (*limiter)->alerts().GetStats().retried >= 2; }));  // a few failed tries
    const Alerts::Stats s = (*limiter)->alerts().GetStats();
    EXPECT_EQ(s.emitted, 2);
    EXPECT_EQ(s.pending, 2);
    EXPECT_GE(s.retried, 2);
    first_id = (*limiter)->alerts().Recent(1).at(0).event.event_id;
    EXPECT_EQ((*limiter)->alerts().Recent(1).at(0).status, AlertStatus::kPending);
  }  // a graceful stop: the spool keeps them
  ASSERT_TRUE(std::filesystem::exists(config.alert_delivery.spool));

  testing::HttpReceiver receiver(200, port);
  auto limiter = Limiter::Create(config, clock_);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  const auto got = receiver.WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  std::set<std::string> ids;
  for (const auto& r : got) {
    ids.insert(r.Header("Idempotency-Key"));
    EXPECT_EQ(r.Header("X-Floodgate-Signature"), Hmac(kSecret, r.body));
  }
  EXPECT_TRUE(ids.contains(first_id));
  ASSERT_TRUE((*limiter)->alerts().WaitIdle(5s));
  EXPECT_EQ((*limiter)->alerts().GetStats().delivered, 2);
  EXPECT_EQ((*limiter)->alerts().GetStats().emitted, 0);  // re-sent, not emitted again
  // The subject's state was not kept (a new process): the same crossing
  // now would carry the same event ids, so the receiver would drop it.
  for (int i = 0; i < 50 && std::filesystem::exists(config.alert_delivery.spool); ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(std::filesystem::exists(config.alert_delivery.spool)) << "nothing left to keep";
}

TEST_F(LimiterAlertsTest, TheSameCrossingHasTheSameIdAfterARestart) {
  testing::HttpReceiver receiver;
  std::vector<std::string> ids;
  for (int run = 0; run < 2; ++run) {
    auto limiter = Limiter::Create(MakeConfig(receiver.url(), "5/day"), clock_);
    ASSERT_TRUE(limiter.ok());
    ASSERT_TRUE((*limiter)->Check("quota", "k", 4).ok());
    ASSERT_TRUE((*limiter)->alerts().WaitIdle(5s));
    ids.push_back((*limiter)->alerts().Recent(1).at(0).event.event_id);
  }
  EXPECT_EQ(ids[0], ids[1]);
}

TEST_F(LimiterAlertsTest, AMissingSecretIsRefusedAtCreateAndReload) {
  Config config = MakeConfig("http://127.0.0.1:9/hook");
  config.rules[0].alerts.secret_env = "FG_TEST_NO_SUCH_SECRET";
  auto refused = Limiter::Create(config, clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "rule 'quota' has alerts, but the environment variable FG_TEST_NO_SUCH_SECRET (its "
            "alerts.secret_env), which holds the webhook's signing secret, is not set");

  Config plain = config;
  plain.rules[0].alerts = AlertConfig{};
  auto limiter = Limiter::Create(plain, clock_);
  ASSERT_TRUE(limiter.ok());
  EXPECT_FALSE((*limiter)->alerts().enabled());  // no rule alerts: nothing runs
  const Status s = (*limiter)->Reload(config);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("FG_TEST_NO_SUCH_SECRET"), std::string::npos);
  EXPECT_TRUE((*limiter)->Check("quota", "k").ok());  // the old rules still serve
  EXPECT_FALSE((*limiter)->alerts().enabled());
}

TEST_F(LimiterAlertsTest, ReloadAddingAlertsStartsThem) {
  testing::HttpReceiver receiver;
  Config config = MakeConfig(receiver.url(), "10/minute");
  Config plain = config;
  plain.rules[0].alerts = AlertConfig{};
  auto limiter = Limiter::Create(plain, clock_);
  ASSERT_TRUE(limiter.ok());
  ASSERT_TRUE((*limiter)->Reload(config).ok());
  EXPECT_TRUE((*limiter)->alerts().enabled());
  ASSERT_TRUE((*limiter)->Check("quota", "k", 8).ok());
  ASSERT_EQ(receiver.WaitFor(1).size(), 1u);
}

TEST_F(LimiterAlertsTest, ASpoolThatCannotBeWrittenIsRefused) {
  Config config = MakeConfig("http://127.0.0.1:9/hook");
  std::ofstream(dir_ + "/file") << "x";
  config.alert_delivery.spool = dir_ + "/file/alerts.spool";
  auto refused = Limiter::Create(config, clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("alert_delivery.spool: cannot create the directory"),
            std::string::npos)
      << refused.status().message();
}

TEST_F(LimiterAlertsTest, AFullQueueDropsEventsAndNeverBlocksADecision) {
  testing::HttpReceiver silent(0);  // never answers
  Config config = MakeConfig(silent.url(), "1/minute");
  config.alert_delivery.queue_size = 2;
  config.alert_delivery.timeout_ms = 2000;
  config.alert_delivery.spool = "off";
  auto limiter = Limiter::Create(config, clock_);
  ASSERT_TRUE(limiter.ok());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) {
    auto d = (*limiter)->Check("quota", "subject-" + std::to_string(i));  // each crosses both
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  const Alerts::Stats s = (*limiter)->alerts().GetStats();
  EXPECT_EQ(s.emitted, 20);
  EXPECT_EQ(s.dropped_queue_full, 18);
  EXPECT_EQ(s.pending, 2);
  EXPECT_EQ((*limiter)->alerts().Recent(1).at(0).status, AlertStatus::kDropped);
}

TEST_F(LimiterAlertsTest, AlertsChangeNoDecision) {
  Config config = MakeConfig("http://127.0.0.1:9/hook", "7/s");
  config.alert_delivery.spool = "off";
  Config plain = config;
  plain.rules[0].alerts = AlertConfig{};
  ManualClock a_clock, b_clock;
  auto with = Limiter::Create(config, a_clock);
  auto without = Limiter::Create(plain, b_clock);
  ASSERT_TRUE(with.ok() && without.ok());
  for (int i = 0; i < 200; ++i) {
    a_clock.SetMs(1'000'000 + i * 37);
    b_clock.SetMs(1'000'000 + i * 37);
    auto x = (*with)->Check("quota", "k", i % 3);
    auto y = (*without)->Check("quota", "k", i % 3);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(x->allowed, y->allowed) << i;
    EXPECT_EQ(x->remaining, y->remaining) << i;
    EXPECT_EQ(x->retry_after_ms, y->retry_after_ms) << i;
  }
}

}  // namespace
}  // namespace floodgate
