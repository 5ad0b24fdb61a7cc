// Fallback decisions through the public Limiter: a new subject in a full
// embedded store (or a known one whose state would grow past it) is decided
// by the rule's on_store_full (deny by default),
// a failed Redis by on_backend_error; both are marked, counted, and report
// the configured limits with usage unknown (-1), never an error. Peeks and
// denials on new subjects need no room and stay real decisions; expired
// entries are reclaimed before a subject is turned away.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "floodgate/limiter.h"

namespace floodgate {
namespace {

Config MakeConfig(const std::string& yaml) {
  auto c = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Config config = c.ok() ? *c : Config{};
  config.engine.sweep_interval_ms = 0;  // reclaiming is what the test drives
  return config;
}

std::unique_ptr<Limiter> MakeLimiter(const Config& config, const Clock& clock) {
  auto l = Limiter::Create(config, clock);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

// One shard, so that the reclaim of the shard concerned sees every entry.
const char* kRules = R"(
engine: { max_entries: 3, shards: 1 }
rules:
  closed: { algorithm: fixed_window, limits: [5/minute] }
  open:   { algorithm: token_bucket, limits: [10/second, 100/hour], on_store_full: allow }
  shadow: { algorithm: gcra, limits: [4/second], shadow: true }
  tiered: { algorithm: sliding_window, limits: [2/minute], tiers: { pro: [20/minute] },
            on_store_full: allow }
)";

// Fills the store with three live subjects of `rule`.
void Fill(Limiter& limiter, const std::string& rule) {
  for (int i = 0; i < 3; ++i) {
    auto d = limiter.Check(rule, "held:" + std::to_string(i));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_EQ(d->fallback, Fallback::kNone);
  }
  ASSERT_EQ(limiter.GetStats().entries, 3);
}

void ExpectUnknownUsage(const Decision& d, int64_t first_capacity) {
  EXPECT_EQ(d.limit, first_capacity);
  EXPECT_EQ(d.remaining, -1);
  EXPECT_EQ(d.reset_after_ms, -1);
  for (int i = 0; i < d.num_limits; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(d.limits[i].remaining, -1);
    EXPECT_EQ(d.limits[i].reset_after_ms, -1);
    EXPECT_GT(d.limits[i].period_ms, 0);
  }
}

TEST(StoreFullTest, ANewSubjectIsDeniedByDefaultMarkedAndCounted) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");

  auto d = limiter->Check("closed", "newcomer");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  EXPECT_EQ(d->retry_after_ms, 1000);  // try again in a second, not "never"
  ASSERT_EQ(d->num_limits, 1);
  EXPECT_EQ(d->limits[0].limit, 5);
  EXPECT_EQ(d->limits[0].period_ms, 60'000);
  ExpectUnknownUsage(*d, 5);

  const Limiter::Stats stats = limiter->GetStats();
  EXPECT_EQ(stats.fallback_store_full, 1);
  EXPECT_EQ(stats.fallback_backend_error, 0);
  EXPECT_EQ(stats.rejected_full, 1);
  EXPECT_EQ(stats.entries, 3);

  // Subjects the store holds are decided as usual.
  auto known = limiter->Check("closed", "held:0");
  ASSERT_TRUE(known.ok());
  EXPECT_TRUE(known->allowed);
  EXPECT_EQ(known->fallback, Fallback::kNone);
  EXPECT_EQ(known->remaining, 3);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 1);
}

TEST(StoreFullTest, OnStoreFullAllowAdmitsWithoutClaimingFigures) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");

  auto d = limiter->Check("open", "newcomer", 3);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  EXPECT_EQ(d->retry_after_ms, 0);
  ASSERT_EQ(d->num_limits, 2);
  EXPECT_EQ(d->limits[1].limit, 100);
  ExpectUnknownUsage(*d, 10);
  // Nothing was kept: the same subject is still new, and still decided so.
  EXPECT_EQ(limiter->GetStats().entries, 3);
  EXPECT_EQ(limiter->Check("open", "newcomer")->fallback, Fallback::kStoreFull);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 2);
}

TEST(StoreFullTest, ATierUsesItsOwnLimitsAndTheRulesPolicy) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  auto d = limiter->Check("tiered", "newcomer", 1, "pro");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  EXPECT_EQ(d->limit, 20);
}

