// The dashboard's routes (/ui): redirects, the embedded assets with their
// headers, ETag revalidation, 404 and 405, through HandleHttp as a session
// calls it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "protocol/http/request_parser.h"
#include "server/http_routes.h"
#include "server/http_ui_routes.h"
#include "server/metrics.h"
#include "server/service_context.h"
#include "server/ui_assets.h"
#include "testing/test_config.h"

namespace floodgate::server {
namespace {

// A response cut into its status, header fields and body.
struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

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

Response ParseResponse(const std::string& raw) {
  Response r;
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

class UiRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ =
        testing::MakeConfig("rules:\n  api: { algorithm: fixed_window, limits: [2/minute] }\n");
    limiter_ = testing::MakeCore(config_, clock_);
    ASSERT_NE(limiter_, nullptr);
    context_.limiter = limiter_.get();
    context_.metrics = &metrics_;
    loop_ = std::make_unique<LoopContext>(&context_, 0);
  }

  Response Send(std::string_view method, std::string_view target,
                std::vector<std::pair<std::string_view, std::string_view>> headers = {}) {
    http::Request req;
    req.method = method;
    req.target = target;
    req.version = "HTTP/1.1";
    req.headers = std::move(headers);
    req.keep_alive = true;
    std::string out;
    HandleHttp(*loop_, req, HttpAsync{}, &out);
    return ParseResponse(out);
  }

