// The server sections (config/server_section.h): `listen` and `server`,
// their values and defaults, and each mistake's exact message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseConfigErrorTest, ListenAddresses) {
  EXPECT_EQ(Parse("listen: {http: \"[::]:8080\"}\n").listen.http, "[::]:8080");
  for (const char* bad :
       {"8080", ":8080", "host:", "host:65536", "host:80a", "a b:80", "[::1:80", "[zz]:80"}) {
    EXPECT_EQ(Error(std::string("listen:\n  resp: \"") + bad + "\"\n"),
              std::string("test.yaml:2:9: 'listen.resp' must be host:port, e.g. 127.0.0.1:8080, "
                          "or off (near '") +
                  bad + "')")
        << bad;
  }
  EXPECT_EQ(Parse("listen: {grpc: \"h:65535\"}\n").listen.grpc, "h:65535");
  EXPECT_EQ(Error("listen:\n  http:\n"),
            "test.yaml:2:3: 'listen.http' must be a string, not empty (near 'http')");
}

TEST(ParseConfigTest, ListenOffTurnsAFrontOff) {
  // As --http off on the command line; false too, quoted or not.
  for (const char* off : {"off", "OFF", "\"off\"", "false", "False"}) {
    SCOPED_TRACE(off);
    const Config c = Parse(std::string("listen:\n  http: ") + off + "\n  resp: " + off +
                           "\n  grpc: " + off + "\n");
    EXPECT_EQ(c.listen.http, "off");
    EXPECT_EQ(c.listen.resp, "off");
    EXPECT_EQ(c.listen.grpc, "off");
  }
  const Config one = Parse("listen: { http: off }\n");
  EXPECT_EQ(one.listen.http, "off");
  EXPECT_EQ(one.listen.resp, "127.0.0.1:6479");
  EXPECT_EQ(Error("listen: { http: no }\n"),
            "test.yaml:1:17: 'listen.http' must be host:port, e.g. 127.0.0.1:8080, or off (near "
            "'no')");
}

