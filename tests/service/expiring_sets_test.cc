// ExpiringSets through the Limiter on the embedded store and a ManualClock:
// bad input gets a clear error and changes nothing, the 999/1000 ms edge,
// the cap, sets sharing engine.max_entries with rule state and reload
// leaving sets alone, and the counters.
#include "floodgate/expiring_sets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/limiter.h"

namespace floodgate {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

std::unique_ptr<Limiter> MakeLimiter(const std::string& yaml, const Clock& clock) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;
  auto l = Limiter::Create(config, clock);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

std::vector<std::string> Names(ExpiringSets& sets, std::string_view key) {
  auto members = sets.Members(key);
  EXPECT_TRUE(members.ok()) << members.status().ToString();
  std::vector<std::string> out;
  if (members.ok()) {
    for (const SetMember& m : *members) out.push_back(m.member);
  }
  return out;
}

TEST(ExpiringSetsTest, BadInputIsRefusedClearlyAndChangesNothing) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("sets: { max_members: 3, max_ttl: 1h }\n", clock);
  ExpiringSets& sets = limiter->sets();
  auto expect_error = [](const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  expect_error(sets.Add("", "m", 1000).status(), "key must not be empty");
  expect_error(sets.Add(std::string(513, 'k'), "m", 1000).status(), "key is 513 bytes");
  expect_error(sets.Add("k", "", 1000).status(), "member must not be empty");
  expect_error(sets.Add("k", std::string(513, 'm'), 1000).status(), "member is 513 bytes");
  expect_error(sets.Add("k", "m", 0).status(), "ttl_ms must be between 1 and 3600000");
  expect_error(sets.Add("k", "m", -5).status(), "got -5");
  expect_error(sets.Add("k", "m", 3'600'001).status(), "sets.max_ttl");
  expect_error(sets.Add("k", "m", INT64_MAX).status(), "ttl_ms");
  expect_error(sets.Remove("k", "").status(), "member must not be empty");
  expect_error(sets.Contains("", "m").status(), "key must not be empty");
  expect_error(sets.Count("").status(), "key must not be empty");
  expect_error(sets.Members(std::string(600, 'k')).status(), "key is 600 bytes");
  EXPECT_EQ(limiter->GetStats().entries, 0);
  const ExpiringSets::Stats stats = sets.GetStats();
  EXPECT_EQ(stats.adds + stats.removes + stats.reads + stats.full, 0);
  // The longest key, member and TTL allowed work.
  auto ok = sets.Add(std::string(512, 'k'), std::string(512, 'm'), 3'600'000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(*ok);
}

TEST(ExpiringSetsTest, MemberTtl999And1000) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("", clock);
  ExpiringSets& sets = limiter->sets();
  ASSERT_TRUE(*sets.Add("phone:+15550100", "req-a", 999));
  ASSERT_TRUE(*sets.Add("phone:+15550100", "req-b", 1000));
  clock.SetMs(kT0 + 998);
  EXPECT_EQ(*sets.Count("phone:+15550100"), 2);
  clock.SetMs(kT0 + 999);
  EXPECT_EQ(*sets.Count("phone:+15550100"), 1);
  EXPECT_FALSE(*sets.Contains("phone:+15550100", "req-a"));
  EXPECT_EQ(Names(sets, "phone:+15550100"), std::vector<std::string>{"req-b"});
  clock.SetMs(kT0 + 1000);
  EXPECT_EQ(*sets.Count("phone:+15550100"), 0);
  EXPECT_EQ(limiter->GetStats().entries, 0);
}

TEST(ExpiringSetsTest, TheCapIsAClearErrorAndCounted) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("sets: { max_members: 2 }\n", clock);
  ExpiringSets& sets = limiter->sets();
  ASSERT_TRUE(*sets.Add("s", "a", 60'000));
  ASSERT_TRUE(*sets.Add("s", "b", 60'000));
  auto full = sets.Add("s", "c", 60'000);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().message(), "set is full: 2 live members (sets.max_members)");
  EXPECT_FALSE(*sets.Add("s", "a", 120'000));  // a refresh still works
  EXPECT_EQ(Names(sets, "s"), (std::vector<std::string>{"b", "a"}));
  const ExpiringSets::Stats stats = sets.GetStats();
  EXPECT_EQ(stats.adds, 3);
  EXPECT_EQ(stats.full, 1);
  EXPECT_EQ(stats.reads, 1);
}

TEST(ExpiringSetsTest, SetsAndRuleStateShareTheEntryBound) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter(R"(
engine: { max_entries: 2 }
rules: { api: { limits: 10/minute } }
)",
                             clock);
  ASSERT_TRUE(limiter->Check("api", "user:1").ok());
  ASSERT_TRUE(*limiter->sets().Add("s1", "m", 1000));
  auto refused = limiter->sets().Add("s2", "m", 1000);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "cannot create a new set: store is full (engine.max_entries: 2)");
  // A set is not a decision: refused. A rule's new subject is one: decided
  // by on_store_full, marked.
  auto decided = limiter->Check("api", "user:2");
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  EXPECT_EQ(decided->fallback, Fallback::kStoreFull);
  // Reads and removals on a set that does not exist keep nothing: answered.
  EXPECT_EQ(*limiter->sets().Count("s2"), 0);
  EXPECT_FALSE(*limiter->sets().Remove("s2", "m"));
  // Once the set's member expired, its entry no longer holds a place.
  clock.AdvanceMs(2000);
  EXPECT_EQ(limiter->SweepExpired(), 1);
  EXPECT_TRUE(*limiter->sets().Add("s2", "m", 1000));
}

TEST(ExpiringSetsTest, ReloadKeepsSets) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("rules: { api: { limits: 10/minute } }\n", clock);
  ASSERT_TRUE(*limiter->sets().Add("s", "m", 60'000));
  auto fresh = ParseConfig("rules: { other: { limits: 1/s } }\n", "reload.yaml");
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(limiter->Reload(*fresh).ok());
  EXPECT_TRUE(*limiter->sets().Contains("s", "m"));
  auto d = limiter->Check("other", "s");  // a new rule's variant is not the sets'
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(*limiter->sets().Count("s"), 1);
}

TEST(ExpiringSetsTest, RunAsyncAnswersInlineOnTheEmbeddedStore) {
  ManualClock clock(kT0);
  auto limiter = MakeLimiter("", clock);
  bool called = false;
  limiter->sets().RunAsync(SetRequest{SetOp::kAdd, "s", "m", 5000},
                           [&](const Status& s, const SetReply& r) {
                             called = true;
                             EXPECT_TRUE(s.ok());
                             EXPECT_EQ(r.value, 1);
                             EXPECT_EQ(r.now_ms, kT0);
                           });
  EXPECT_TRUE(called);
  auto members = limiter->sets().Members("s");
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(*members, (std::vector<SetMember>{{"m", kT0 + 5000}}));
}

}  // namespace
}  // namespace floodgate
