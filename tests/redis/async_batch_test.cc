// LimiterCore's batches on real Redis: a standalone server gets one script call
// per rule for a whole batch, decided in arrival order on Redis's clock; a
// cluster gets one call per key with the same answers; a bound on calls in
// flight holds decisions back until an answer comes, and a batch destroyed
// while holding some still sends them. With a loop driver, all of it runs on
// the loop's thread. Holding a decision back never extends its timeout.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/open_services.h"
#include "redis/client.h"
#include "service/limiter/limiter_core.h"
#include "testing/driven_loop.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"
#include "testing/rules.h"

namespace floodgate {
namespace {

// Collects CheckAsync answers from the store's I/O thread.
class Answers {
 public:
  service::LimiterCore::CheckCallback Callback(std::string subject) {
    return [this, subject = std::move(subject)](const Status& s, const Decision& d) {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(d.fallback, Fallback::kNone) << subject;
      remaining_[subject].push_back(d.remaining);
      allowed_ += d.allowed ? 1 : 0;
      ++count_;
      cv_.notify_all();
    };
  }
  // Waits until `n` answers came (at most 10 s).
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  int allowed() {
    std::lock_guard<std::mutex> lock(mu_);
    return allowed_;
  }
  // Each subject's `remaining`, in the order its answers came.
  std::map<std::string, std::vector<int64_t>> remaining() {
    std::lock_guard<std::mutex> lock(mu_);
    return remaining_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
  int allowed_ = 0;
  std::map<std::string, std::vector<int64_t>> remaining_;
};

Config BatchConfig(const std::string& url) {
  Config config;
  config.store = url;
  config.redis.local_cache = false;
  config.redis.timeout_ms = 5000;  // correctness here, not latency
  config.engine.sweep_interval_ms = 0;
  config.rules.push_back(testing::MakeRule(Algorithm::kFixedWindow, {"1000/hour"}));
  config.rules.back().name = "fw";
  config.rules.push_back(testing::MakeRule(Algorithm::kGcra, {"1000/hour"}));
  config.rules.back().name = "gcra";
  return config;
}

// 60 decisions of "fw" over 20 subjects (each named three times, interleaved)
// and 10 of "gcra": each subject's answers count down in arrival order.
void CheckThreeTimesEach(service::LimiterCore& limiter, store::Batch* batch, Answers& answers) {
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20; ++i) {
      const std::string subject = "s" + std::to_string(i);
      limiter.CheckAsync({"fw", subject, 1, ""}, answers.Callback("fw:" + subject), batch);
    }
  }
  for (int i = 0; i < 10; ++i) {
    const std::string subject = "g" + std::to_string(i);
    limiter.CheckAsync({"gcra", subject, 1, ""}, answers.Callback("gcra:" + subject), batch);
  }
}

void ExpectCountdowns(Answers& answers) {
  const auto remaining = answers.remaining();
  ASSERT_EQ(remaining.size(), 30u);
  for (const auto& [subject, values] : remaining) {
    if (subject.rfind("fw:", 0) == 0) {
      EXPECT_EQ(values, (std::vector<int64_t>{999, 998, 997})) << subject;
    } else {
      EXPECT_EQ(values, (std::vector<int64_t>{999})) << subject;
    }
  }
  EXPECT_EQ(answers.allowed(), 70);
}

TEST(AsyncBatchTest, StandaloneDecidesABatchInOneCallPerRule) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock;
  auto limiter_services = api::OpenServices(BatchConfig(redis.url()), clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  Answers answers;
  {
    auto batch_owner = limiter->NewBatch();
    store::Batch& batch = *batch_owner;
    CheckThreeTimesEach(*limiter, &batch, answers);
    EXPECT_FALSE((batch.size() == 0));
    EXPECT_EQ(answers.count(), 0);  // nothing sent before Flush
    testing::QueryText(redis.port(), {"CONFIG", "RESETSTAT"});
    batch.Flush();
    EXPECT_TRUE((batch.size() == 0));
    ASSERT_TRUE(answers.WaitFor(70));
  }
  ExpectCountdowns(answers);
  // One call per rule, each once more as EVAL on its first use (NOSCRIPT).
  EXPECT_GE(testing::ScriptCalls(redis.port()), 2);
  EXPECT_LE(testing::ScriptCalls(redis.port()), 4);
  // State and expiry are written together: no key lacks a TTL.
  EXPECT_EQ(testing::QueryText(redis.port(), {"DBSIZE"}), "30");
  for (int i = 0; i < 20; ++i) {
    const std::string ttl =
        testing::QueryText(redis.port(), {"PTTL", "fg:{fw:s" + std::to_string(i) + "}"});
    EXPECT_GT(std::stoll(ttl), 0) << ttl;
  }
}

TEST(AsyncBatchTest, ClusterDecidesOneKeyPerCallWithTheSameAnswers) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start(3)) << cluster.error();
  ManualClock clock;
  auto limiter_services = api::OpenServices(BatchConfig(cluster.url()), clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  // Until the client has read the slot map, a request goes to a seed and
  // follows its MOVED, after requests sent later went straight to the
  // master: order per key holds once the map is known.
  ASSERT_TRUE(limiter->CheckAndWait("fw", "warm").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Answers answers;
  auto batch_owner = limiter->NewBatch();
  store::Batch& batch = *batch_owner;
  CheckThreeTimesEach(*limiter, &batch, answers);
  batch.Flush();
  ASSERT_TRUE(answers.WaitFor(70));
  ExpectCountdowns(answers);
}

TEST(AsyncBatchTest, CallsInFlightHoldDecisionsBackUntilAnAnswer) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock;
  auto limiter_services = api::OpenServices(BatchConfig(redis.url()), clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  ASSERT_TRUE(limiter->CheckAndWait("fw", "warm").ok());  // the script loaded
  Answers answers;
  auto batch_owner = limiter->NewBatch(/*max_calls_in_flight=*/1);
  store::Batch& batch = *batch_owner;
  // While Redis sleeps, the first call stays in flight.
  std::thread sleeper = testing::StallServer(redis.port(), 1.0);
  limiter->CheckAsync({"fw", "a", 1, ""}, answers.Callback("a"), &batch);
  batch.Flush();
  EXPECT_TRUE((batch.size() == 0));  // the first call goes at once
  limiter->CheckAsync({"fw", "b", 1, ""}, answers.Callback("b"), &batch);
  limiter->CheckAsync({"fw", "c", 1, ""}, answers.Callback("c"), &batch);
  batch.Flush();
  EXPECT_FALSE((batch.size() == 0));  // held: a call is in flight
  ASSERT_TRUE(answers.WaitFor(1));
  EXPECT_EQ(answers.count(), 1);
  batch.Flush();
  EXPECT_TRUE((batch.size() == 0));  // answered: the held ones go, together
  ASSERT_TRUE(answers.WaitFor(3));
  sleeper.join();
  // A batch destroyed while holding decisions still sends them.
  sleeper = testing::StallServer(redis.port(), 1.0);
  {
    auto held_owner = limiter->NewBatch(1);
    store::Batch& held = *held_owner;
    limiter->CheckAsync({"fw", "d", 1, ""}, answers.Callback("d"), &held);
    held.Flush();
    limiter->CheckAsync({"fw", "e", 1, ""}, answers.Callback("e"), &held);
    held.Flush();
    EXPECT_FALSE((held.size() == 0));
  }
  ASSERT_TRUE(answers.WaitFor(5));
  EXPECT_EQ(answers.allowed(), 5);
  sleeper.join();
}

// Records one CheckAsync answer and when it came, on `clock`.
struct Timed {
  explicit Timed(const Clock& c) : clock(c) {}
  const Clock& clock;
  std::atomic<bool> done{false};
  std::atomic<bool> backend_error{false};
  std::atomic<int64_t> at_ns{0};
  service::LimiterCore::CheckCallback Callback() {
    return [this](const Status& s, const Decision& d) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      backend_error.store(d.fallback == Fallback::kBackendError);
      at_ns.store(clock.MonotonicNs());
      done.store(true);
    };
  }
};

