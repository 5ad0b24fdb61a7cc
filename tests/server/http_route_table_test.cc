// The HTTP route table (server/http/http_route_table.h): every route the docs
// name is a row and every row is in the docs; the table is well formed;
// and the dispatch answers access before anything else, 404 for a path no
// row fits and 405 for a method no row of the path answers.
#include "server/http/http_route_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "testing/http_exchange.h"

namespace floodgate::server {
namespace {

constexpr std::pair<HttpMethods, std::string_view> kMethodNames[] = {
    {kGet, "GET"}, {kHead, "HEAD"}, {kPost, "POST"}, {kPut, "PUT"}, {kDelete, "DELETE"}};

// (method, pattern) -> where the docs name it.
using Documented = std::map<std::pair<std::string, std::string>, std::string>;

// Every route the user-facing docs name: an inline code span that starts
// with methods ("GET", "POST|GET|DELETE") and a path, the path written as
// a pattern ("/v1/admin/blocks/{key}"), whatever query ("?rule=r",
// "[?limit=N]") follows it.
Documented DocumentedRoutes() {
  const std::filesystem::path root = FLOODGATE_SOURCE_DIR;
  std::vector<std::filesystem::path> files = {root / "README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  const std::regex span(
      R"(`((?:GET|HEAD|POST|PUT|DELETE)(?:\|(?:GET|HEAD|POST|PUT|DELETE))*) (/[^`\s?\[]*)[^`]*`)");
  Documented routes;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (auto it = std::sregex_iterator(s.begin(), s.end(), span); it != std::sregex_iterator();
         ++it) {
      std::string methods = (*it)[1];
      const std::string path = (*it)[2];
      size_t at = 0;
      while (at != std::string::npos) {
        const size_t bar = methods.find('|', at);
        routes.emplace(std::make_pair(methods.substr(at, bar - at), path),
                       file.filename().string());
        at = bar == std::string::npos ? bar : bar + 1;
      }
    }
  }
  return routes;
}

bool RowAnswers(std::string_view method, std::string_view pattern) {
  for (const HttpRoute& r : HttpRoutes()) {
    if (r.pattern != pattern) continue;
    for (const auto& [bit, name] : kMethodNames) {
      if (name == method && (r.methods & bit) != 0) return true;
    }
  }
  return false;
}

TEST(HttpRouteTableTest, EveryDocumentedRouteIsARow) {
  const Documented docs = DocumentedRoutes();
  ASSERT_GT(docs.size(), 30u) << "the docs' routes were not found";
  for (const auto& [route, file] : docs) {
    EXPECT_TRUE(RowAnswers(route.first, route.second))
        << file << " names `" << route.first << " " << route.second
        << "`, which no row of the route table answers";
  }
}

TEST(HttpRouteTableTest, EveryRowIsDocumented) {
  const Documented docs = DocumentedRoutes();
  for (const HttpRoute& r : HttpRoutes()) {
    for (const auto& [bit, name] : kMethodNames) {
      // HEAD goes with GET: the docs name it beside GET, if at all.
      if ((r.methods & bit) == 0 || bit == kHead) continue;
      EXPECT_TRUE(docs.contains({std::string(name), std::string(r.pattern)}))
          << "`" << name << " " << r.pattern << "` is a route the docs (docs/*.md, README.md) "
          << "never name";
    }
  }
}

// The /v1/check row is matched first: nothing is compared before it.
TEST(HttpRouteTableTest, TheDecisionIsTheFirstRow) {
  ASSERT_FALSE(HttpRoutes().empty());
  EXPECT_EQ(HttpRoutes()[0].pattern, "/v1/check");
}

// Each pattern's rows follow each other; the first carries the 405
// answer, naming every method the pattern's rows answer (HEAD may go
// unnamed beside GET); no two rows of a pattern share a method.
TEST(HttpRouteTableTest, EachPathHasOne405Answer) {
  std::set<std::string_view> seen;
  std::string_view current;
  HttpMethods methods = 0;
  std::string_view allow;
  auto check = [&] {
    if (current.empty()) return;
    std::set<std::string> named, answered;
    for (size_t at = 0; at != std::string_view::npos;) {
      const size_t comma = allow.find(", ", at);
      named.emplace(allow.substr(at, comma - at));
      at = comma == std::string_view::npos ? comma : comma + 2;
    }
    for (const auto& [bit, name] : kMethodNames) {
      if ((methods & bit) != 0) answered.emplace(name);
    }
    if (!named.contains("HEAD")) answered.erase("HEAD");
    EXPECT_EQ(named, answered) << current << ": Allow: " << allow;
  };
  for (const HttpRoute& r : HttpRoutes()) {
    EXPECT_NE(r.handler, nullptr) << r.pattern;
    EXPECT_NE(r.methods, 0) << r.pattern;
    if (r.pattern == current) {
      EXPECT_TRUE(r.allow.empty() && r.use.empty())
          << r.pattern << ": only a pattern's first row carries its 405 answer";
      EXPECT_EQ(methods & r.methods, 0) << r.pattern << ": two rows answer one method";
      methods |= r.methods;
      continue;
    }
    check();
    EXPECT_TRUE(seen.insert(r.pattern).second) << r.pattern << ": its rows are apart";
    EXPECT_FALSE(r.allow.empty()) << r.pattern << ": the first row carries the 405 answer";
    current = r.pattern;
    methods = r.methods;
    allow = r.allow;
  }
  check();
}

TEST(HttpRouteTableTest, PatternsMatchWholeNonEmptySegments) {
  std::string_view params[kMaxRouteParams];
  size_t n = 0;
  EXPECT_TRUE(MatchRoutePattern("/v1/check", "/v1/check", params, &n));
  EXPECT_EQ(n, 0u);
  EXPECT_FALSE(MatchRoutePattern("/v1/check", "/v1/checks", params, &n));
  EXPECT_FALSE(MatchRoutePattern("/v1/check", "/v1/chec", params, &n));
  EXPECT_TRUE(MatchRoutePattern("/v1/sets/{key}", "/v1/sets/a%2Fb", params, &n));
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(params[0], "a%2Fb");  // raw: the dispatch decodes after the access check
  EXPECT_FALSE(MatchRoutePattern("/v1/sets/{key}", "/v1/sets/", params, &n));
  EXPECT_FALSE(MatchRoutePattern("/v1/sets/{key}", "/v1/sets/a/b", params, &n));
  EXPECT_FALSE(MatchRoutePattern("/v1/sets/{key}", "/v1/sets", params, &n));
  EXPECT_TRUE(MatchRoutePattern("/v1/admin/subjects/{rule}/{key}/refund",
                                "/v1/admin/subjects/api/k/refund", params, &n));
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(params[0], "api");
  EXPECT_EQ(params[1], "k");
  EXPECT_FALSE(MatchRoutePattern("/v1/admin/subjects/{rule}/{key}/refund",
                                 "/v1/admin/subjects/api//refund", params, &n));
  EXPECT_FALSE(MatchRoutePattern("/ui/{file}", "/ui/", params, &n));
}

// --- dispatch ------------------------------------------------------------

class HttpDispatchTest : public testing::HttpExchangeTest {
 protected:
  using Headers = std::vector<std::pair<std::string_view, std::string_view>>;
  static constexpr std::string_view kDataToken = "Bearer data-secret";
  static constexpr std::string_view kReadToken = "Bearer read-secret";
  static constexpr std::string_view kAdminToken = "Bearer admin-secret";

