// The fronts' replies to fallback decisions, through the real handlers on an
// embedded store that is full (and an HTTP check on a Redis store that is
// down): HTTP's Floodgate-Fallback field, "fallback" member and null
// figures, no RateLimit field; FG.CHECK's -1 figures and VERBOSE reason;
// CL.THROTTLE's -1; the metric and the rules listing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/open_services.h"
#include "nlohmann/json.hpp"
#include "server/context/service_context.h"
#include "server/http/http_routes.h"
#include "server/observability/metrics.h"
#include "server/resp/resp_commands.h"
#include "service/services.h"
#include "testing/served_fronts.h"

namespace floodgate::server {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

const char* kConfig = R"(
engine: { max_entries: 1, shards: 1, sweep_interval_ms: 0 }
rules:
  closed: { algorithm: fixed_window, limits: [5/minute, 100/hour] }
  open:   { algorithm: gcra, limits: [10/second], on_store_full: allow }
)";

// A parsed HTTP response: status, header fields, body.
struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  const std::string* Field(std::string_view name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

HttpReply ParseReply(const std::string& raw) {
  HttpReply r;
  const size_t head_end = raw.find("\r\n\r\n");
  EXPECT_NE(head_end, std::string::npos) << raw;
  r.body = raw.substr(head_end + 4);
  size_t line_start = raw.find("\r\n") + 2;
  r.status = std::stoi(raw.substr(9, 3));
  while (line_start < head_end) {
    const size_t line_end = raw.find("\r\n", line_start);
    const std::string line = raw.substr(line_start, line_end - line_start);
    const size_t colon = line.find(':');
    r.fields.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    line_start = line_end + 2;
  }
  return r;
}

class FallbackRepliesTest : public ::testing::Test {
 protected:
  void Start(const std::string& yaml, const std::string& store = "memory") {
    auto config = ParseConfig(yaml, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->store = store;
    auto limiter_services = api::OpenServices(*config, clock_);
    ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
    services_ = std::move(*limiter_services);
    service_.services = services_.get();
    service_.limiter = services_->core.get();
    service_.metrics = &metrics_;
    loop_ = std::make_unique<LoopContext>(&service_, 0);
    client_.loop = loop_.get();
    client_.authenticated = true;
    client_.now_ms = kNow;
    fronts_ = std::make_unique<testing::ServedFronts>(services_.get());
    ASSERT_TRUE(fronts_->ok());
  }

  // Through the HTTP front of a real server on this limiter.
  HttpReply Http(std::string_view method, std::string_view target) {
    return ParseReply(fronts_->Http(method, target));
  }

  std::string Resp(std::vector<std::string_view> args) {
    std::string out;
    DispatchResp(client_, Args(args.data(), args.size()), &out);
    return out;
  }

  ManualClock clock_{kNow};
  Metrics metrics_{1};
  ServiceContext service_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<LoopContext> loop_;
  std::unique_ptr<testing::ServedFronts> fronts_;
  RespClient client_;
};

TEST_F(FallbackRepliesTest, HttpNamesTheFallbackAndClaimsNoFigures) {
  Start(kConfig);
  HttpReply held = Http("GET", "/v1/check?rule=closed&key=held");
  ASSERT_EQ(held.status, 200);
  // A real decision: RateLimit, no fallback.
  ASSERT_NE(held.Field("RateLimit"), nullptr);
  EXPECT_EQ(held.Field("Floodgate-Fallback"), nullptr);
  EXPECT_FALSE(nlohmann::json::parse(held.body).contains("fallback"));

  HttpReply denied = Http("GET", "/v1/check?rule=closed&key=newcomer");
  EXPECT_EQ(denied.status, 429);
  ASSERT_NE(denied.Field("Floodgate-Fallback"), nullptr);
  EXPECT_EQ(*denied.Field("Floodgate-Fallback"), "store_full");
  EXPECT_EQ(denied.Field("RateLimit"), nullptr);  // the subject's state is unknown
  ASSERT_NE(denied.Field("RateLimit-Policy"), nullptr);
  EXPECT_EQ(*denied.Field("RateLimit-Policy"),
            "\"closed:0\";q=5;w=60, \"closed:1\";q=100;w=3600");  // configuration stays
  ASSERT_NE(denied.Field("Retry-After"), nullptr);
  EXPECT_EQ(*denied.Field("Retry-After"), "1");
  const nlohmann::json j = nlohmann::json::parse(denied.body);
  EXPECT_EQ(j["allowed"], false);
  EXPECT_EQ(j["fallback"], "store_full");
  EXPECT_EQ(j["limit"], 5);
  EXPECT_TRUE(j["remaining"].is_null());
  EXPECT_EQ(j["retry_after_ms"], 1000);
  EXPECT_TRUE(j["reset_after_ms"].is_null());
  ASSERT_EQ(j["limits"].size(), 2u);
  for (const auto& limit : j["limits"]) {
    EXPECT_TRUE(limit["remaining"].is_null());
    EXPECT_TRUE(limit["reset_after_ms"].is_null());
    EXPECT_EQ(limit["retry_after_ms"], 1000);
  }
  EXPECT_EQ(j["limits"][1]["limit"], 100);
  EXPECT_EQ(j["limits"][1]["period_ms"], 3'600'000);

  HttpReply admitted = Http("GET", "/v1/check?rule=open&key=newcomer");
  EXPECT_EQ(admitted.status, 200);
  EXPECT_EQ(*admitted.Field("Floodgate-Fallback"), "store_full");
  EXPECT_EQ(admitted.Field("Retry-After"), nullptr);
  EXPECT_EQ(nlohmann::json::parse(admitted.body)["retry_after_ms"], 0);
}

TEST_F(FallbackRepliesTest, RespFiguresAreMinusOneAndVerboseNamesTheReason) {
  Start(kConfig);
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "held"}),
            "*5\r\n:1\r\n:5\r\n:4\r\n:0\r\n:" + std::to_string(60'000 - kNow % 60'000) + "\r\n");
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "newcomer"}), "*5\r\n:0\r\n:5\r\n:-1\r\n:1000\r\n:-1\r\n");
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "newcomer", "VERBOSE"}),
            "*6\r\n:0\r\n:5\r\n:-1\r\n:1000\r\n:-1\r\n$10\r\nstore_full\r\n");
  EXPECT_EQ(Resp({"fg.check", "open", "newcomer", "cost", "2", "verbose"}),
            "*6\r\n:1\r\n:10\r\n:-1\r\n:0\r\n:-1\r\n$10\r\nstore_full\r\n");
  // A real decision: an empty reason. VERBOSE anywhere among the options.
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "held", "VERBOSE", "COST", "0"}),
            "*6\r\n:1\r\n:5\r\n:4\r\n:0\r\n:" + std::to_string(60'000 - kNow % 60'000) +
                "\r\n$0\r\n\r\n");
  // Option errors.
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "held", "COST"}),
            "-ERR syntax error: option 'COST' needs a value\r\n");
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "held", "LOUD"}),
            "-ERR syntax error: unknown option 'LOUD' (expected COST n, TIER t, PRIORITY p, WAIT "
            "ms or VERBOSE)\r\n");
  EXPECT_EQ(Resp({"FG.CHECK", "closed", "held", "VERBOSE", "TIER"}),
            "-ERR syntax error: option 'TIER' needs a value\r\n");

  // CL.THROTTLE at the full store: denied, figures unknown.
  EXPECT_EQ(Resp({"CL.THROTTLE", "cell", "15", "30", "60"}),
            "*5\r\n:1\r\n:16\r\n:-1\r\n:1\r\n:-1\r\n");
}

