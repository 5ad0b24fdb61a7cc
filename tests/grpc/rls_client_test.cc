// The real floodgate binary serving Envoy's RateLimitService, driven by a
// C++ gRPC client built from the same .proto files: decisions and their
// figures, malformed and oversized requests, unknown fields, reload by
// SIGHUP, /metrics, and exact counting by two servers sharing a real Redis.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "testing/redis_server.h"

namespace {

namespace pb = ::envoy::service::ratelimit::v3;
using floodgate::testing::FreePort;
using floodgate::testing::RedisServer;

constexpr char kMessaging[] = R"(domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)";

std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    (void)::write(fd, req.data(), req.size());
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// One `floodgate serve` with an Envoy file, on free ports.
class Server {
 public:
  Server(const std::string& dir, const std::string& envoy_yaml, const std::string& extra = "",
         const std::string& store = "")
      : dir_(dir) {
    std::filesystem::create_directories(dir);
    envoy_path_ = dir + "/ratelimit.yaml";
    std::ofstream(envoy_path_) << envoy_yaml;
    config_path_ = dir + "/floodgate.yaml";
    std::ofstream(config_path_) << "envoy_ratelimit:\n  files: [ratelimit.yaml]\n" << extra;
    grpc_port_ = FreePort();
    http_port_ = FreePort();
    std::vector<std::string> argv = {FLOODGATE_CLI, "serve",
                                     "--config",    config_path_,
                                     "--threads",   "2",
                                     "--resp",      "off",
                                     "--http",      "127.0.0.1:" + std::to_string(http_port_),
                                     "--grpc",      "127.0.0.1:" + std::to_string(grpc_port_)};
    if (!store.empty()) {
      argv.push_back("--store");
      argv.push_back(store);
    }
    pid_ = floodgate::testing::Spawn(argv);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = pb::RateLimitService::NewStub(channel_);
  }
  ~Server() {
    floodgate::testing::Stop(pid_);
    std::filesystem::remove_all(dir_);
  }

  bool WaitReady() {
    return channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  grpc::Status Call(const pb::RateLimitRequest& request, pb::RateLimitResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub_->ShouldRateLimit(&context, request, response);
  }

  // Sends `bytes` as the request message, whatever they are.
  grpc::Status CallRaw(const std::string& bytes, std::string* reply) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    std::promise<grpc::Status> done;
    // The stub keeps a pointer to the name until the call ends.
    const std::string method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                      [&done](grpc::Status s) { done.set_value(std::move(s)); });
    grpc::Status s = done.get_future().get();
    std::vector<grpc::Slice> slices;
    if (s.ok() && response.Dump(&slices).ok()) {
      for (const grpc::Slice& sl : slices) {
        reply->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      }
    }
    return s;
  }