  void SetUp() override {
    HttpExchangeTest::SetUp();
    context_.auth_token = "data-secret";
    context_.admin_token = "admin-secret";
    context_.read_token = "read-secret";
  }
  testing::HttpResponse As(std::string_view token, std::string_view method, std::string_view target,
                           std::string_view body = {}) {
    return Send(method, target, Headers{{"Authorization", token}}, body);
  }
};

TEST_F(HttpDispatchTest, TheDataPlaneTakesItsTokenOrTheAdminTokenNotTheReadToken) {
  const std::string_view check = "/v1/check?rule=api&key=k";
  EXPECT_EQ(Send("GET", check).status, 401);
  EXPECT_EQ(Send("GET", check).Header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(As(kReadToken, "GET", check).status, 401);
  EXPECT_EQ(As(kDataToken, "GET", check).status, 200);
  EXPECT_EQ(As(kAdminToken, "GET", check).status, 200);
  EXPECT_EQ(Send("GET", "/healthz").status, 200);  // public
  EXPECT_EQ(Send("GET", "/v1/rules").status, 401);
}

TEST_F(HttpDispatchTest, TheControlPlaneReadsTakeTheReadTokenItsWritesTheAdminToken) {
  EXPECT_EQ(Send("GET", "/v1/admin/blocks").status, 401);
  EXPECT_EQ(As(kDataToken, "GET", "/v1/admin/blocks").status, 401);
  EXPECT_EQ(As(kReadToken, "GET", "/v1/admin/blocks").status, 200);
  const testing::HttpResponse r = As(kReadToken, "DELETE", "/v1/admin/blocks/k");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("the read token cannot change anything"), std::string::npos) << r.body;
  // With no admin token, loopback clients only: this one has no address.
  context_.admin_token.clear();
  EXPECT_EQ(Send("GET", "/v1/admin/blocks").status, 403);
}

TEST_F(HttpDispatchTest, AccessComesBeforeTheRouteIsKnown) {
  // A path under the control plane that no row fits: 401 first.
  EXPECT_EQ(Send("GET", "/v1/admin/nothing").status, 401);
  testing::HttpResponse r = As(kReadToken, "GET", "/v1/admin/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no admin route for /v1/admin/nothing"), std::string::npos) << r.body;
  // A change the read token may not make, to a path or with a method that
  // does not exist: still a 403, not a hint.
  EXPECT_EQ(As(kReadToken, "PUT", "/v1/admin/nothing").status, 403);
  EXPECT_EQ(As(kReadToken, "PATCH", "/v1/admin/blocks/k").status, 403);
  EXPECT_EQ(As(kReadToken, "HEAD", "/v1/admin/blocks").status, 403);
  // A read of a write's path: the read token may learn it is a POST.
  r = As(kReadToken, "GET", "/v1/admin/subjects/api/k/refund");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "POST");
  // Leases: the data token before the hint; sets tell anyone.
  EXPECT_EQ(Send("DELETE", "/v1/leases/a/b").status, 401);
  EXPECT_EQ(As(kDataToken, "DELETE", "/v1/leases/a/b").status, 404);
  r = Send("GET", "/v1/sets/a/b");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("sets are /v1/sets/{key}"), std::string::npos) << r.body;
}