  ManualClock clock_{1'700'000'000'000};
  Metrics metrics_{1};
  Config config_;
  ServiceContext context_;
  std::unique_ptr<service::LimiterCore> limiter_;
  std::unique_ptr<LoopContext> loop_;
};

TEST(UiAssetsTest, TheDashboardFilesAreBuiltIn) {
  for (std::string_view name : {"index.html", "app.js", "style.css", "favicon.svg"}) {
    const UiAsset* asset = FindUiAsset(name);
    ASSERT_NE(asset, nullptr) << name;
    EXPECT_EQ(asset->path, name);
    EXPECT_FALSE(asset->body.empty()) << name;
    EXPECT_EQ(asset->etag.size(), 34u) << asset->etag;  // 32 hex digits, quoted
    EXPECT_TRUE(asset->etag.starts_with('"') && asset->etag.ends_with('"')) << asset->etag;
  }
  EXPECT_EQ(FindUiAsset("index.html")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindUiAsset("app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(FindUiAsset("style.css")->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(FindUiAsset("favicon.svg")->content_type, "image/svg+xml");
  EXPECT_EQ(FindUiAsset("nope.js"), nullptr);
  EXPECT_EQ(FindUiAsset(""), nullptr);
}

TEST(UiAssetsTest, TheBodiesAreTheFilesBytes) {
  const UiAsset* index = FindUiAsset("index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_TRUE(index->body.starts_with("<!doctype html>")) << index->body.substr(0, 40);
  EXPECT_NE(index->body.find("src=\"app.js\""), std::string_view::npos);
  EXPECT_TRUE(index->body.ends_with("</html>\n"));
}

TEST(UiAssetsTest, IsUiPathMatchesTheRootAndBelowOnly) {
  EXPECT_TRUE(IsUiPath("/ui"));
  EXPECT_TRUE(IsUiPath("/ui/"));
  EXPECT_TRUE(IsUiPath("/ui/app.js"));
  EXPECT_FALSE(IsUiPath("/uix"));
  EXPECT_FALSE(IsUiPath("/u"));
  EXPECT_FALSE(IsUiPath("/v1/ui"));
  EXPECT_FALSE(IsUiPath("/"));
}

TEST_F(UiRoutesTest, TheRootRedirectsToTheSlash) {
  for (std::string_view method : {"GET", "HEAD"}) {
    const Response r = Send(method, "/ui");
    EXPECT_EQ(r.status, 301) << method;
    EXPECT_EQ(r.Header("Location"), "/ui/");
    EXPECT_EQ(r.Header("Content-Length"), "0");
  }
  // The query does not make it another path.
  EXPECT_EQ(Send("GET", "/ui?x=1").status, 301);
}

TEST_F(UiRoutesTest, TheSlashIsTheIndexPage) {
  const Response r = Send("GET", "/ui/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(r.body, FindUiAsset("index.html")->body);
  EXPECT_EQ(r.Header("ETag"), FindUiAsset("index.html")->etag);
  EXPECT_EQ(Send("GET", "/ui/index.html").body, r.body);
}

TEST_F(UiRoutesTest, EveryAssetCarriesTheSecurityAndCacheHeaders) {
  for (const UiAsset& asset : UiAssets()) {
    const Response r = Send("GET", "/ui/" + std::string(asset.path));
    ASSERT_EQ(r.status, 200) << asset.path;
    EXPECT_EQ(r.Header("Content-Type"), asset.content_type);
    EXPECT_EQ(r.Header("ETag"), asset.etag);
    EXPECT_EQ(r.Header("Cache-Control"), "no-cache");
    EXPECT_EQ(r.Header("Content-Security-Policy"),
              "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
              "script-src 'self'; frame-ancestors 'none'");
    EXPECT_EQ(r.Header("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r.Header("Referrer-Policy"), "no-referrer");
    EXPECT_EQ(r.Header("Content-Length"), std::to_string(asset.body.size()));
    EXPECT_EQ(r.body, asset.body);
  }
}

TEST_F(UiRoutesTest, AMatchingIfNoneMatchIsNotModified) {
  const std::string etag(FindUiAsset("app.js")->etag);
  const std::string weak = "W/" + etag;
  const std::string listed = "\"0000\", " + etag;
  for (const std::string& value : {etag, weak, listed, std::string("*")}) {
    const Response r = Send("GET", "/ui/app.js", {{"If-None-Match", value}});
    EXPECT_EQ(r.status, 304) << value;
    EXPECT_EQ(r.Header("ETag"), etag);
    EXPECT_EQ(r.Header("Cache-Control"), "no-cache");
    EXPECT_FALSE(r.Has("Content-Length"));
    EXPECT_TRUE(r.body.empty());
  }
  // Another file's tag, or none that matches: the whole file.
  const std::string other(FindUiAsset("style.css")->etag);
  for (const std::string& value : {other, std::string("\"0000\""), std::string("")}) {
    EXPECT_EQ(Send("GET", "/ui/app.js", {{"If-None-Match", value}}).status, 200) << value;
  }
}

TEST_F(UiRoutesTest, UnknownFilesAreProblems) {
  for (std::string_view target :
       {"/ui/nope.js", "/ui/app.js/x", "/ui/../http_routes.cc", "/ui/%61pp.js", "/ui//app.js"}) {
    const Response r = Send("GET", target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.Header("Content-Type"), "application/problem+json") << target;
    EXPECT_NE(r.body.find("\"detail\":\"no dashboard file"), std::string::npos) << r.body;
  }
}

TEST_F(UiRoutesTest, OnlyGetAndHead) {
  for (std::string_view method : {"POST", "PUT", "DELETE"}) {
    for (std::string_view target : {"/ui", "/ui/", "/ui/app.js"}) {
      const Response r = Send(method, target);
      EXPECT_EQ(r.status, 405) << method << " " << target;
      EXPECT_EQ(r.Header("Allow"), "GET, HEAD");
    }
  }
}

TEST_F(UiRoutesTest, NeitherTheDataPlaneTokenNorAdminAccessIsNeeded) {
  // The pages hold no data: they are public even when the data plane
  // needs a token (the data routes check their own access).
  context_.auth_token = "data-plane-secret";
  EXPECT_EQ(Send("GET", "/ui/").status, 200);
  EXPECT_EQ(Send("GET", "/v1/rules").status, 401);
}

}  // namespace
}  // namespace floodgate::server