TEST(StoreFullTest, AShadowRuleAdmitsAndTellsTheDenial) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  auto d = limiter->Check("shadow", "newcomer");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_TRUE(d->shadow_denied);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  EXPECT_EQ(d->retry_after_ms, 0);
}

TEST(StoreFullTest, PeeksAndDenialsOnNewSubjectsNeedNoRoomAndStayRealDecisions) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");

  auto peek = limiter->Check("closed", "newcomer", 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_TRUE(peek->allowed);
  EXPECT_EQ(peek->fallback, Fallback::kNone);
  EXPECT_EQ(peek->remaining, 5);

  auto too_big = limiter->Check("closed", "newcomer", 6);  // never fits: a denial, kept nowhere
  ASSERT_TRUE(too_big.ok());
  EXPECT_FALSE(too_big->allowed);
  EXPECT_EQ(too_big->fallback, Fallback::kNone);
  EXPECT_EQ(too_big->retry_after_ms, -1);

  const Limiter::Stats stats = limiter->GetStats();
  EXPECT_EQ(stats.fallback_store_full, 0);
  EXPECT_EQ(stats.rejected_full, 0);
}

TEST(StoreFullTest, ExpiredEntriesAreReclaimedBeforeANewSubjectIsTurnedAway) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  // 999 ms before the window ends the entries are live: turned away.
  clock.SetMs(1'700'000'040'000 - 1);
  EXPECT_EQ(limiter->Check("closed", "newcomer")->fallback, Fallback::kStoreFull);
  // At the window's end they hold nothing any more; no sweep has run, the
  // full store frees them itself (in the next second: one scan per second).
  clock.SetMs(1'700'000'040'000);
  auto d = limiter->Check("closed", "newcomer");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kNone);
  EXPECT_EQ(d->remaining, 4);
  const Limiter::Stats stats = limiter->GetStats();
  EXPECT_EQ(stats.expired_freed, 3);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.fallback_store_full, 1);
}

TEST(StoreFullTest, MaxMemoryTurnsAwayLongKeysFirst) {
  Config config = MakeConfig(R"(
engine: { max_memory: 4kb, shards: 1 }
rules: { api: { algorithm: gcra, limits: [10/second] } }
)");
  ASSERT_EQ(config.engine.max_memory, 4096);
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(config, clock);
  // 512-byte keys: a 536-byte entry each (a 544-byte chunk).
  int real = 0;
  for (int i = 0; i < 20; ++i) {
    std::string key(kMaxKeyBytes, 'k');
    key.replace(0, 2, std::to_string(10 + i));
    auto d = limiter->Check("api", key);
    ASSERT_TRUE(d.ok());
    if (d->fallback == Fallback::kNone) ++real;
  }
  EXPECT_GE(real, 5);
  EXPECT_LE(real, 7);
  EXPECT_LE(limiter->GetStats().store_bytes, 4096);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 20 - real);
  // A short key still fits in what is left.
  EXPECT_EQ(limiter->Check("api", "short")->fallback, Fallback::kNone);
}

// A known subject whose state would grow past max_memory (a sliding_log's
// fifth event at an instant of its own doubles its ring) is decided as a
// new subject at a full store is, by on_store_full, and its state stays as
// it was.
TEST(StoreFullTest, AKnownSubjectWhoseLogCannotGrowIsDecidedByOnStoreFull) {
  auto config_with = [](int64_t max_memory) {
    return MakeConfig("engine: { max_memory: " + std::to_string(max_memory) + R"(, shards: 1 }
rules:
  log:  { algorithm: sliding_log, limits: [100/minute] }
  open: { algorithm: sliding_log, limits: [100/minute], on_store_full: allow }
)");
  };
  // Four events at instants of their own: each log's ring of 4 is full.
  auto four_events = [](Limiter& limiter, ManualClock& clock) {
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(limiter.Check("log", "alice")->allowed);
      ASSERT_TRUE(limiter.Check("open", "alice")->allowed);
      clock.AdvanceMs(1);
    }
  };
  // What the fifth event takes, measured without a bound.
  ManualClock measure_clock(1'700'000'000'000);
  auto measure = MakeLimiter(config_with(int64_t{1} << 30), measure_clock);
  four_events(*measure, measure_clock);
  const int64_t before = measure->GetStats().store_bytes;
  ASSERT_TRUE(measure->Check("log", "alice")->allowed);
  const int64_t growth = measure->GetStats().store_bytes - before;
  ASSERT_GT(growth, 0);

  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(config_with(before + growth - 1), clock);
  four_events(*limiter, clock);
  auto d = limiter->Check("log", "alice");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  EXPECT_EQ(d->retry_after_ms, 1000);
  ExpectUnknownUsage(*d, 100);
  auto open = limiter->Check("open", "alice");
  EXPECT_TRUE(open->allowed);
  EXPECT_EQ(open->fallback, Fallback::kStoreFull);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 2);
  EXPECT_EQ(limiter->GetStats().rejected_full, 2);
  EXPECT_LE(limiter->GetStats().store_bytes, before + growth - 1);
  // Neither refused unit was counted; a peek needs no room.
  auto peek = limiter->Check("log", "alice", 0);
  EXPECT_EQ(peek->fallback, Fallback::kNone);
  EXPECT_EQ(peek->remaining, 96);
  EXPECT_EQ(limiter->Check("open", "alice", 0)->remaining, 96);
}

