// The admin section (config/admin_section.h): the two token variables,
// allow_plaintext and client_names, their defaults, and each mistake's
// exact message. No message quotes a
// token: the file only names variables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

TEST(AdminConfigTest, TokenVariablesAndDefaults) {
  const Config defaults = Parse("");
  EXPECT_EQ(defaults.admin.token_env, "");
  EXPECT_EQ(defaults.admin.read_token_env, "");
  const Config c = Parse("admin:\n  token_env: FG_ADMIN\n  read_token_env: _fg_read_2\n");
  EXPECT_EQ(c.admin.token_env, "FG_ADMIN");
  EXPECT_EQ(c.admin.read_token_env, "_fg_read_2");
  EXPECT_EQ(Parse("admin: { read_token_env: R }\n").admin.token_env, "");
  EXPECT_FALSE(defaults.admin.allow_plaintext);
  EXPECT_TRUE(Parse("admin: { token_env: A, allow_plaintext: true }\n").admin.allow_plaintext);
  EXPECT_TRUE(defaults.admin.client_names.empty());
}

// A client certificate's name is an admin identity only where certificates
// are verified: mTLS on a front that serves admin routes.
constexpr const char* kMtls =
    "tls: { cert_file: s.pem, key_file: s.key, client_ca_file: ca.pem }\n"
    "listen_tls: { http: true }\n";

TEST(AdminConfigTest, ClientNames) {
  const Config c =
      Parse(std::string(kMtls) + "admin: { client_names: [ops.example.com, 'spiffe://e/x'] }\n");
  EXPECT_EQ(c.admin.client_names, (std::vector<std::string>{"ops.example.com", "spiffe://e/x"}));
  EXPECT_EQ(Error(std::string(kMtls) + "admin: { client_names: ops.example.com }\n"),
            "test.yaml:3:24: 'admin.client_names' must be a list of client certificate names, "
            "not a string (near 'client_names')");
  EXPECT_EQ(Error(std::string(kMtls) + "admin: { client_names: [a, a] }\n"),
            "test.yaml:3:28: admin.client_names: 'a' is listed twice (near 'a')");
  EXPECT_EQ(Error(std::string(kMtls) + "admin: { client_names: [''] }\n"),
            "test.yaml:3:25: admin.client_names: a name is 1 to 253 bytes (near '')");
  EXPECT_EQ(Error("admin: { client_names: [ops.example.com] }\n"),
            "test.yaml: admin.client_names needs tls.client_ca_file (the CAs client certificates "
            "are verified against) and listen_tls on resp or http");
  EXPECT_EQ(Error("tls: { cert_file: s.pem, key_file: s.key }\nlisten_tls: { http: true }\n"
                  "admin: { client_names: [ops.example.com] }\n"),
            "test.yaml: admin.client_names needs tls.client_ca_file (the CAs client certificates "
            "are verified against) and listen_tls on resp or http");
}

TEST(AdminConfigTest, MistakesAreRefusedWithTheirPlace) {
  EXPECT_EQ(Error("admin:\n  token_env: 1ADMIN\n"),
            "test.yaml:2:14: 'admin.token_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near '1ADMIN')");
  EXPECT_EQ(Error("admin:\n  read_token_env: FG-READ\n"),
            "test.yaml:2:19: 'admin.read_token_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near 'FG-READ')");
  EXPECT_EQ(Error("admin:\n  token_env: [FG_ADMIN]\n"),
            "test.yaml:2:14: 'admin.token_env' must be a string, not a list (near 'token_env')");
  // A token in the file is refused as an unknown key, without quoting it.
  EXPECT_EQ(Error("admin:\n  token: hunter2\n"),
            "test.yaml:2:3: unknown key 'token' in admin; expected token_env, read_token_env, "
            "allow_plaintext or client_names (near 'token')");
  EXPECT_EQ(Error("admin:\n  token_env: A\n  allow_plaintext: maybe\n"),
            "test.yaml:3:20: 'admin.allow_plaintext' must be true or false (near 'maybe')");
  EXPECT_EQ(Error("admin:\n  token_env: A\n  token_env: B\n"),
            "test.yaml:3:3: duplicate key 'token_env' (first defined on line 2) (near "
            "'token_env')");
  EXPECT_EQ(Error("admin: FG_ADMIN\n"),
            "test.yaml:1:8: 'admin' must be a map, not a string (near 'admin')");
  // Unlike most sections, an empty admin section is refused.
  EXPECT_EQ(Error("admin:\n"), "test.yaml:1:1: 'admin' must be a map, not empty (near 'admin')");
}

}  // namespace
}  // namespace floodgate
