// A decision on the embedded store allocates nothing: not through the
// public Limiter::Check, not on the fronts' path (LimiterCore::Check with a
// pipeline's clock reading), once its subject exists. Counted by replacing
// the global operator new in this binary alone (tests/CMakeLists.txt), so
// every allocation made on the counting thread is seen, whoever makes it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/open_services.h"
#include "floodgate/limiter.h"
#include "service/limiter/limiter_core.h"

namespace {

thread_local bool t_counting = false;
thread_local int64_t t_allocations = 0;

}  // namespace

// Plain malloc and free underneath: what counts is how often new is called.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  if (t_counting) ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace floodgate {
namespace {

// Allocations `body` makes on this thread.
template <typename Body>
int64_t AllocationsOf(Body body) {
  t_allocations = 0;
  t_counting = true;
  body();
  t_counting = false;
  return t_allocations;
}

// Every algorithm but sliding_log, whose log of timestamps is allocated
// memory by design (one block per subject, grown as it fills).
constexpr char kConfig[] = R"(
rules:
  fw: { algorithm: fixed_window, limits: [1000000/minute, 10000000/day] }
  sw: { algorithm: sliding_window, limits: [1000000/minute] }
  tb: { algorithm: token_bucket, limits: [1000000/minute] }
  gcra: { algorithm: gcra, limits: [1000000/minute] }
  tiered:
    algorithm: fixed_window
    limits: [10/minute]
    tiers: { pro: [1000000/minute] }
)";

class DecisionAllocsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Config> config = ParseConfig(kConfig, "allocs.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->engine.sweep_interval_ms = 0;
    config_ = *config;
    for (int i = 0; i < 100; ++i) keys_.push_back("user:" + std::to_string(i));
  }

  Config config_;
  ManualClock clock_{1'700'000'000'000};
  std::vector<std::string> keys_;
};

TEST_F(DecisionAllocsTest, TheCountSeesAnAllocation) {
  std::unique_ptr<std::string> kept;
  EXPECT_EQ(AllocationsOf([&] { kept = std::make_unique<std::string>(100, 'x'); }), 2);
}

TEST_F(DecisionAllocsTest, LimiterCheckAllocatesNothing) {
  auto limiter = Limiter::Create(config_, clock_);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  Decision d;
  for (const char* rule : {"fw", "sw", "tb", "gcra"}) {
    for (const std::string& key : keys_) ASSERT_TRUE((*limiter)->Check(rule, key, 1, {}, &d).ok());
    const int64_t allocations = AllocationsOf([&] {
      for (int round = 0; round < 20; ++round) {
        clock_.AdvanceMs(7);
        for (const std::string& key : keys_) (void)(*limiter)->Check(rule, key, 1, {}, &d);
      }
    });
    EXPECT_EQ(allocations, 0) << rule << ": 2,000 decisions";
    EXPECT_TRUE(d.allowed) << rule;
  }
  // A tier and a denial allocate nothing either.
  for (const std::string& key : keys_) (void)(*limiter)->Check("tiered", key, 1, "pro", &d);
  (void)(*limiter)->Check("tiered", "one", 1, {}, &d);
  EXPECT_EQ(AllocationsOf([&] {
              for (const std::string& key : keys_) {
                (void)(*limiter)->Check("tiered", key, 1, "pro", &d);
              }
            }),
            0);
  EXPECT_EQ(AllocationsOf([&] {
              for (int i = 0; i < 20; ++i) (void)(*limiter)->Check("tiered", "one", 1, {}, &d);
            }),
            0);
  EXPECT_FALSE(d.allowed);
}

TEST_F(DecisionAllocsTest, APipelinesDecisionsAllocateNothing) {
  auto core_services = api::OpenServices(config_, clock_);
  ASSERT_TRUE(core_services.ok()) << core_services.status().ToString();
  service::LimiterCore* const core = (*core_services)->core.get();
  service::LimiterCore& limiter = *core;
  auto batch = limiter.NewBatch(1);
  Decision d;
  Status status;
  // Never called: the embedded store answers every decision now.
  int laters = 0;
  const auto later = [&laters] {
    ++laters;
    return store::Done<Decision>();
  };
  for (const std::string& key : keys_) ASSERT_TRUE(limiter.CheckAndWait("gcra", key).ok());
  const int64_t allocations = AllocationsOf([&] {
    for (int round = 0; round < 20; ++round) {
      for (const std::string& key : keys_) limiter.Prefetch("gcra", key);
      const int64_t read_ms = clock_.NowMs();
      for (const std::string& key : keys_) {
        const store::Answer answer =
            limiter.Check({"gcra", key, 1, {}, nullptr, read_ms}, &d, &status, later, batch.get());
        ASSERT_EQ(answer, store::Answer::kNow);
      }
      batch->Flush();
    }
  });
  EXPECT_EQ(allocations, 0) << "2,000 pipelined decisions";
  EXPECT_EQ(laters, 0);
  EXPECT_TRUE(status.ok()) << status.ToString();
}

}  // namespace
}  // namespace floodgate
