// Answers a callback-only operation (expiring sets, OTP, FG.RESET) gets at
// once, on the embedded store, reach a session that no event loop serves,
// as the session fuzzers drive them: each fills its place in the reply
// queue while its request is handled, so a pipeline mixing them with
// FG.CHECK (answered now, no callback) is answered whole and in order.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/open_services.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "protocol/http/request_parser.h"
#include "protocol/resp/parser.h"
#include "protocol/resp/writer.h"
#include "server/context/answer.h"
#include "server/context/service_context.h"
#include "server/http/http_session.h"
#include "server/observability/metrics.h"
#include "server/resp/resp_session.h"
#include "service/services.h"

namespace floodgate::server {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// A limiter on the embedded store and one loop's context, with no loop.
class SessionWithoutLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = ParseConfig(R"(
engine: { shards: 1, sweep_interval_ms: 0 }
rules:
  api: { algorithm: fixed_window, limits: [2/minute] }
sets: { max_members: 8, max_ttl: 1h }
otp: { issue_limit: 5/m, verify_limit: 5/m }
)",
                              "test");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->otp.secret = "inline-answers-secret-0123";
    auto limiter_services = api::OpenServices(*config, clock_);
    ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
    services_ = std::move(*limiter_services);
    context_.services = services_.get();
    context_.limiter = services_->core.get();
    context_.metrics = &metrics_;
    loop_ = std::make_unique<LoopContext>(&context_, 0);
  }

  // Feeds `input` to `session` the way the loop does (one batch per call,
  // again while it consumes) and returns what it wrote.
  static std::string Feed(Session& session, std::string_view input) {
    std::string output;
    bool close = false;
    while (!input.empty() && !close) {
      const size_t used = session.OnInput(input, &output, &close);
      if (used == 0) break;
      input.remove_prefix(used);
    }
    EXPECT_TRUE(input.empty());
    EXPECT_EQ(session.InFlight(), 0u);
    return output;
  }

  ManualClock clock_{kNow};
  Metrics metrics_{1};
  ServiceContext context_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<LoopContext> loop_;
};

std::string Command(const std::vector<std::string>& args) {
  std::string out;
  resp::AppendArrayHeader(&out, static_cast<int64_t>(args.size()));
  for (const std::string& a : args) resp::AppendBulk(&out, a);
  return out;
}

// The length of the RESP2 reply at the front of `s` (0: incomplete).
size_t ReplyLength(std::string_view s) {
  const size_t eol = s.find("\r\n");
  if (s.empty() || eol == std::string_view::npos) return 0;
  const int64_t n = s[0] == '$' || s[0] == '*' ? std::stoll(std::string(s.substr(1, eol - 1))) : 0;
  size_t used = eol + 2;
  if (s[0] == '$' && n >= 0) {
    const size_t end = used + static_cast<size_t>(n) + 2;
    return end > s.size() ? 0 : end;
  }
  if (s[0] == '*') {
    for (int64_t i = 0; i < n; ++i) {
      const size_t element = ReplyLength(s.substr(used));
      if (element == 0) return 0;
      used += element;
    }
  }
  return used;
}

// RESP2 output cut into its replies.
std::vector<std::string> Replies(std::string_view output) {
  std::vector<std::string> replies;
  while (!output.empty()) {
    const size_t n = ReplyLength(output);
    if (n == 0) {
      ADD_FAILURE() << "incomplete reply: " << output;
      break;
    }
    replies.emplace_back(output.substr(0, n));
    output.remove_prefix(n);
  }
  return replies;
}

// FG.CHECK's reply begins with allowed, limit and remaining.
std::string CheckPrefix(bool allowed, int64_t remaining) {
  return "*5\r\n:" + std::to_string(allowed ? 1 : 0) + "\r\n:2\r\n:" + std::to_string(remaining) +
         "\r\n";
}

TEST_F(SessionWithoutLoopTest, RespPipelineGetsEveryReplyInOrder) {
  RespSessionFactory factory({loop_.get()}, resp::ParserLimits{});
  auto session = factory.NewSession(0, {});  // no loop: nothing may be posted

  const std::string pipeline =
      Command({"FG.CHECK", "api", "k"}) + Command({"FG.SADD", "devices", "d1", "60000"}) +
      Command({"FG.CHECK", "api", "k"}) + Command({"FG.OTP.ISSUE", "+15550100"}) +
      Command({"FG.CHECK", "api", "k"}) + Command({"FG.RESET", "api", "k"}) +
      Command({"FG.CHECK", "api", "k"}) + Command({"FG.SMEMBERS", "devices"}) +
      Command({"FG.OTP.VERIFY", "+15550199", "123456"}) + Command({"FG.SCARD", "devices"});
  const std::vector<std::string> replies = Replies(Feed(*session, pipeline));
  ASSERT_EQ(replies.size(), 10u);
  EXPECT_TRUE(replies[0].starts_with(CheckPrefix(true, 1))) << replies[0];
  EXPECT_EQ(replies[1], ":1\r\n");
  EXPECT_TRUE(replies[2].starts_with(CheckPrefix(true, 0))) << replies[2];
  EXPECT_TRUE(replies[3].starts_with("$6\r\n")) << replies[3];  // the code
  EXPECT_TRUE(replies[4].starts_with(CheckPrefix(false, 0))) << replies[4];
  EXPECT_EQ(replies[5], "+OK\r\n");
  EXPECT_TRUE(replies[6].starts_with(CheckPrefix(true, 1))) << replies[6];  // after the reset
  EXPECT_EQ(replies[7], "*1\r\n$2\r\nd1\r\n");
  EXPECT_EQ(replies[8], ":0\r\n");  // a subject with no code
  EXPECT_EQ(replies[9], ":1\r\n");

  // The issued code verifies, in a second pipeline between two checks.
  const std::string code = replies[3].substr(4, 6);
  const std::vector<std::string> again = Replies(Feed(
      *session, Command({"FG.CHECK", "api", "k"}) + Command({"FG.OTP.VERIFY", "+15550100", code}) +
                    Command({"FG.SISMEMBER", "devices", "d1"}) +
                    Command({"FG.CHECK", "api", "k"})));
  ASSERT_EQ(again.size(), 4u);
  EXPECT_TRUE(again[0].starts_with(CheckPrefix(true, 0))) << again[0];
  EXPECT_EQ(again[1], ":1\r\n");
  EXPECT_EQ(again[2], ":1\r\n");
  EXPECT_TRUE(again[3].starts_with(CheckPrefix(false, 0))) << again[3];
}