TEST(AsyncBatchTest, ADecisionWhoseTimeoutRanOutWhileHeldIsAnsweredWithoutBeingSent) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock;
  Config config = BatchConfig(redis.url());
  config.redis.timeout_ms = 100;
  auto limiter_services = api::OpenServices(config, clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  ASSERT_TRUE(limiter->CheckAndWait("fw", "warm").ok());  // connected, the script loaded
  testing::QueryText(redis.port(), {"CONFIG", "RESETSTAT"});
  auto batch_owner = limiter->NewBatch();
  store::Batch& batch = *batch_owner;
  // The request came 100 ms ago (the loop that read it had not been reading):
  // due now. One 99 ms ago still goes to Redis.
  clock.AdvanceNs(500'000'000);
  const int64_t now = clock.MonotonicNs();
  Timed late(clock), in_time(clock);
  batch.CountTimeoutFrom(now - 100'000'000);
  limiter->CheckAsync({"fw", "late", 1, ""}, late.Callback(), &batch);
  batch.Flush();
  EXPECT_TRUE(late.done.load());  // answered inside Flush
  EXPECT_TRUE(late.backend_error.load());
  EXPECT_EQ(testing::ScriptCalls(redis.port()), 0);
  EXPECT_EQ(limiter->GetStats().backend_timeouts, 1);
  // Flush ended the instant's reach: the next decision counts from itself.
  limiter->CheckAsync({"fw", "in_time", 1, ""}, in_time.Callback(), &batch);
  batch.Flush();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!in_time.done.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(in_time.done.load());
  EXPECT_FALSE(in_time.backend_error.load());
  EXPECT_EQ(testing::ScriptCalls(redis.port()), 1);
}