TEST_F(HttpDispatchTest, WrongMethodsAreTold405WithTheirPathsAllow) {
  testing::HttpResponse r = As(kDataToken, "DELETE", "/v1/check");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET, POST");
  r = As(kAdminToken, "POST", "/v1/admin/blocks/k");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET, PUT, DELETE");
  EXPECT_NE(r.body.find("use GET, PUT, DELETE"), std::string::npos) << r.body;
  r = As(kAdminToken, "HEAD", "/v1/admin/log");  // answered later: no HEAD
  EXPECT_EQ(r.status, 405);
  r = As(kDataToken, "GET", "/v1/leases/exports/k/l");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "DELETE, PUT");
  r = Send("POST", "/healthz");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET");
}

TEST_F(HttpDispatchTest, UnknownPathsNameThemselves) {
  const testing::HttpResponse r = Send("GET", "/nowhere");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no route for /nowhere"), std::string::npos) << r.body;
  EXPECT_EQ(Send("GET", "/v1").status, 404);
}

TEST_F(HttpDispatchTest, NamedSegmentsArriveDecodedAndABadEscapeIs400) {
  testing::HttpResponse r = As(kAdminToken, "GET", "/v1/admin/blocks/user%2F42");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"key\":\"user/42\""), std::string::npos) << r.body;
  r = As(kAdminToken, "GET", "/v1/admin/blocks/%zz");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("invalid percent-escape"), std::string::npos) << r.body;
  // Only once access is shown: nothing of the path is read before.
  EXPECT_EQ(Send("GET", "/v1/admin/blocks/%zz").status, 401);
}

}  // namespace
}  // namespace floodgate::server