TEST(ParseConfigTest, ServerSection) {
  const Config defaults = Parse("");
  EXPECT_EQ(defaults.server.threads, 0);
  EXPECT_EQ(defaults.server.max_connections, 10'000);
  EXPECT_EQ(defaults.server.auth_token, "");
  EXPECT_EQ(defaults.server.auth_token_env, "");
  const Config c = Parse(
      "server:\n  threads: 4\n  max_connections: 20000\n  auth_token: s3cr\"t\n"
      "  auth_token_env: FG_TOKEN_2\n");
  EXPECT_EQ(c.server.threads, 4);
  EXPECT_EQ(c.server.max_connections, 20000);
  EXPECT_EQ(c.server.auth_token, "s3cr\"t");
  EXPECT_EQ(c.server.auth_token_env, "FG_TOKEN_2");
  EXPECT_EQ(Parse("server:\n").server.threads, 0);
}

TEST(ParseConfigTest, ServerBoundsAndTimeouts) {
  const Config defaults = Parse("");
  EXPECT_EQ(defaults.server.max_connections_per_ip, 0);
  EXPECT_EQ(defaults.server.http_request_timeout_ms, 10'000);
  EXPECT_EQ(defaults.server.http_idle_timeout_ms, 60'000);
  EXPECT_EQ(defaults.server.resp_command_timeout_ms, 10'000);
  EXPECT_EQ(defaults.server.resp_idle_timeout_ms, 0);
  EXPECT_EQ(defaults.server.output_soft_limit, 1 << 20);
  EXPECT_EQ(defaults.server.output_soft_timeout_ms, 10'000);
  EXPECT_EQ(defaults.server.output_hard_limit, 16 << 20);
  EXPECT_EQ(defaults.server.drain_timeout_ms, 5'000);
  EXPECT_EQ(defaults.server.grpc_keepalive_time_ms, 60'000);
  EXPECT_EQ(defaults.server.grpc_keepalive_timeout_ms, 20'000);
  const Config c = Parse(
      "server:\n  max_connections_per_ip: 50\n  http_request_timeout: 500ms\n"
      "  http_idle_timeout: off\n  resp_command_timeout: 0\n  resp_idle_timeout: 5m\n"
      "  output_soft_limit: 64kb\n  output_soft_timeout: 2s\n  output_hard_limit: 1m\n"
      "  drain_timeout: 30s\n  grpc_keepalive_time: 2h\n  grpc_keepalive_timeout: 1s\n");
  EXPECT_EQ(c.server.max_connections_per_ip, 50);
  EXPECT_EQ(c.server.http_request_timeout_ms, 500);
  EXPECT_EQ(c.server.http_idle_timeout_ms, 0);
  EXPECT_EQ(c.server.resp_command_timeout_ms, 0);
  EXPECT_EQ(c.server.resp_idle_timeout_ms, 300'000);
  EXPECT_EQ(c.server.output_soft_limit, 64 * 1024);
  EXPECT_EQ(c.server.output_soft_timeout_ms, 2'000);
  EXPECT_EQ(c.server.output_hard_limit, 1'000'000);  // m is 10^6, mb 2^20, as in Redis
  EXPECT_EQ(c.server.drain_timeout_ms, 30'000);
  EXPECT_EQ(c.server.grpc_keepalive_time_ms, 7'200'000);
  EXPECT_EQ(c.server.grpc_keepalive_timeout_ms, 1'000);
  const Config sizes = Parse("server: { output_soft_limit: 3MiB, output_hard_limit: 1GB }\n");
  EXPECT_EQ(sizes.server.output_soft_limit, 3 << 20);
  EXPECT_EQ(sizes.server.output_hard_limit, int64_t{1} << 30);
  const Config off = Parse("server: { output_soft_limit: off, output_soft_timeout: 0 }\n");
  EXPECT_EQ(off.server.output_soft_limit, 0);
}

TEST(ParseConfigErrorTest, ServerBoundsAndTimeouts) {
  EXPECT_EQ(Error("server:\n  http_request_timeout: 5\n"),
            "test.yaml:2:25: 'server.http_request_timeout' must be a number and a unit, e.g. "
            "500ms, 30s, 5m, 1h or 7d (near '5')");
  EXPECT_EQ(Error("server:\n  resp_idle_timeout: 8d\n"),
            "test.yaml:2:22: 'server.resp_idle_timeout' must be from 1ms to 7d "
            "(near '8d')");
  EXPECT_EQ(Error("server:\n  drain_timeout: 0\n"),
            "test.yaml:2:18: 'server.drain_timeout' must be a number and a unit, e.g. 500ms, "
            "30s, 5m, 1h or 7d (near '0')");
  EXPECT_EQ(Error("server:\n  output_soft_limit: 12 parsecs\n"),
            "test.yaml:2:22: 'server.output_soft_limit' must be a size between 0 and "
            "1099511627776 bytes: an integer, or one with a unit k, kb, m, mb, g or gb (e.g. "
            "512mb, 1gb) (near '12 parsecs')");
  EXPECT_EQ(Error("server:\n  output_hard_limit: -1\n"),
            "test.yaml:2:22: 'server.output_hard_limit' must be a size between 0 and "
            "1099511627776 bytes: an integer, or one with a unit k, kb, m, mb, g or gb (e.g. "
            "512mb, 1gb) (near '-1')");
  EXPECT_EQ(Error("server:\n  output_soft_limit: 2mb\n  output_hard_limit: 1mb\n"),
            "test.yaml:1:1: 'server.output_hard_limit' must be larger than "
            "'server.output_soft_limit' (or 0: none) (near 'server')");
  EXPECT_EQ(Error("server:\n  output_soft_limit: 0\n"),
            "test.yaml:1:1: 'server.output_soft_timeout' needs 'server.output_soft_limit' (or "
            "set the timeout to 0 too) (near 'server')");
  EXPECT_EQ(Error("server:\n  max_connections_per_ip: -2\n"),
            "test.yaml:2:27: 'server.max_connections_per_ip' must be an integer between 0 and "
            "10000000 (near '-2')");
}

TEST(ParseConfigErrorTest, ServerSection) {
  EXPECT_EQ(Error("server:\n  threads: -1\n"),
            "test.yaml:2:12: 'server.threads' must be an integer between 0 and 1024 (near '-1')");
  EXPECT_EQ(Error("server:\n  threads: 1025\n"),
            "test.yaml:2:12: 'server.threads' must be an integer between 0 and 1024 (near '1025')");
  EXPECT_EQ(Error("server:\n  max_connections: 0\n"),
            "test.yaml:2:20: 'server.max_connections' must be an integer between 1 and 10000000 "
            "(near '0')");
  EXPECT_EQ(Error("server:\n  auth_token_env: 1TOKEN\n"),
            "test.yaml:2:19: 'server.auth_token_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near '1TOKEN')");
  EXPECT_EQ(Error("server:\n  port: 1\n"),
            "test.yaml:2:3: unknown key 'port' in server; expected threads, max_connections, "
            "max_connections_per_ip, http_request_timeout, http_idle_timeout, "
            "resp_command_timeout, resp_idle_timeout, output_soft_limit, output_soft_timeout, "
            "output_hard_limit, drain_timeout, grpc_keepalive_time, grpc_keepalive_timeout, "
            "auth_token, auth_token_env or trusted_proxies (near 'port')");
  EXPECT_EQ(Error("server: [threads]\n"),
            "test.yaml:1:9: 'server' must be a map, not a list (near 'server')");
  // The token is a secret: no message quotes it.
  EXPECT_EQ(Error("server:\n  auth_token: [hunter2]\n"),
            "test.yaml:2:15: 'server.auth_token' must be a string, not a list (near "
            "'auth_token')");
  const std::string syntax = Error("server:\n  auth_token: hunter2: x\n");
  EXPECT_EQ(syntax,
            "test.yaml:2:22: YAML syntax error: illegal map value (near '(auth_token line not "
            "shown)')");
  EXPECT_THAT(syntax, Not(HasSubstr("hunter2"))) << syntax;
}

}  // namespace
}  // namespace floodgate