// Timeouts run on the limiter's clock: moved by hand here, so each
// decision's deadline is checked to the nanosecond.
TEST(AsyncBatchTest, ADecisionHeldBehindAStalledCallIsAnsweredOneTimeoutAfterItCame) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock;
  Config config = BatchConfig(redis.url());
  config.redis.timeout_ms = 200;
  auto limiter_services = api::OpenServices(config, clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  ASSERT_TRUE(limiter->CheckAndWait("fw", "warm").ok());
  auto batch_owner = limiter->NewBatch(/*max_calls_in_flight=*/1);
  store::Batch& batch = *batch_owner;
  // Flushes as a server loop does, every round (here every millisecond of
  // real time), for `ms` of real time or until `until` is done.
  const auto flush_for = [&](int ms, const std::atomic<bool>& until) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!until.load() && std::chrono::steady_clock::now() < end) {
      batch.Flush();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  std::thread sleeper = testing::StallServer(redis.port(), 3.0);
  Timed first(clock), held(clock);
  const int64_t first_at = clock.MonotonicNs();
  limiter->CheckAsync({"fw", "first", 1, ""}, first.Callback(), &batch);
  batch.Flush();  // in flight until its timeout
  clock.AdvanceNs(100'000'000);
  const int64_t held_at = clock.MonotonicNs();
  limiter->CheckAsync({"fw", "held", 1, ""}, held.Callback(), &batch);
  // `t`, which came at `came_at`, is not answered 1 ns before its deadline
  // and is answered at it, by its fallback.
  const auto expect_timed_out = [&](Timed& t, int64_t came_at) {
    clock.SetMonotonicNs(came_at + 200'000'000 - 1);
    flush_for(30, t.done);
    EXPECT_FALSE(t.done.load());
    clock.AdvanceNs(1);
    flush_for(2000, t.done);
    ASSERT_TRUE(t.done.load());
    EXPECT_TRUE(t.backend_error.load());
    EXPECT_EQ(t.at_ns.load() - came_at, 200'000'000);
  };
  expect_timed_out(first, first_at);
  // Its own timeout from when it came, not the call ahead's plus a whole
  // timeout of its own once sent (300 ms).
  expect_timed_out(held, held_at);
  sleeper.join();
}

TEST(AsyncBatchTest, ALoopDriverDecidesOnTheLoopThread) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock;
  auto limiter_services = api::OpenServices(BatchConfig(redis.url()), clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  Result<std::unique_ptr<LoopDriver>> driver = (*limiter_services)->rooms.backend->NewLoopDriver();
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  ASSERT_NE(*driver, nullptr);
  testing::DrivenLoop loop(std::move(driver).value());
  Answers answers;
  std::atomic<int> elsewhere{0};
  Status blocking = Status::Ok();
  {
    auto batch_owner = limiter->NewBatch(/*max_calls_in_flight=*/1);
    store::Batch& batch = *batch_owner;
    loop.RunAndWait([&] {
      // On the attached thread a blocking Check would wait for itself.
      blocking = limiter->CheckAndWait("fw", "blocked").status();
      for (int i = 0; i < 3; ++i) {
        for (int s = 0; s < 20; ++s) {
          const std::string subject = "s" + std::to_string(s);
          auto record = answers.Callback("fw:" + subject);
          limiter->CheckAsync(
              {"fw", subject, 1, ""},
              [&, record](const Status& st, const Decision& d) {
                if (std::this_thread::get_id() != loop.thread_id()) elsewhere.fetch_add(1);
                record(st, d);
              },
              &batch);
        }
        batch.Flush();  // the first goes, the next two are held behind it
      }
      EXPECT_FALSE((batch.size() == 0));
    });
    // Answers come in the loop's later iterations, each letting the held
    // decisions go at the next Flush (a server flushes every round).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (answers.count() < 60 && std::chrono::steady_clock::now() < deadline) {
      loop.RunAndWait([&] { batch.Flush(); });
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(answers.count(), 60);
    loop.RunAndWait([&] { EXPECT_TRUE((batch.size() == 0)); });
  }
  EXPECT_EQ(blocking.code(), StatusCode::kInternal) << blocking.ToString();
  EXPECT_EQ(elsewhere.load(), 0) << "answers ran off the loop's thread";
  const auto remaining = answers.remaining();
  ASSERT_EQ(remaining.size(), 20u);
  for (const auto& [subject, values] : remaining) {
    EXPECT_EQ(values, (std::vector<int64_t>{999, 998, 997})) << subject;
  }
  // Off the loop's thread the blocking API works as ever.
  EXPECT_TRUE(limiter->CheckAndWait("fw", "free").ok());
}

TEST(AsyncBatchTest, TheEmbeddedStoreHasNothingToDrive) {
  ManualClock clock;
  Config config;
  config.rules.push_back(testing::MakeRule(Algorithm::kFixedWindow, {"10/hour"}));
  auto services = api::OpenServices(config, clock);
  ASSERT_TRUE(services.ok()) << services.status().ToString();
  Result<std::unique_ptr<LoopDriver>> driver = (*services)->rooms.backend->NewLoopDriver();
  ASSERT_TRUE(driver.ok());
  EXPECT_EQ(*driver, nullptr);
}

}  // namespace
}  // namespace floodgate