TEST(StoreFullTest, ReloadChangesThePolicy) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  EXPECT_FALSE(limiter->Check("closed", "newcomer")->allowed);
  std::string rules = kRules;
  const std::string from = "closed: { algorithm: fixed_window, limits: [5/minute] }";
  rules.replace(rules.find(from), from.size(),
                "closed: { algorithm: fixed_window, limits: [5/minute], on_store_full: allow }");
  ASSERT_TRUE(limiter->Reload(MakeConfig(rules)).ok());
  auto d = limiter->Check("closed", "newcomer");
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->fallback, Fallback::kStoreFull);
  // The held subjects kept their state (same definition).
  EXPECT_EQ(limiter->Check("closed", "held:0")->remaining, 3);
}

TEST(StoreFullTest, ClThrottleDeniesANewKeyWithUnknownFigures) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  auto r = limiter->Throttle("cell", 15, 30, 60, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->limited);
  EXPECT_EQ(r->fallback, Fallback::kStoreFull);
  EXPECT_EQ(r->limit, 16);
  EXPECT_EQ(r->remaining, -1);
  EXPECT_EQ(r->retry_after_s, 1);
  EXPECT_EQ(r->reset_after_s, -1);
  EXPECT_EQ(limiter->GetStats().fallback_store_full, 1);
  // A peek (quantity 0) keeps nothing: a real answer.
  auto peek = limiter->Throttle("cell", 15, 30, 60, 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->fallback, Fallback::kNone);
  EXPECT_EQ(peek->remaining, 16);
}

TEST(StoreFullTest, SetsAndOtpStayErrorsWithClearMessages) {
  ManualClock clock(1'700'000'000'000);
  auto limiter = MakeLimiter(MakeConfig(kRules), clock);
  Fill(*limiter, "closed");
  auto added = limiter->sets().Add("set", "member", 60'000);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(added.status().message(),
            "cannot create a new set: store is full (engine.max_entries: 3)");
}

// A port nothing listens on: connections are refused at once.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(BackendErrorTest, AFailedRedisIsAnsweredByOnBackendErrorMarkedAndCounted) {
  Config config = MakeConfig(R"(
redis: { timeout_ms: 200, connect_timeout_ms: 200 }
rules:
  open:   { algorithm: fixed_window, limits: [5/minute, 50/hour] }
  closed: { algorithm: gcra, limits: [7/second], on_backend_error: deny }
)");
  config.store = "redis://127.0.0.1:" + std::to_string(ClosedPort());
  SystemClock clock;
  auto limiter = MakeLimiter(config, clock);
  ASSERT_NE(limiter, nullptr);

  auto open = limiter->Check("open", "gina");
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_TRUE(open->allowed);
  EXPECT_EQ(open->fallback, Fallback::kBackendError);
  EXPECT_EQ(open->retry_after_ms, 0);
  ASSERT_EQ(open->num_limits, 2);
  ExpectUnknownUsage(*open, 5);

  auto closed = limiter->Check("closed", "gina");
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_FALSE(closed->allowed);
  EXPECT_EQ(closed->fallback, Fallback::kBackendError);
  EXPECT_EQ(closed->retry_after_ms, 1000);
  ExpectUnknownUsage(*closed, 7);

  const Limiter::Stats stats = limiter->GetStats();
  EXPECT_EQ(stats.fallback_backend_error, 2);
  EXPECT_EQ(stats.backend_errors, 2);
  EXPECT_EQ(stats.fallback_store_full, 0);
}

}  // namespace
}  // namespace floodgate
