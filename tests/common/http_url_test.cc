// ParseHttpUrl: accepted forms and each refusal.
#include "common/http_url.h"

#include <gtest/gtest.h>

namespace floodgate {
namespace {

TEST(HttpUrlTest, AcceptedForms) {
  auto u = ParseHttpUrl("http://127.0.0.1:9000/sms/send?tenant=a");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->path, "/sms/send?tenant=a");
  EXPECT_EQ(u->HostHeader(), "127.0.0.1:9000");
  u = ParseHttpUrl("http://gateway.internal");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "/");
  u = ParseHttpUrl("http://h?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->path, "/?x=1");
  u = ParseHttpUrl("http://[::1]:8080/p");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->HostHeader(), "[::1]:8080");
}

TEST(HttpUrlTest, Refusals) {
  const std::pair<const char*, const char*> cases[] = {
      {"https://h/", "https is not supported"},
      {"ftp://h/", "must start with http://"},
      {"h:80/", "must start with http://"},
      {"http://", "no host"},
      {"http://:80/", "no host"},
      {"http://h:/", "empty port"},
      {"http://h:0/", "port must be between 1 and 65535"},
      {"http://h:65536/", "port must be between 1 and 65535"},
      {"http://h:8x/", "bad port"},
      {"http://user:pw@h/", "user info"},
      {"http://h/a b", "spaces or control"},
      {"http://h/a\r\nX: y", "spaces or control"},
      {"http://h/#frag", "#fragment"},
      {"http://h_!/", "bad character in the host"},
      {"http://[::1/", "unclosed '['"},
      {"http://[zz]/", "bad IPv6 address"},
      {"http://[::1]x/", "unexpected text after ']'"},
  };
  for (const auto& [url, want] : cases) {
    auto u = ParseHttpUrl(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find(want), std::string::npos)
        << url << ": " << u.status().message();
  }
}

}  // namespace
}  // namespace floodgate
