// Store URLs: every accepted form, every refusal with the part it quotes,
// and passwords kept out of messages; plus host:port parsing.
#include "common/store_url.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate {
namespace {

StoreUrl Parsed(std::string_view text) {
  Result<StoreUrl> r = ParseStoreUrl(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : StoreUrl{};
}

std::vector<std::string> Nodes(const StoreUrl& url) {
  std::vector<std::string> out;
  for (const HostPort& hp : url.nodes) out.push_back(hp.ToString());
  return out;
}

TEST(UrlTest, Standalone) {
  StoreUrl u = Parsed("redis://127.0.0.1:6379");
  EXPECT_EQ(u.mode, StoreMode::kStandalone);
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(Nodes(u), std::vector<std::string>{"127.0.0.1:6379"});
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "");
  EXPECT_EQ(u.db, -1);

  u = Parsed("redis://cache.internal:7000/3");
  EXPECT_EQ(u.nodes[0].host, "cache.internal");
  EXPECT_EQ(u.nodes[0].port, 7000);
  EXPECT_EQ(u.db, 3);

  EXPECT_EQ(Parsed("redis://h:1/").db, -1);  // an empty path is no database
  EXPECT_EQ(Parsed("redis://h:1/0").db, 0);
  EXPECT_EQ(Parsed("redis://h:65535").nodes[0].port, 65535);
  EXPECT_EQ(Parsed("REDIS://h:1").mode, StoreMode::kStandalone);  // schemes ignore case
}

TEST(UrlTest, Credentials) {
  StoreUrl u = Parsed("redis://:s3cret@h:6379");
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "s3cret");

  u = Parsed("redis://alice:pw@h:6379");
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "pw");

  // Percent-encoded reserved characters; the last '@' ends the userinfo.
  u = Parsed("redis://bob:p%40ss%3Aw%2Fd%25@h:6379");
  EXPECT_EQ(u.user, "bob");
  EXPECT_EQ(u.password, "p@ss:w/d%");
  u = Parsed("redis://bob:p@ss@h:6379");
  EXPECT_EQ(u.password, "p@ss");
  EXPECT_EQ(u.nodes[0].host, "h");
}

TEST(UrlTest, Tls) {
  StoreUrl u = Parsed("rediss://redis.example.com:6380");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.mode, StoreMode::kStandalone);
  EXPECT_TRUE(u.tls_options.verify);
  EXPECT_EQ(u.tls_options.ca_file, "");

  u = Parsed(
      "rediss://:pw@10.0.0.1:6380/2?tls_ca_file=/etc/ca.pem&tls_cert_file=/c.pem&tls_key_file=/"
      "k.pem&tls_server_name=redis.internal&tls_verify=no");
  EXPECT_EQ(u.db, 2);
  EXPECT_EQ(u.password, "pw");
  EXPECT_EQ(u.tls_options.ca_file, "/etc/ca.pem");
  EXPECT_EQ(u.tls_options.cert_file, "/c.pem");
  EXPECT_EQ(u.tls_options.key_file, "/k.pem");
  EXPECT_EQ(u.tls_options.server_name, "redis.internal");
  EXPECT_FALSE(u.tls_options.verify);

  EXPECT_TRUE(Parsed("rediss://h:1?tls_verify=yes").tls_options.verify);
  EXPECT_EQ(Parsed("rediss://h:1?tls_ca_file=/a%20b.pem").tls_options.ca_file, "/a b.pem");

  u = Parsed("rediss+cluster://h1:1,h2:2");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.mode, StoreMode::kCluster);
  u = Parsed("rediss+proxy://h:1");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.mode, StoreMode::kProxy);
}

