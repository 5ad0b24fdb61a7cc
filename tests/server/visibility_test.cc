// The visibility parts that need no server: the per-second series, the
// sampled log of denials, key redaction, and the blob a server publishes
// for the others (round trip and hostile bytes).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "server/http/visibility.h"
#include "server/observability/denied_log.h"
#include "server/observability/redact_key.h"
#include "server/observability/rule_series.h"
#include "testing/test_config.h"

namespace floodgate::server {
namespace {

TEST(RuleSeriesTest, CountsPerSecondAndForgetsAfterTheWindow) {
  auto series = std::make_unique<RuleSeries>();
  const int64_t t = 1'700'000'000;
  series->Add(t, SeriesOutcome::kAdmitted);
  series->Add(t, SeriesOutcome::kAdmitted);
  series->Add(t, SeriesOutcome::kDenied);
  series->Add(t + 1, SeriesOutcome::kShadowDenied);
  EXPECT_EQ(series->At(t, SeriesOutcome::kAdmitted), 2);
  EXPECT_EQ(series->At(t, SeriesOutcome::kDenied), 1);
  EXPECT_EQ(series->At(t, SeriesOutcome::kShadowDenied), 0);
  EXPECT_EQ(series->At(t + 1, SeriesOutcome::kShadowDenied), 1);
  EXPECT_EQ(series->At(t - 1, SeriesOutcome::kAdmitted), 0);
  // The same slot, kSeriesSeconds later: the old second is gone, not added.
  series->Add(t + kSeriesSeconds, SeriesOutcome::kDenied);
  EXPECT_EQ(series->At(t, SeriesOutcome::kAdmitted), 0);
  EXPECT_EQ(series->At(t + kSeriesSeconds, SeriesOutcome::kDenied), 1);
  EXPECT_EQ(series->At(t + kSeriesSeconds, SeriesOutcome::kAdmitted), 0);
}

// One writer, readers on other threads (TSan checks the atomics).
TEST(RuleSeriesTest, ReadWhileWritten) {
  auto series = std::make_unique<RuleSeries>();
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (int64_t s = 0; s < 2000; ++s) (void)series->At(s, SeriesOutcome::kAdmitted);
    }
  });
  for (int64_t s = 0; s < 2000; ++s) {
    for (int i = 0; i < 10; ++i) series->Add(s, SeriesOutcome::kAdmitted);
  }
  done = true;
  reader.join();
  EXPECT_EQ(series->At(1999, SeriesOutcome::kAdmitted), 10);
}

Decision DeniedBy(const char* limit) {
  Decision d;
  d.allowed = false;
  auto parsed = ParseLimit(limit);
  EXPECT_TRUE(parsed.ok());
  d.binding_limit = *parsed;
  d.retry_after_ms = 1000;
  return d;
}

