// The dashboard's routes (/ui): redirects, the embedded assets with their
// headers, ETag revalidation, 404 and 405, through HandleHttp as a session
// calls it.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "server/http/http_ui_routes.h"
#include "server/http/ui_assets.h"
#include "testing/http_exchange.h"

namespace floodgate::server {
namespace {

using Response = testing::HttpResponse;
using UiRoutesTest = testing::HttpExchangeTest;

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

TEST_F(UiRoutesTest, OnlyTheRootAndBelowAreTheDashboards) {
  for (std::string_view target : {"/uix", "/u", "/v1/ui", "/"}) {
    const Response r = Send("GET", target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("no dashboard file"), std::string::npos) << r.body;
  }
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
