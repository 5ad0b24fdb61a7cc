// The Envoy rules' subject keys: escaped so that no two descriptors share
// one, bounded by a hash. (Matching and answers are tested through the
// server's RlsCall, tests/server/rls_service_test.cc.)
#include "service/envoy/envoy_rules.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate::envoy {
namespace {

TEST(SubjectKeyTest, EscapedAndBounded) {
  EXPECT_EQ(SubjectKey("d", {{"a", "b"}, {"c", "d"}}), "d|a=b|c=d");
  // Separators inside names cannot make two descriptors share a key.
  EXPECT_NE(SubjectKey("d", {{"a|b", "c"}}), SubjectKey("d", {{"a", "b|c"}}));
  EXPECT_NE(SubjectKey("d", {{"a=b", "c"}}), SubjectKey("d", {{"a", "b=c"}}));
  EXPECT_EQ(SubjectKey("d", {{"a=b", "c"}}), "d|a\\=b=c");
  const std::string big(600, 'x');
  const std::string key = SubjectKey("d", {{"k", big}});
  EXPECT_EQ(key.size(), 7u + 64u);
  EXPECT_EQ(key.substr(0, 7), "sha256:");
  EXPECT_NE(key, SubjectKey("d", {{"k", big + "y"}}));
}

TEST(SubjectKeyTest, IntoAStringReplacesWhatItHeld) {
  std::string key = "left over from another descriptor, longer than the next key";
  SubjectKey("d", {{"a", "b"}}, &key);
  EXPECT_EQ(key, "d|a=b");
  const std::string big(600, 'x');
  SubjectKey("d", {{"k", big}}, &key);
  EXPECT_EQ(key, SubjectKey("d", {{"k", big}}));
}

}  // namespace
}  // namespace floodgate::envoy
