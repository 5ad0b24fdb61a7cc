// HTTP requests answered as a session asks them (HandleHttp), without a
// socket: a loop on embedded-store services, a ManualClock, and the
// response cut into status, header fields and body. The connection is
// none, so its peer is no loopback address.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_routes.h"
#include "server/observability/metrics.h"
#include "testing/test_config.h"

namespace floodgate::testing {

// A response cut into its status, header fields and body.
struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The field's value ("" when absent); names compare case-insensitively.
  std::string Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k.size() != name.size()) continue;
      bool same = true;
      for (size_t i = 0; i < k.size(); ++i) same = same && (k[i] | 0x20) == (name[i] | 0x20);
      if (same) return v;
    }
    return "";
  }
  bool Has(std::string_view name) const { return !Header(name).empty(); }
};

inline HttpResponse ParseHttpResponse(const std::string& raw) {
  HttpResponse r;
  const size_t head_end = raw.find("\r\n\r\n");
  EXPECT_NE(head_end, std::string::npos) << raw;
  if (head_end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t at = raw.find("\r\n") + 2;
  while (at < head_end) {
    const size_t eol = raw.find("\r\n", at);
    const std::string line = raw.substr(at, eol - at);
    const size_t colon = line.find(':');
    r.headers.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    at = eol + 2;
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

// A fixture whose Send answers one request through HandleHttp. Tests set
// context_'s tokens before sending.
class HttpExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = MakeConfig("rules:\n  api: { algorithm: fixed_window, limits: [2/minute] }\n");
    services_ = MakeServices(config_, clock_);
    ASSERT_NE(services_, nullptr);
    context_.services = services_.get();
    context_.limiter = services_->core.get();
    context_.metrics = &metrics_;
    loop_ = std::make_unique<server::LoopContext>(&context_, 0);
  }

  HttpResponse Send(std::string_view method, std::string_view target,
                    std::vector<std::pair<std::string_view, std::string_view>> headers = {},
                    std::string_view body = {}) {
    http::Request req;
    req.method = method;
    req.target = target;
    req.version = "HTTP/1.1";
    req.headers = std::move(headers);
    req.body = body;
    req.keep_alive = true;
    std::string out;
    server::HandleHttp(*loop_, req, server::HttpAsync{}, &out);
    return ParseHttpResponse(out);
  }

  ManualClock clock_{1'700'000'000'000};
  server::Metrics metrics_{1};
  Config config_;
  server::ServiceContext context_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<server::LoopContext> loop_;
};

}  // namespace floodgate::testing