TEST(UrlTest, ClusterAndProxy) {
  StoreUrl u = Parsed("redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002");
  EXPECT_EQ(u.mode, StoreMode::kCluster);
  EXPECT_EQ(Nodes(u), (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001", "[::1]:7002"}));
  EXPECT_EQ(u.nodes[2].host, "::1");

  u = Parsed("redis+cluster://:pw@h:7000");
  EXPECT_EQ(u.password, "pw");
  EXPECT_EQ(u.nodes.size(), 1u);

  u = Parsed("redis+proxy://127.0.0.1:22121");
  EXPECT_EQ(u.mode, StoreMode::kProxy);
  EXPECT_EQ(Nodes(u), std::vector<std::string>{"127.0.0.1:22121"});
}

TEST(UrlTest, Sentinel) {
  StoreUrl u = Parsed("redis-sentinel://:pw@10.0.0.1:26379,[::1]:26380,s3:26381/mymaster?db=2");
  EXPECT_EQ(u.mode, StoreMode::kSentinel);
  EXPECT_STREQ(StoreModeName(u.mode), "sentinel");
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(Nodes(u), (std::vector<std::string>{"10.0.0.1:26379", "[::1]:26380", "s3:26381"}));
  EXPECT_EQ(u.master_name, "mymaster");
  EXPECT_EQ(u.password, "pw");  // the master's
  EXPECT_EQ(u.db, 2);
  EXPECT_EQ(u.sentinel_password, "");

  u = Parsed("redis-sentinel://h:26379/cache-1.eu?sentinel_user=s&sentinel_password=p%40ss");
  EXPECT_EQ(u.master_name, "cache-1.eu");
  EXPECT_EQ(u.db, -1);
  EXPECT_EQ(u.sentinel_user, "s");
  EXPECT_EQ(u.sentinel_password, "p@ss");
  EXPECT_EQ(u.Redacted(),
            "redis-sentinel://h:26379/cache-1.eu?sentinel_user=s&sentinel_password=***");

  EXPECT_TRUE(Parsed("rediss-sentinel://h:1/m").tls);
  EXPECT_TRUE(Parsed("redis-sentinel://h:1/m?tls=yes&tls_verify=no").tls);
  EXPECT_FALSE(Parsed("redis-sentinel://h:1/m?tls=no").tls);
  EXPECT_EQ(Parsed("redis-sentinel://:pw@h:1/m?db=0&tls=yes").Redacted(),
            "rediss-sentinel://:***@h:1/m?db=0");
}

TEST(UrlTest, Ipv6) {
  StoreUrl u = Parsed("redis://[::1]:6379");
  EXPECT_EQ(u.nodes[0].host, "::1");
  EXPECT_EQ(u.nodes[0].ToString(), "[::1]:6379");
}

struct Refusal {
  std::string url;
  std::string message_part;  // a part of the INVALID_ARGUMENT message
};

TEST(UrlTest, EveryRefusalQuotesThePartAtFault) {
  const std::vector<Refusal> cases = {
      {"", "expected scheme://"},
      {"127.0.0.1:6379", "expected scheme://"},
      {"http://h:1", "unknown scheme 'http'"},
      {"redis+sentinel://h:1", "unknown scheme 'redis+sentinel'"},
      {"redis://", "empty host"},
      {"redis://h", "missing port in 'h'"},
      {"redis://h:", "missing port in 'h:'"},
      {"redis://:6379", "empty host in ':6379'"},
      {"redis://h:0", "port out of range (1-65535) in 'h:0'"},
      {"redis://h:65536", "port out of range (1-65535) in 'h:65536'"},
      {"redis://h:99999999999999999999", "port out of range"},
      {"redis://h:6x79", "bad port in 'h:6x79'"},
      {"redis://h:-1", "bad port in 'h:-1'"},
      {"redis://ho st:1", "bad character in host 'ho st:1'"},
      {"redis://::1:6379", "IPv6 addresses need brackets"},
      {"redis://[::1:6379", "unclosed '['"},
      {"redis://[::1]", "missing port in '[::1]'"},
      {"redis://[::1]6379", "unexpected text after ']'"},
      {"redis://[]:1", "empty host in '[]:1'"},
      {"redis://[zz::1]:1", "bad IPv6 address"},
      {"redis://h1:1,h2:2", "takes one host:port"},
      {"redis+proxy://h1:1,h2:2", "redis+proxy:// takes one host:port"},
      {"redis+cluster://h1:1,,h2:2", "empty host in the list 'h1:1,,h2:2'"},
      {"redis+cluster://h1:1,h2", "missing port in 'h2'"},
      {"redis+cluster://h:1/0", "database number ('/0') is not supported with redis+cluster://"},
      {"redis+proxy://h:1/2", "database number ('/2') is not supported with redis+proxy://"},
      {"redis://h:1/abc", "bad database number '/abc'"},
      {"redis://h:1/-1", "bad database number '/-1'"},
      {"redis://h:1/1/2", "bad database number '/1/2'"},
      {"redis://h:1/99999999999", "bad database number"},
      {"redis://h:1#frag", "unexpected '#' fragment"},
      {"redis://user@h:1", "a user without a password"},
      {"redis://user:@h:1", "empty password"},
      {"redis://us%zzer:pw@h:1", "bad percent-escape in the user name"},
      {"redis://u:p%4@h:1", "bad percent-escape in the password"},
      {"redis://h:1?tls_ca_file=/ca.pem", "option 'tls_ca_file' needs a TLS scheme"},
      {"rediss://h:1?timeout=5", "unknown option 'timeout'"},
      {"rediss://h:1?tls_verify", "option 'tls_verify' needs a value"},
      {"rediss://h:1?tls_verify=maybe", "tls_verify must be yes or no, got 'maybe'"},
      {"rediss://h:1?tls_ca_file=", "option 'tls_ca_file' needs a value"},
      {"rediss://h:1?tls_ca_file=a&tls_ca_file=b", "option 'tls_ca_file' given twice"},
      {"rediss://h:1?tls_cert_file=/c.pem", "tls_cert_file and tls_key_file go together"},
      {"rediss://h:1?tls_ca_file=%4", "bad percent-escape in option"},
      {"redis-sentinel://h:1", "needs the master's name after the sentinels"},
      {"redis-sentinel://h:1/", "needs the master's name after the sentinels"},
      {"redis-sentinel://h:1/my master", "bad character in the master name 'my master'"},
      {"redis-sentinel://h:1/m?db=x", "bad database number 'x' (expected db=0"},
      {"redis-sentinel://h:1/m?db=-1", "bad database number '-1'"},
      {"redis-sentinel://h:1/m?db=1&db=2", "option 'db' given twice"},
      {"redis-sentinel://h:1/m?tls=maybe", "tls must be yes or no, got 'maybe'"},
      {"redis-sentinel://h:1/m?tls_ca_file=/ca.pem", "option 'tls_ca_file' needs a TLS scheme"},
      {"redis-sentinel://h:1/m?sentinel_user=u", "sentinel_user needs sentinel_password"},
      {"redis-sentinel://h:1/m?sentinel_password=", "option 'sentinel_password' needs a value"},
      {"redis-sentinel://h:1/m?timeout=1", "unknown option 'timeout'"},
      {"redis://h:1?db=2", "option 'db' is for redis-sentinel:// URLs (write the database as /N)"},
      {"rediss://h:1?tls=yes", "option 'tls' is for redis-sentinel:// URLs"},
  };
  for (const Refusal& c : cases) {
    Result<StoreUrl> r = ParseStoreUrl(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.url << " -> " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("store URL: ", 0), 0u) << r.status().message();
  }
}

TEST(UrlTest, PasswordsNeverInMessages) {
  const std::vector<std::string> bad = {
      "redis://:hunter2@h",
      "redis://:hunter2@h:0",
      "redis://u:hunter2@h:1/x",
      "redis://:hunter2@:1",
      "redis://:hunter2@h:1,h:2",
      "redis://:hunter2@h:1?tls_verify=no",
      "redis+cluster://:hunter2@h:1/1",
      "redis://u:hunter2%zz@h:1",
      "redis-sentinel://:hunter2@h:1",
      "redis-sentinel://h:1/m?sentinel_password=hunter2&db=x",
  };
  for (const std::string& url : bad) {
    Result<StoreUrl> r = ParseStoreUrl(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
  }
}

TEST(UrlTest, RedactedHidesThePassword) {
  EXPECT_EQ(Parsed("redis://alice:hunter2@h:1/2").Redacted(), "redis://alice:***@h:1/2");
  EXPECT_EQ(Parsed("redis://:hunter2@h:1").Redacted(), "redis://:***@h:1");
  EXPECT_EQ(Parsed("redis+cluster://a:1,[::1]:2").Redacted(), "redis+cluster://a:1,[::1]:2");
  EXPECT_EQ(Parsed("rediss+proxy://h:1?tls_verify=no").Redacted(),
            "rediss+proxy://h:1?tls_verify=no");
}

TEST(UrlTest, HostPort) {
  Result<HostPort> hp = ParseHostPort("10.1.2.3:7001");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "10.1.2.3");
  EXPECT_EQ(hp->port, 7001);
  hp = ParseHostPort("[2001:db8::5]:1");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "2001:db8::5");
  EXPECT_EQ(hp->ToString(), "[2001:db8::5]:1");
  EXPECT_FALSE(ParseHostPort("").ok());
  EXPECT_FALSE(ParseHostPort(":1").ok());
  EXPECT_FALSE(ParseHostPort("h:").ok());
  EXPECT_FALSE(ParseHostPort("h:70000").ok());
}

}  // namespace
}  // namespace floodgate