TEST_F(FallbackRepliesTest, MetricsCountFallbacksByReasonAndRulesShowThePolicy) {
  Start(kConfig);
  Resp({"FG.CHECK", "closed", "held"});
  Resp({"FG.CHECK", "closed", "newcomer"});
  Http("GET", "/v1/check?rule=open&key=newcomer");
  const HttpReply metrics = Http("GET", "/metrics");
  EXPECT_NE(metrics.body.find("floodgate_fallback_decisions_total{reason=\"store_full\"} 2\n"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("floodgate_fallback_decisions_total{reason=\"backend_error\"} 0\n"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("floodgate_store_rejected_full_total 2\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nfloodgate_store_bytes "), std::string::npos);

  const nlohmann::json rules = nlohmann::json::parse(Http("GET", "/v1/rules").body)["rules"];
  EXPECT_EQ(rules["closed"]["on_store_full"], "deny");
  EXPECT_EQ(rules["open"]["on_store_full"], "allow");
}

// A port nothing listens on: connections are refused at once.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(FallbackRepliesTest, HttpNamesABackendError) {
  Start(std::string(kConfig) + "redis: { timeout_ms: 200, connect_timeout_ms: 200 }\n",
        "redis://127.0.0.1:" + std::to_string(ClosedPort()));
  const HttpReply r = Http("GET", "/v1/check?rule=closed&key=gina");
  EXPECT_EQ(r.status, 200);  // on_backend_error: allow, the default
  ASSERT_NE(r.Field("Floodgate-Fallback"), nullptr);
  EXPECT_EQ(*r.Field("Floodgate-Fallback"), "backend_error");
  EXPECT_EQ(r.Field("RateLimit"), nullptr);
  const nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["fallback"], "backend_error");
  EXPECT_TRUE(j["remaining"].is_null());
  EXPECT_TRUE(j["reset_after_ms"].is_null());
  EXPECT_EQ(j["limit"], 5);
  const HttpReply metrics = Http("GET", "/metrics");
  EXPECT_NE(metrics.body.find("floodgate_fallback_decisions_total{reason=\"backend_error\"} 1\n"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("floodgate_backend_errors_total 1\n"), std::string::npos);
}

}  // namespace
}  // namespace floodgate::server