  void Reload(const std::string& envoy_yaml) {
    std::ofstream(envoy_path_) << envoy_yaml;
    ::kill(pid_, SIGHUP);
  }
  std::string Metrics() { return HttpGet(http_port_, "/metrics"); }
  grpc_connectivity_state State() { return channel_->GetState(/*try_to_connect=*/false); }
  bool alive() { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  std::string dir_, envoy_path_, config_path_;
  int grpc_port_ = 0, http_port_ = 0;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
};

std::string TempDir(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("floodgate_rls_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

pb::RateLimitRequest Request(
    const std::string& domain,
    const std::vector<std::vector<std::pair<std::string, std::string>>>& ds, uint32_t hits = 0) {
  pb::RateLimitRequest r;
  r.set_domain(domain);
  r.set_hits_addend(hits);
  for (const auto& entries : ds) {
    auto* d = r.add_descriptors();
    for (const auto& [k, v] : entries) {
      auto* e = d->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

TEST(RlsClientTest, DecisionsAndTheirFigures) {
  Server server(TempDir("decisions"), kMessaging, "  response_headers: true\n");
  ASSERT_TRUE(server.WaitReady());
  const auto req = Request(
      "messaging", {{{"message_type", "marketing"}, {"to_number", "1"}}, {{"to_number", "1"}}});
  for (int i = 0; i < 5; ++i) {
    pb::RateLimitResponse resp;
    ASSERT_TRUE(server.Call(req, &resp).ok());
    EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OK);
    ASSERT_EQ(resp.statuses_size(), 2);
    EXPECT_EQ(resp.statuses(0).limit_remaining(), static_cast<uint32_t>(4 - i));
    EXPECT_EQ(resp.statuses(1).limit_remaining(), static_cast<uint32_t>(99 - i));
    EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 5u);
    EXPECT_EQ(resp.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::DAY);
    const int64_t reset = resp.statuses(0).duration_until_reset().seconds();
    EXPECT_GT(reset, 0);
    EXPECT_LE(reset, 86400);
    ASSERT_EQ(resp.response_headers_to_add_size(), 3);
    EXPECT_EQ(resp.response_headers_to_add(0).key(), "RateLimit-Limit");
    EXPECT_EQ(resp.response_headers_to_add(0).value(), "5");
    EXPECT_EQ(resp.response_headers_to_add(1).value(), std::to_string(4 - i));
  }
  pb::RateLimitResponse resp;
  ASSERT_TRUE(server.Call(req, &resp).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(0).code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(1).code(), pb::RateLimitResponse::OK);
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 95u);  // the over-limit request was not counted
  EXPECT_EQ(resp.response_headers_to_add(1).value(), "0");

  // Unknown domain: OK, one status per descriptor, no limit.
  resp.Clear();
  ASSERT_TRUE(server.Call(Request("other", {{{"a", "b"}}, {{"c", "d"}}}), &resp).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OK);
  ASSERT_EQ(resp.statuses_size(), 2);
  EXPECT_FALSE(resp.statuses(0).has_current_limit());

  // Per-descriptor hits_addend: 0 checks only.
  auto check = Request("messaging", {{{"to_number", "2"}}}, 7);
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  resp.Clear();
  ASSERT_TRUE(server.Call(check, &resp).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 100u);
  check.mutable_descriptors(0)->clear_hits_addend();
  resp.Clear();
  ASSERT_TRUE(server.Call(check, &resp).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 93u);

  const std::string metrics = server.Metrics();
  EXPECT_NE(
      metrics.find("floodgate_grpc_requests_total{code=\"OK\",overall_code=\"OVER_LIMIT\"} 1"),
      std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("floodgate_envoy_descriptor_decisions_total{domain=\"messaging\","
                   "descriptor=\"message_type_marketing.to_number\",outcome=\"over_limit\"} 1"),
      std::string::npos)
      << metrics;
}

// server.grpc_keepalive_*: the server pings every connection, also one with
// no call in flight; a client that answers keeps its connection, and calls
// go on over it.
TEST(RlsClientTest, KeepalivePingsKeepALiveClientConnected) {
  Server server(TempDir("keepalive"), kMessaging,
                "server: { grpc_keepalive_time: 100ms, grpc_keepalive_timeout: 3s }\n");
  ASSERT_TRUE(server.WaitReady());
  const auto req = Request("messaging", {{{"to_number", "9"}}});
  pb::RateLimitResponse resp;
  ASSERT_TRUE(server.Call(req, &resp).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // ten pings answered
  EXPECT_EQ(server.State(), GRPC_CHANNEL_READY);
  resp.Clear();
  ASSERT_TRUE(server.Call(req, &resp).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_TRUE(server.alive());
}

TEST(RlsClientTest, BadRequestsAreRefusedAndTheServerGoesOn) {
  Server server(TempDir("bad"), kMessaging);
  ASSERT_TRUE(server.WaitReady());
  pb::RateLimitResponse resp;
  grpc::Status s = server.Call(Request("", {{{"a", "b"}}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "rate limit domain must not be empty");
  s = server.Call(Request("messaging", {}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "rate limit descriptor list must not be empty");
  std::vector<std::vector<std::pair<std::string, std::string>>> many(65, {{"a", "b"}});
  s = server.Call(Request("messaging", many), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "the request has 65 descriptors; the limit is 64");
  s = server.Call(Request("messaging", {{{"to_number", std::string(9000, 'x')}}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = server.Call(Request(std::string(2 << 20, 'd'), {{{"a", "b"}}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);  // over the message size

  // Bytes that are no RateLimitRequest.
  std::string reply;
  s = server.CallRaw(Request("messaging", {{{"to_number", "8"}}}).SerializeAsString(), &reply);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  s = server.CallRaw(std::string("\xff\xff\xff\xff garbage", 12), &reply);
  EXPECT_FALSE(s.ok());  // gRPC itself refuses what it cannot parse
  // Fields this server does not know are skipped.
  const auto good = Request("messaging", {{{"to_number", "9"}}});
  std::string bytes = good.SerializeAsString();
  bytes += std::string("\xa8\x06\x2a", 3);     // field 101, varint 42
  bytes += std::string("\xba\x06\x03xyz", 6);  // field 103, bytes "xyz"
  reply.clear();
  s = server.CallRaw(bytes, &reply);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  pb::RateLimitResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(reply));
  EXPECT_EQ(parsed.statuses(0).limit_remaining(), 99u);
  EXPECT_TRUE(server.alive());
}

TEST(RlsClientTest, SighupReloadsTheEnvoyFilesOrKeepsTheOldOnes) {
  Server server(TempDir("reload"), kMessaging);
  ASSERT_TRUE(server.WaitReady());
  const auto req = Request("messaging", {{{"to_number", "1"}}});
  pb::RateLimitResponse resp;
  ASSERT_TRUE(server.Call(req, &resp).ok());
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 100u);

  server.Reload(
      "domain: messaging\ndescriptors: [{key: to_number, rate_limit: {unit: day, "
      "requests_per_unit: 3}}]\n");
  bool reloaded = false;
  for (int i = 0; i < 200 && !reloaded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    resp.Clear();
    ASSERT_TRUE(server.Call(Request("messaging", {{{"to_number", "x"}}}), &resp).ok());
    reloaded = resp.statuses(0).current_limit().requests_per_unit() == 3;
  }
  ASSERT_TRUE(reloaded);

  // A broken file is refused: the previous rules keep serving.
  server.Reload(
      "domain: messaging\ndescriptors: [{key: to_number, rate_limit: {unit: fortnight}}]\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  resp.Clear();
  ASSERT_TRUE(server.Call(req, &resp).ok());
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 3u);
  EXPECT_TRUE(server.alive());
}

// Sleeps past the next boundary of `period_s` when it is closer than 10 s,
// so that counting in one window cannot straddle two.
void AvoidWindowEdge(int64_t period_s) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  const int64_t to_edge = period_s * 1000 - ms % (period_s * 1000);
  if (to_edge < 10'000) std::this_thread::sleep_for(std::chrono::milliseconds(to_edge + 50));
}

// Two servers, one Redis, 8 client threads: exactly the limit is admitted.
TEST(RlsClientTest, TwoServersSharingRedisCountExactly) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  const std::string yaml =
      "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: "
      "50}\n  - key: shared\n    rate_limit: {unit: hour, requests_per_unit: 30}\n";
  // A generous timeout: a late answer would be on_backend_error's, not a count.
  const std::string redis_options = "redis: { timeout_ms: 5000 }\n";
  Server a(TempDir("redis_a"), yaml, redis_options, redis.url());
  Server b(TempDir("redis_b"), yaml, redis_options, redis.url());
  ASSERT_TRUE(a.WaitReady());
  ASSERT_TRUE(b.WaitReady());
  AvoidWindowEdge(3600);
  std::atomic<int> admitted{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Server& s = t % 2 == 0 ? a : b;
      for (int i = 0; i < 20; ++i) {
        pb::RateLimitResponse resp;
        // Two descriptors: the request counts only if both have room.
        const auto req = Request("d", {{{"user", "u1"}}, {{"shared", "s"}}});
        if (!s.Call(req, &resp).ok()) {
          ++errors;
          continue;
        }
        if (resp.overall_code() == pb::RateLimitResponse::OK) ++admitted;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted.load(), 30);
  // The user's own counter was charged only for admitted requests (and a
  // race may charge it for a request the shared limit then refused; never
  // more than the limit).
  pb::RateLimitResponse resp;
  auto peek = Request("d", {{{"user", "u1"}}});
  peek.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  ASSERT_TRUE(a.Call(peek, &resp).ok());
  EXPECT_GE(resp.statuses(0).limit_remaining(), 0u);
  EXPECT_LE(resp.statuses(0).limit_remaining(), 20u);
}

}  // namespace