// HTTP responses cut at their ends: Content-Length, no body after HEAD.
std::vector<std::string> Responses(std::string_view output, const std::vector<bool>& heads) {
  std::vector<std::string> responses;
  for (bool head : heads) {
    const size_t end = output.find("\r\n\r\n");
    const size_t field = output.find("Content-Length: ");
    if (end == std::string_view::npos || field == std::string_view::npos || field > end) {
      ADD_FAILURE() << "no whole response in: " << output;
      break;
    }
    const size_t length = head ? 0 : std::stoul(std::string(output.substr(field + 16)));
    responses.emplace_back(output.substr(0, end + 4 + length));
    output.remove_prefix(end + 4 + length);
  }
  EXPECT_TRUE(output.empty()) << output;
  return responses;
}

std::string Post(std::string_view target, std::string_view body) {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

std::string Get(std::string_view method, std::string_view target) {
  return std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n\r\n";
}

TEST_F(SessionWithoutLoopTest, HttpPipelineGetsEveryResponseInOrder) {
  HttpSessionFactory factory({loop_.get()}, http::ParserLimits{});
  auto session = factory.NewSession(0, {});

  const std::string pipeline =
      Get("GET", "/v1/check?rule=api&key=k") +
      Post("/v1/sets/devices", R"({"member":"d1","ttl_ms":60000})") +
      Post("/v1/otp/issue", R"({"subject":"+15550100"})") + Get("GET", "/v1/check?rule=api&key=k") +
      Get("HEAD", "/v1/sets/devices") +
      Post("/v1/otp/verify", R"({"subject":"+15550199","code":"123456"})") +
      Get("GET", "/v1/sets/devices?member=d1") + Get("GET", "/v1/check?rule=api&key=k");
  const std::vector<std::string> responses =
      Responses(Feed(*session, pipeline), {false, false, false, false, true, false, false, false});
  ASSERT_EQ(responses.size(), 8u);
  EXPECT_TRUE(responses[0].starts_with("HTTP/1.1 200 ")) << responses[0];
  EXPECT_NE(responses[1].find("\"added\":true"), std::string::npos) << responses[1];
  EXPECT_NE(responses[2].find("\"code\":\""), std::string::npos) << responses[2];
  EXPECT_TRUE(responses[3].starts_with("HTTP/1.1 200 ")) << responses[3];
  EXPECT_TRUE(responses[4].starts_with("HTTP/1.1 200 ")) << responses[4];
  EXPECT_TRUE(responses[4].ends_with("\r\n\r\n")) << responses[4];  // HEAD: no body
  EXPECT_NE(responses[5].find("\"valid\":false"), std::string::npos) << responses[5];
  EXPECT_NE(responses[6].find("\"present\":true"), std::string::npos) << responses[6];
  EXPECT_TRUE(responses[7].starts_with("HTTP/1.1 429 ")) << responses[7];
}

// Only the request in progress fills its place at once; an earlier
// request's answer, or one given after its request, is a later answer and
// goes to the connection's loop (none here: it is dropped).
TEST(RequestInProgressTest, OnlyTheRequestInProgressFillsItsPlace) {
  ReplyQueue replies;
  std::string output;
  const auto writes = [](std::string text) {
    return [text](const Status&, std::string* reply) { reply->append(text); };
  };
  std::function<void(const Status&)> first, second, third;
  const uint64_t first_tag = 1;  // a queue's tags count from 1
  {
    std::string* out = replies.Target(&output);
    const RequestInProgress request(&replies, &output);
    first = ReplyTo{&replies, {}, out}.Later<>(writes("1"));
  }
  {
    std::string* out = replies.Target(&output);
    const RequestInProgress request(&replies, &output);
    second = ReplyTo{&replies, {}, out}.Later<>(writes("2"));
    first(Status::Ok());   // not this request's: dropped
    second(Status::Ok());  // this request's: fills its place, behind the first
  }
  EXPECT_EQ(output, "");
  EXPECT_EQ(replies.in_flight(), 1u);
  replies.Complete(
      first_tag, [](std::string* reply) { reply->append("1"); }, &output);
  EXPECT_EQ(output, "12");

  third = ReplyTo{&replies, {}, replies.Target(&output)}.Later<>(writes("3"));
  third(Status::Ok());  // outside any request: a later answer, dropped
  EXPECT_EQ(output, "12");
  EXPECT_EQ(replies.in_flight(), 1u);
}

}  // namespace
}  // namespace floodgate::server
