// A rule's `priorities` option (config/priorities_option.h): classes and
// their shares as written, and each mistake's message with its place.
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

std::string Rule(const std::string& body) { return "rules:\n  api: " + body + "\n"; }

TEST(PrioritiesOptionTest, ClassesInTheConfigsOrderWithTheirShares) {
  EXPECT_TRUE(Parse(Rule("{ limits: 10/s }")).rules[0].priorities.empty());
  const std::vector<PriorityClass> classes =
      Parse(Rule("{ limits: 10/s, priorities: { critical: 0%, default: 20%, batch: 40 } }"))
          .rules[0]
          .priorities;
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes[0], (PriorityClass{"critical", 0}));
  EXPECT_EQ(classes[1], (PriorityClass{"default", 20}));
  EXPECT_EQ(classes[2], (PriorityClass{"batch", 40}));
  EXPECT_EQ(Parse(Rule("{ limits: 10/s, priorities: { bulk: 99% } }")).rules[0].priorities[0],
            (PriorityClass{"bulk", 99}));
}

TEST(PrioritiesOptionTest, ASharesIsAWholePercentageBelowAHundred) {
  for (const std::string bad : {"100%", "150%", "-5%", "12.5%", "x", "40%%"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Error(Rule("{ limits: 10/s, priorities: { batch: " + bad + " } }")),
              "test.yaml:2:45: 'rules.api.priorities.batch' must be the share of the limit kept "
              "back from the class, a whole percentage from 0% to 99% (near '" +
                  bad + "')");
  }
}

TEST(PrioritiesOptionTest, NamesShapeAndCount) {
  EXPECT_EQ(Error(Rule("{ limits: 10/s, priorities: { 'a b': 10% } }")),
            "test.yaml:2:38: priority class names are 1 to 64 characters of A-Z, a-z, 0-9, '_', "
            "'.', ':' or '-' (near 'a b')");
  EXPECT_EQ(Error(Rule("{ limits: 10/s, priorities: {} }")),
            "test.yaml:2:36: 'rules.api.priorities' names no class (near 'priorities')");
  EXPECT_EQ(Error(Rule("{ limits: 10/s, priorities: 40% }")),
            "test.yaml:2:36: 'rules.api.priorities' must be a map of class name to the share kept "
            "back, like { batch: 40% }, not a string (near 'priorities')");
  std::string many = "{ limits: 10/s, priorities: {";
  for (int i = 0; i < 9; ++i) many += " c" + std::to_string(i) + ": 1%,";
  many.back() = ' ';
  many += "} }";
  EXPECT_NE(Error(Rule(many)).find("has too many classes (at most 8)"), std::string::npos);
  EXPECT_NE(Error(Rule("{ limits: 10/s, priorities: { a: 1%, a: 2% } }")), "");
}

TEST(PrioritiesOptionTest, NotWithSlicesNorOnAConcurrencyRule) {
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: {}, priorities: { batch: 40% } }")),
            "test.yaml:2:36: 'priorities' cannot go with 'slices': a slice is taken for every "
            "class at once, so no class could be kept back from it (near 'priorities')");
  EXPECT_EQ(Error(Rule("{ algorithm: concurrency, max_in_flight: 3, priorities: { b: 1% } }")),
            "test.yaml:2:52: 'priorities' is not for algorithm: concurrency (it takes "
            "max_in_flight, lease_ttl, tiers of a max_in_flight each, on_backend_error, "
            "on_store_full and max_waiters) (near 'priorities')");
}

}  // namespace
}  // namespace floodgate
