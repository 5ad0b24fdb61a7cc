// GrpcFront in this process, driven by a C++ gRPC client with many calls in
// flight: decisions to a real Redis travel together (several calls'
// decisions of one rule in one script call), the answers are exact, the
// metrics count every call, several threads serve one port, a second front
// on a busy port fails cleanly, and Stop drains calls still waiting for a
// stalled store.
#include "server/grpc/grpc_front.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/grpc/rls_service.h"
#include "service/services.h"
#include "testing/eventually.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"
#include "testing/rls_limiter.h"

namespace floodgate::server {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

constexpr char kDomain[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000 }
  - key: user1
    rate_limit: { unit: minute, requests_per_unit: 1000 }
)";

// The value of one sample of a Prometheus text page, -1 when absent.
int64_t Sample(const std::string& page, const std::string& series) {
  const std::string line = "\n" + series + " ";
  const size_t at = page.find(line);
  if (at == std::string::npos) return -1;
  return std::stoll(page.substr(at + line.size()));
}

struct Answer {
  grpc::Status status;
  pb::RateLimitResponse response;
};

// Makes `n` ShouldRateLimit calls, `in_flight` at a time over `channels`
// connections, from one thread (gRPC's asynchronous client API).
// `descriptors` per call, the i-th call's values "<prefix><i>".
// `all_started`, if given, is set once every call has been sent.
std::vector<Answer> Calls(const std::string& address, int n, int in_flight, int descriptors,
                          const std::string& prefix, int channels = 2,
                          std::atomic<bool>* all_started = nullptr) {
  std::vector<std::unique_ptr<pb::RateLimitService::Stub>> stubs;
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    args.SetInt("floodgate.test.channel", i);
    stubs.push_back(pb::RateLimitService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  struct Slot {
    grpc::ClientContext context;
    pb::RateLimitRequest request;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::RateLimitResponse>> reader;
    int index = 0;
  };
  std::vector<Answer> answers(n);
  std::vector<std::unique_ptr<Slot>> slots(n);
  grpc::CompletionQueue cq;
  int started = 0, done = 0;
  auto start = [&] {
    auto slot = std::make_unique<Slot>();
    slot->index = started;
    slot->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    slot->request.set_domain("d");
    for (int d = 0; d < descriptors; ++d) {
      auto* e = slot->request.add_descriptors()->add_entries();
      e->set_key(d == 0 ? "user" : "user" + std::to_string(d));
      e->set_value(prefix + std::to_string(started));
    }
    slot->reader =
        stubs[started % channels]->AsyncShouldRateLimit(&slot->context, slot->request, &cq);
    Answer& a = answers[started];
    slot->reader->Finish(&a.response, &a.status, slot.get());
    slots[started] = std::move(slot);
    ++started;
  };
  while (started < n && started < in_flight) start();
  if (all_started != nullptr && started == n) all_started->store(true);
  void* tag = nullptr;
  bool ok = false;
  while (done < n && cq.Next(&tag, &ok)) {
    ++done;
    if (started < n) start();
    if (all_started != nullptr && started == n) all_started->store(true);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return answers;
}

class GrpcFrontTest : public ::testing::Test {
 protected:
  // A Limiter on `store` ("" for the embedded one) and a front with `threads`.
  void Start(const std::string& store, int threads, int64_t redis_timeout_ms = 5000) {
    Config config;
    config.source = "floodgate.yaml";
    if (!store.empty()) config.store = store;
    config.redis.local_cache = false;
    config.redis.timeout_ms = redis_timeout_ms;
    config.engine.sweep_interval_ms = 0;
    testing::RlsLimiter rls = testing::MakeRlsLimiter(config, kDomain, clock_);
    ASSERT_NE(rls.service, nullptr);
    services_ = std::move(rls.services);
    service_ = std::move(rls.service);
    GrpcFrontOptions options;
    options.address = "127.0.0.1:0";
    options.threads = threads;
    auto front = GrpcFront::Start(options, service_.get());
    ASSERT_TRUE(front.ok()) << front.status().message();
    front_ = std::move(*front);
  }
  void TearDown() override {
    if (front_ != nullptr) front_->Stop();
  }

  SystemClock clock_;
  testing::RedisServer redis_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<RlsService> service_;
  std::unique_ptr<GrpcFront> front_;
};

TEST_F(GrpcFrontTest, DecisionsOfCallsInFlightShareScriptCalls) {
  ASSERT_TRUE(redis_.Start()) << redis_.error();
  ASSERT_NO_FATAL_FAILURE(Start(redis_.url(), 1));
  testing::QueryText(redis_.port(), {"CONFIG", "RESETSTAT"});
  // 400 calls, 50 in flight, two counted descriptors each: a check round
  // and a count round, 1600 decisions of one rule.
  const std::vector<Answer> answers = Calls(front_->address(), 400, 50, 2, "s");
  for (const Answer& a : answers) {
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    EXPECT_EQ(a.response.overall_code(), pb::RateLimitResponse::OK);
    ASSERT_EQ(a.response.statuses_size(), 2);
    EXPECT_EQ(a.response.statuses(0).limit_remaining(), 999u);
    EXPECT_EQ(a.response.statuses(1).limit_remaining(), 999u);
  }
  // One script call per decision without batching; calls in flight while
  // one script call is out wait for the next, together.
  const int64_t script_calls = testing::ScriptCalls(redis_.port());
  EXPECT_GT(script_calls, 0);
  EXPECT_LE(script_calls * 2, 1600) << script_calls << " script calls for 1600 decisions";
  RecordProperty("script_calls_for_1600_decisions", static_cast<int>(script_calls));
}

TEST_F(GrpcFrontTest, SeveralThreadsServeOnePortAndCountEveryCall) {
  ASSERT_NO_FATAL_FAILURE(Start("", 2));
  const std::vector<Answer> answers = Calls(front_->address(), 600, 40, 1, "t", 4);
  for (const Answer& a : answers) {
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    EXPECT_EQ(a.response.statuses(0).limit_remaining(), 999u);
  }
  // The same subjects again: each counted once before, now twice.
  for (const Answer& a : Calls(front_->address(), 600, 40, 1, "t", 4)) {
    EXPECT_EQ(a.response.statuses(0).limit_remaining(), 998u);
  }
  std::string page;
  front_->RenderMetrics(&page);
  EXPECT_EQ(Sample(page, R"(floodgate_grpc_requests_total{code="OK",overall_code="OK"})"), 1200)
      << page;
  EXPECT_EQ(Sample(page, R"(floodgate_envoy_descriptor_decisions_total{domain="d",)"
                         R"(descriptor="user",outcome="ok"})"),
            1200)
      << page;
  EXPECT_EQ(Sample(page, "floodgate_envoy_descriptor_series_dropped_total"), 0);
}

TEST_F(GrpcFrontTest, StopDrainsCallsWaitingForAStalledStore) {
  ASSERT_TRUE(redis_.Start()) << redis_.error();
  ASSERT_NO_FATAL_FAILURE(Start(redis_.url(), 1, /*redis_timeout_ms=*/1000));
  // Warm up: the connection and the script are in place.
  ASSERT_TRUE(Calls(front_->address(), 1, 1, 1, "warm")[0].status.ok());
  // Redis answers nothing for the rest of the test: every decision runs
  // into the timeout and is answered by on_backend_error (allow).
  testing::QueryText(redis_.port(), {"CLIENT", "PAUSE", "10000", "ALL"});
  std::vector<Answer> answers;
  std::atomic<bool> sent{false};
  std::thread client([&] { answers = Calls(front_->address(), 20, 20, 1, "p", 2, &sent); });
  // Sent, and given time to arrive; still waiting for the store (1 s).
  testing::Eventually([&] { return sent.load(); }, std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto stop_began = std::chrono::steady_clock::now();
  front_->Stop();
  const auto stop_took = std::chrono::steady_clock::now() - stop_began;
  client.join();
  // Within the drain (2 s by default), the store's timeout being shorter.
  EXPECT_LT(stop_took, std::chrono::milliseconds(2500));
  int answered = 0;
  for (const Answer& a : answers) {
    if (!a.status.ok()) continue;  // not yet taken when the front stopped
    ++answered;
    ASSERT_EQ(a.response.response_headers_to_add_size(), 1);
    EXPECT_EQ(a.response.response_headers_to_add(0).key(), "floodgate-fallback");
    EXPECT_EQ(a.response.response_headers_to_add(0).value(), "backend_error");
  }
  EXPECT_GT(answered, 0);
}

TEST_F(GrpcFrontTest, ABusyPortFailsAtStartAndTheFirstFrontGoesOn) {
  ASSERT_NO_FATAL_FAILURE(Start("", 2));
  GrpcFrontOptions options;
  options.address = front_->address();
  options.threads = 2;
  auto second = GrpcFront::Start(options, service_.get());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen for gRPC"), std::string::npos);
  const std::vector<Answer> answers = Calls(front_->address(), 10, 5, 1, "b");
  for (const Answer& a : answers) EXPECT_TRUE(a.status.ok()) << a.status.error_message();
}

}  // namespace
}  // namespace floodgate::server