TEST(DeniedLogTest, OneLinePerSubjectPerInterval) {
  DeniedLog log(10'000, /*redact=*/false);
  const Decision d = DeniedBy("3/hour");
  const int64_t t = 1'700'000'000'000;
  log.Denied("api", "bob", d, t);
  log.Denied("api", "bob", d, t + 1);
  log.Denied("api", "bob", d, t + 9'999);
  EXPECT_EQ(log.written(), 1);
  EXPECT_EQ(log.suppressed(), 2);
  log.Denied("api", "bob", d, t + 10'000);  // the interval is over
  EXPECT_EQ(log.written(), 2);
  log.Denied("login", "bob", d, t + 10'001);  // another rule: another subject
  EXPECT_EQ(log.written(), 3);
}

TEST(DeniedLogTest, AFloodOfKeysIsBoundedPerSecond) {
  DeniedLog log(60'000, false);
  const Decision d = DeniedBy("1/second");
  const int64_t t = 1'700'000'000'000;
  for (int i = 0; i < 1000; ++i) log.Denied("api", "key" + std::to_string(i), d, t + i % 1000);
  EXPECT_LE(log.written(), kMaxDeniedLinesPerSecond);
  EXPECT_EQ(log.written() + log.suppressed(), 1000);
  // The next second has a budget of its own, and the keys held back by
  // this one's are not kept from it (a fresh key may share a slot with one
  // of the 20 logged: most are logged).
  const int64_t before = log.written();
  for (int i = 0; i < 5; ++i) log.Denied("api", "fresh" + std::to_string(i), d, t + 1000);
  EXPECT_GE(log.written(), before + 4);
  log.Denied("api", "key999", d, t + 1000);  // held back last second: logged now
  EXPECT_GE(log.written(), before + 5);
}

TEST(DeniedLogTest, OffWritesNothing) {
  DeniedLog log(0, false);
  log.Denied("api", "bob", DeniedBy("1/second"), 1'700'000'000'000);
  EXPECT_EQ(log.written(), 0);
  EXPECT_EQ(log.suppressed(), 0);
}

// Two loops denying the same subject at once: one line.
TEST(DeniedLogTest, ConcurrentDenialsOfOneSubject) {
  DeniedLog log(60'000, false);
  const Decision d = DeniedBy("1/second");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j) log.Denied("api", "bob", d, 1'700'000'000'000 + j);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(log.written(), 1);
  EXPECT_EQ(log.suppressed(), 3999);
}

TEST(RedactKeyTest, StableHexDigestPrefix) {
  const std::string a = RedactKey("+15551234567");
  EXPECT_EQ(a.rfind("sha256:", 0), 0u);
  EXPECT_EQ(a.size(), 7u + 16u);
  EXPECT_EQ(a, RedactKey("+15551234567"));
  EXPECT_NE(a, RedactKey("+15551234568"));
  // SHA-256("") starts e3b0c44298fc1c14.
  EXPECT_EQ(RedactKey(""), "sha256:e3b0c44298fc1c14");
  EXPECT_EQ(ShownKey("bob", false), "bob");
}

class VisibilityBlobTest : public ::testing::Test {
 protected:
  ManualClock clock{1'700'000'000'000};
  Config config = testing::MakeConfig("rules: { api: { limits: [1/second] } }\n");
  std::unique_ptr<service::Services> core = testing::MakeServices(config, clock);
};

TEST_F(VisibilityBlobTest, RoundTrip) {
  Visibility vis(config.visibility, false, core.get());
  const int64_t now = clock.NowMs();
  for (int i = 0; i < 50; ++i) vis.top()->Record("api", "bob", 1, true, now);
  for (int i = 0; i < 20; ++i) vis.top()->Record("api", "alice", 2, false, now);
  auto parsed = Visibility::Parse(vis.Serialize(now));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 6u);  // one rule, two rankings, three windows
  for (const Visibility::Sketch& s : *parsed) {
    EXPECT_EQ(s.rule, "api");
    const auto top = s.sketch.Top(5);
    ASSERT_EQ(top.size(), 1u);
    if (s.by == service::TopBy::kDenied) {
      EXPECT_EQ(top[0].key, "bob");
      EXPECT_EQ(top[0].count, 50);
    } else {
      EXPECT_EQ(top[0].key, "alice");
      EXPECT_EQ(top[0].count, 40);
    }
  }
}

TEST_F(VisibilityBlobTest, HostileBytesAreRefused) {
  Visibility vis(config.visibility, false, core.get());
  const int64_t now = clock.NowMs();
  vis.top()->Record("api", "bob", 1, true, now);
  const std::string blob = vis.Serialize(now);
  EXPECT_FALSE(Visibility::Parse("").ok());
  EXPECT_FALSE(Visibility::Parse("FGTOP2").ok());
  EXPECT_TRUE(Visibility::Parse("FGTOP1").ok());  // a server with no rule counted yet
  // Every truncation and every single-byte change is refused or read
  // without crashing (a change inside a key is still a valid blob).
  for (size_t i = 0; i < blob.size(); ++i) {
    (void)Visibility::Parse(blob.substr(0, i));
    std::string changed = blob;
    changed[i] = static_cast<char>(changed[i] ^ 0x5a);
    (void)Visibility::Parse(changed);
  }
  // A blob cut short is refused, or (cut between two sketches) reads as
  // fewer sketches: never as a whole one.
  for (size_t i = 7; i < blob.size(); ++i) {
    auto cut = Visibility::Parse(blob.substr(0, i));
    EXPECT_TRUE(!cut.ok() || cut->size() < 6) << i;
  }
}

}  // namespace
}  // namespace floodgate::server
