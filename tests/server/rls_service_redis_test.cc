// RlsCall on a real Redis: calls started into one batch send their
// decisions together, one script call per rule and round for all of them
// (as the event loops' requests do); the store's answers come on its I/O
// thread, which hands each call back to its owner (Owner::Resume) to be
// continued on the owner's thread: the count round after a check round,
// then the answer.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/grpc/rls_service.h"
#include "service/services.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"
#include "testing/rls_limiter.h"

namespace floodgate::server {
namespace {

// `user` and `user1` have the same limit, so the same floodgate rule
// decides both: one script call can carry every decision of a round.
constexpr char kDomain[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000 }
  - key: user1
    rate_limit: { unit: minute, requests_per_unit: 1000 }
)";

// Takes the calls the store's I/O thread hands back.
class Owner : public RlsCall::Owner {
 public:
  void Resume(RlsCall* call) override {
    std::lock_guard<std::mutex> lock(mu_);
    resumed_.push_back(call);
    cv_.notify_all();
  }
  // Waits (at most 10 s) until `n` calls have been handed back; takes them.
  std::vector<RlsCall*> Take(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return resumed_.size() >= n; });
    std::vector<RlsCall*> out;
    out.swap(resumed_);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RlsCall*> resumed_;
};

class RlsCallRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << redis_.error();
    Config config;
    config.source = "floodgate.yaml";
    config.store = redis_.url();
    config.redis.local_cache = false;
    config.redis.timeout_ms = 5000;  // correctness here, not latency
    config.engine.sweep_interval_ms = 0;
    testing::RlsLimiter rls = testing::MakeRlsLimiter(config, kDomain, clock_);
    ASSERT_NE(rls.service, nullptr);
    services_ = std::move(rls.services);
    service_ = std::move(rls.service);
    testing::QueryText(redis_.port(), {"CONFIG", "RESETSTAT"});
  }

  // `n` requests, the i-th for the subjects "<prefix><i>" of each key
  // (string literals: the requests hold views of them).
  static std::vector<rls::Request> Requests(int n, const std::vector<std::string_view>& keys,
                                            const std::string& prefix,
                                            std::vector<std::string>* values) {
    values->clear();
    values->reserve(n);
    for (int i = 0; i < n; ++i) values->push_back(prefix + std::to_string(i));
    std::vector<rls::Request> requests(n);
    for (int i = 0; i < n; ++i) {
      requests[i].domain = "d";
      for (const std::string_view key : keys) {
        requests[i].descriptors.push_back({{{key, (*values)[i]}}, std::nullopt});
      }
    }
    return requests;
  }

  SystemClock clock_;
  testing::RedisServer redis_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<RlsService> service_;
  Owner owner_;
};

TEST_F(RlsCallRedisTest, OneDescriptorCallsShareOneScriptCall) {
  std::vector<std::string> values;
  const std::vector<rls::Request> requests = Requests(20, {"user"}, "u", &values);
  auto batch_owner = services_->core->NewBatch();
  store::Batch& batch = *batch_owner;
  std::vector<std::unique_ptr<RlsCall>> calls;
  for (const rls::Request& request : requests) {
    calls.push_back(std::make_unique<RlsCall>(&owner_));
    // Held in the batch: nothing is known before it is flushed.
    EXPECT_FALSE(calls.back()->Start(*service_, request, &batch));
  }
  EXPECT_EQ(batch.size(), 20u);
  batch.Flush();
  const std::vector<RlsCall*> resumed = owner_.Take(20);
  ASSERT_EQ(resumed.size(), 20u);
  for (RlsCall* call : resumed) {
    // One descriptor: no check round, so the answer is complete.
    ASSERT_TRUE(call->Continue(&batch));
    ASSERT_TRUE(call->status().ok()) << call->status().ToString();
    ASSERT_EQ(call->response().statuses.size(), 1u);
    EXPECT_EQ(call->response().overall_code, rls::Code::kOk);
    EXPECT_EQ(call->response().statuses[0].limit_remaining, 999u);
    EXPECT_EQ(call->fallback(0), Fallback::kNone);
  }
  EXPECT_EQ(testing::ScriptCalls(redis_.port()), 1);  // 20 decisions, one EVALSHA
}

TEST_F(RlsCallRedisTest, CheckAndCountRoundsOfManyCallsEachShareOneScriptCall) {
  std::vector<std::string> values;
  const std::vector<rls::Request> requests = Requests(20, {"user", "user1"}, "v", &values);
  auto batch_owner = services_->core->NewBatch();
  store::Batch& batch = *batch_owner;
  std::vector<std::unique_ptr<RlsCall>> calls;
  for (const rls::Request& request : requests) {
    calls.push_back(std::make_unique<RlsCall>(&owner_));
    EXPECT_FALSE(calls.back()->Start(*service_, request, &batch));
  }
  EXPECT_EQ(batch.size(), 40u);  // the check round: two peeks per call
  batch.Flush();
  std::vector<RlsCall*> resumed = owner_.Take(20);
  ASSERT_EQ(resumed.size(), 20u);
  for (RlsCall* call : resumed) {
    // Both have room: the count round goes into the batch.
    EXPECT_FALSE(call->Continue(&batch));
  }
  EXPECT_EQ(batch.size(), 40u);
  EXPECT_EQ(testing::ScriptCalls(redis_.port()), 1);
  batch.Flush();
  resumed = owner_.Take(20);
  ASSERT_EQ(resumed.size(), 20u);
  for (RlsCall* call : resumed) {
    ASSERT_TRUE(call->Continue(&batch));
    ASSERT_TRUE(call->status().ok()) << call->status().ToString();
    EXPECT_EQ(call->response().overall_code, rls::Code::kOk);
    ASSERT_EQ(call->response().statuses.size(), 2u);
    EXPECT_EQ(call->response().statuses[0].limit_remaining, 999u);
    EXPECT_EQ(call->response().statuses[1].limit_remaining, 999u);
    ASSERT_EQ(call->outcomes().size(), 2u);
  }
  EXPECT_EQ(testing::ScriptCalls(redis_.port()), 2);  // 80 decisions in two rounds
}

TEST_F(RlsCallRedisTest, WithoutABatchEachDecisionGoesAtOnce) {
  std::vector<std::string> values;
  const std::vector<rls::Request> requests = Requests(5, {"user"}, "w", &values);
  std::vector<std::unique_ptr<RlsCall>> calls;
  // Each decision is sent at once. Its answer comes on the store's I/O
  // thread, usually after Start has returned (the call is then handed back
  // to the owner), but it may come first on a busy machine: Start then
  // returns true with the answer complete, and no hand-back follows.
  std::vector<RlsCall*> done;
  size_t handed_back = 0;
  for (const rls::Request& request : requests) {
    calls.push_back(std::make_unique<RlsCall>(&owner_));
    if (calls.back()->Start(*service_, request, nullptr)) {
      done.push_back(calls.back().get());
    } else {
      ++handed_back;
    }
  }
  const std::vector<RlsCall*> resumed = owner_.Take(handed_back);
  ASSERT_EQ(resumed.size(), handed_back);
  for (RlsCall* call : resumed) {
    ASSERT_TRUE(call->Continue(nullptr));
    done.push_back(call);
  }
  ASSERT_EQ(done.size(), 5u);
  for (RlsCall* call : done) {
    ASSERT_TRUE(call->status().ok()) << call->status().ToString();
    EXPECT_EQ(call->response().statuses[0].limit_remaining, 999u);
  }
  EXPECT_EQ(testing::ScriptCalls(redis_.port()), 5);
}

}  // namespace
}  // namespace floodgate::server
