// The fronts on the store interface alone: RESP, HTTP and Envoy's gRPC
// RateLimitService served by a real Server and GrpcFront over a LimiterCore
// whose store is a FakeStore (tests/testing/fake_store.h). This binary links
// neither the engine nor the Redis store (tests/CMakeLists.txt: the layers
// it is built from), so it also proves the fronts build without them.
//
// Each front takes a request through to the store and back: answered now,
// and answered later from another thread (a "later:" subject), as a remote
// store answers.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "config/envoy_ratelimit.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "floodgate/config.h"
#include "server/grpc/grpc_front.h"
#include "server/grpc/rls_service.h"
#include "service/envoy/envoy_rules.h"
#include "service/services.h"
#include "testing/fake_store.h"
#include "testing/served_fronts.h"

namespace floodgate {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

constexpr int64_t kNow = 1'700'000'040'000;  // 40 s into a minute

constexpr char kConfig[] = R"(
rules:
  api:
    algorithm: fixed_window
    limits: [3/minute]
)";

constexpr char kDomain[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
)";

class FakeStoreFrontsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Config> config = ParseConfig(kConfig, "fronts.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    Result<envoy::DomainConfig> domain = envoy::ParseDomain(kDomain, "rl.yaml");
    ASSERT_TRUE(domain.ok()) << domain.status().ToString();
    auto rules = envoy::Rules::Compile(*config, {*domain});
    ASSERT_TRUE(rules.ok()) << rules.status().ToString();
    auto fake = std::make_unique<testing::FakeStore>(clock_);
    store_ = fake.get();
    auto services = service::Services::Open(envoy::WithEnvoyRules(*config, **rules, nullptr),
                                            clock_, testing::FakeStore::RoomsOf(std::move(fake)));
    ASSERT_TRUE(services.ok()) << services.status().ToString();
    services_ = std::move(*services);
    fronts_ = std::make_unique<testing::ServedFronts>(services_.get());
    ASSERT_TRUE(fronts_->ok());
    rls_ = std::make_unique<server::RlsService>(services_->core.get(), clock_);
    rls_->SetRules(*rules);
    server::GrpcFrontOptions options;
    options.address = "127.0.0.1:0";
    auto front = server::GrpcFront::Start(options, rls_.get());
    ASSERT_TRUE(front.ok()) << front.status().ToString();
    grpc_ = std::move(*front);
    stub_ = pb::RateLimitService::NewStub(
        grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (grpc_ != nullptr) grpc_->Stop();
  }

  // The overall code of one ShouldRateLimit call for user=`value`.
  pb::RateLimitResponse::Code ShouldRateLimit(const std::string& value) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::RateLimitRequest request;
    request.set_domain("d");
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(value);
    pb::RateLimitResponse response;
    const grpc::Status status = stub_->ShouldRateLimit(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.overall_code();
  }

  // FG.CHECK's reply: allowed, limit, remaining, retry-after, reset-after.
  static std::string Checked(bool allowed, int remaining) {
    const int64_t reset_ms = 60'000 - kNow % 60'000;
    return "*5\r\n:" + std::to_string(allowed ? 1 : 0) + "\r\n:3\r\n:" + std::to_string(remaining) +
           "\r\n:" + std::to_string(allowed ? 0 : reset_ms) + "\r\n:" + std::to_string(reset_ms) +
           "\r\n";
  }

  ManualClock clock_{kNow};
  testing::FakeStore* store_ = nullptr;  // owned by services_
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<testing::ServedFronts> fronts_;
  std::unique_ptr<server::RlsService> rls_;
  std::unique_ptr<server::GrpcFront> grpc_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
};

TEST_F(FakeStoreFrontsTest, RespDecidesOnTheStoreNowAndLater) {
  for (const char* key : {"now:alice", "later:bob"}) {
    EXPECT_EQ(fronts_->Resp({"FG.CHECK", "api", key}), Checked(true, 2)) << key;
    EXPECT_EQ(fronts_->Resp({"FG.CHECK", "api", key, "COST", "2"}), Checked(true, 0)) << key;
    EXPECT_EQ(fronts_->Resp({"FG.CHECK", "api", key}), Checked(false, 0)) << key;
  }
  EXPECT_EQ(store_->checks(), 6);
  EXPECT_EQ(store_->later_checks(), 3);
  // A rule the config does not have never reaches the store.
  EXPECT_EQ(fronts_->Resp({"FG.CHECK", "nope", "now:alice"}).substr(0, 4), "-ERR");
  EXPECT_EQ(store_->checks(), 6);
}

TEST_F(FakeStoreFrontsTest, HttpDecidesOnTheStoreNowAndLater) {
  for (const char* key : {"now:carol", "later:dave"}) {
    const std::string target = std::string("/v1/check?rule=api&key=") + key;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(fronts_->Http("GET", target).substr(0, 12), "HTTP/1.1 200") << key << " " << i;
    }
    const std::string denied = fronts_->Http("GET", target);
    EXPECT_EQ(denied.substr(0, 12), "HTTP/1.1 429") << denied;
    EXPECT_NE(denied.find("\"remaining\":0"), std::string::npos) << denied;
  }
  EXPECT_EQ(store_->checks(), 8);
  EXPECT_EQ(store_->later_checks(), 4);
  // The store's own metrics reach /metrics without the front knowing it.
  const std::string metrics = fronts_->Http("GET", "/metrics");
  EXPECT_NE(metrics.find("\nfloodgate_fake_store_checks_total 8\n"), std::string::npos) << metrics;
}

TEST_F(FakeStoreFrontsTest, TheStatsNameTheStoreAsItSaysItIs) {
  // A store with no nodes and no sketch board, which is neither of the
  // two the server was built beside: the stats show the kind it gives.
  const std::string stats = fronts_->Http("GET", "/v1/admin/stats");
  EXPECT_EQ(stats.substr(0, 12), "HTTP/1.1 200") << stats;
  EXPECT_NE(stats.find("\"store\":{\"kind\":\"fake\",\"healthy\":true}"), std::string::npos)
      << stats;
}

TEST_F(FakeStoreFrontsTest, GrpcDecidesOnTheStoreNowAndLater) {
  for (const char* value : {"now:erin", "later:frank"}) {
    EXPECT_EQ(ShouldRateLimit(value), pb::RateLimitResponse::OK) << value;
    EXPECT_EQ(ShouldRateLimit(value), pb::RateLimitResponse::OK) << value;
    EXPECT_EQ(ShouldRateLimit(value), pb::RateLimitResponse::OVER_LIMIT) << value;
  }
  EXPECT_EQ(store_->checks(), 6);
  EXPECT_EQ(store_->later_checks(), 3);
}

}  // namespace
}  // namespace floodgate
