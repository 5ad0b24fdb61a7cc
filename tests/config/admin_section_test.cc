// The admin section (config/admin_section.h): the two token variables,
// their defaults, and each mistake's exact message. No message quotes a
// token: the file only names variables.
#include <gtest/gtest.h>

#include <string>

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
            "test.yaml:2:3: unknown key 'token' in admin; expected token_env, read_token_env or "
            "allow_plaintext (near 'token')");
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
