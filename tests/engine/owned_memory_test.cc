// engine.max_memory counts every byte a state owns, on the embedded store:
// sliding_log's logs, sets' members, OTP codes and events, lease tables.
// The usage figure follows the heap as glibc counts it, a flood stays
// within the bound, a known subject whose state would grow past it is
// answered as full (and keeps its state), and once everything is freed the
// figure is back where it started.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "core/rule_eval.h"
#include "engine/embedded_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/set_types.h"
#include "store/otp_policy.h"
#include "store/rooms.h"
#include "testing/rules.h"

namespace floodgate::engine {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kFarFuture = int64_t{1} << 50;

EngineConfig Config(int64_t max_memory) {
  EngineConfig config;
  config.max_entries = 10'000'000;
  config.max_memory = max_memory;
  config.shards = 4;
  config.sweep_interval_ms = 0;  // sweeps only when a test calls SweepExpired
  return config;
}

std::string Subject(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "user:%011d", i);  // 16 bytes
  return buf;
}

// An embedded store with one sliding_log rule, driven at explicit instants
// (sets and OTP act at the clock's).
class Store {
 public:
  explicit Store(int64_t max_memory, const char* limit = "50/minute")
      : rooms_(EmbeddedStore::RoomsOf(std::make_unique<EmbeddedStore>(Config(max_memory), clock_))),
        store_(*rooms_.store),
        rule_(testing::Compile(testing::MakeRule(Algorithm::kSlidingLog, {limit}))) {
    EXPECT_TRUE(store_.Describe(rule_, store::kFirstRuleId).ok());
  }

  Status Check(std::string_view subject, int64_t at_ms, Decision* d = nullptr) {
    Decision unused;
    store::CheckOp op;
    op.variant = {&rule_, store::kFirstRuleId, ""};
    op.subject = subject;
    op.at_ms = &at_ms;
    Status s;
    EXPECT_EQ(store_.Check(op, d != nullptr ? d : &unused, &s, Never<store::CheckDone>, nullptr),
              store::Answer::kNow);
    return s;
  }
  Status Refund(std::string_view subject, int64_t at_ms, int64_t cost) {
    store::RefundOp op;
    op.variant = {&rule_, store::kFirstRuleId, ""};
    op.subject = subject;
    op.cost = cost;
    op.at_ms = &at_ms;
    core::RefundResult result;
    Status s;
    store_.Refund(op, &result, &s, Never<store::Done<core::RefundResult>>);
    return s;
  }
  Status Erase(std::string_view subject) {
    static constexpr uint32_t kIds[] = {store::kFirstRuleId};
    store::ResetOp op;
    op.subject = subject;
    op.ids = kIds;
    Status s;
    store_.Reset(op, &s, Never<store::Done<>>);
    return s;
  }
  Status Set(SetOp op, std::string_view key, std::string_view member, SetReply* reply = nullptr) {
    SetReply unused;
    Status s;
    rooms_.sets->Run(SetRequest{op, key, member, 600'000}, 1'000,
                     reply != nullptr ? reply : &unused, &s, Never<store::Done<SetReply>>);
    return s;
  }
  Status Issue(std::string_view subject, std::string_view code, std::string_view event) {
    OtpIssueOutcome out;
    Status s;
    rooms_.otp->Issue(subject, code, event, OtpPolicy{}, &out, &s,
                      Never<store::Done<OtpIssueOutcome>>);
    EXPECT_TRUE(!s.ok() || out.issued);
    return s;
  }
  // The codes an attempt finds for `subject` (an attempt is recorded).
  std::optional<size_t> Codes(std::string_view subject, std::string_view event) {
    OtpAttemptOutcome out;
    Status s;
    rooms_.otp->Attempt(subject, event, OtpPolicy{}, &out, &s,
                        Never<store::Done<OtpAttemptOutcome>>);
    if (!s.ok()) return std::nullopt;
    return out.codes.size();
  }
  Status Acquire(std::string_view subject, std::string_view lease, int64_t* in_flight = nullptr) {
    store::LeaseOp op{store::LeaseOpKind::kAcquire, "jobs", subject, lease, 600'000, 100, &now_};
    store::LeaseResult result;
    Status s;
    rooms_.leases->Lease(op, &result, &s, Never<store::Done<store::LeaseResult>>);
    if (in_flight != nullptr) *in_flight = result.in_flight;
    return s;
  }

  int64_t bytes() const { return store_.GetUsage().bytes; }
  int64_t entries() const { return store_.GetUsage().entries; }
  int64_t rejected_full() const { return store_.GetUsage().rejected_full; }
  int64_t SweepExpired(int64_t now_ms) { return store_.SweepExpired(now_ms); }

 private:
  template <typename Done>
  static Done Never() {
    ADD_FAILURE() << "the embedded store answers now";
    return Done();
  }

  ManualClock clock_{kNow};
  int64_t now_ = kNow;
  store::Rooms rooms_;
  store::Store& store_;
  core::CompiledRule rule_;
};

// What the store's figure grows by while `step` runs.
template <typename Step>
int64_t BytesOf(Store& store, Step step) {
  const int64_t before = store.bytes();
  step();
  return store.bytes() - before;
}

// A sliding_log subject's fifth event (at its own instant) grows the log's
// ring from 4 events to 8. In a store with no room for that, the check is
// answered as full (the service decides it by on_store_full) and the log
// stays as it was: the refused unit is not counted. Once another subject's
// memory is freed, it grows.
TEST(OwnedMemoryTest, AKnownSubjectWhoseLogCannotGrowIsAnsweredAsFull) {
  // The same steps in a store without a bound measure what they take.
  Store measure(int64_t{1} << 30);
  for (int t = 0; t < 4; ++t) ASSERT_TRUE(measure.Check("alice", kNow + t).ok());
  ASSERT_TRUE(measure.Check("bob", kNow).ok());
  const int64_t before = measure.bytes();
  const int64_t growth =
      BytesOf(measure, [&] { ASSERT_TRUE(measure.Check("alice", kNow + 4).ok()); });
  ASSERT_GT(growth, 0) << "the ring's growth is counted";

  Store store(before + growth - 1);
  for (int t = 0; t < 4; ++t) ASSERT_TRUE(store.Check("alice", kNow + t).ok());
  ASSERT_TRUE(store.Check("bob", kNow).ok());
  EXPECT_EQ(store.bytes(), before);
  Decision d;
  Status s = store.Check("alice", kNow + 4, &d);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message().rfind("store is full (engine.max_memory: ", 0), 0u) << s.message();
  EXPECT_EQ(store.bytes(), before);
  EXPECT_EQ(store.rejected_full(), 1);
  // A unit at the newest event's instant needs no new event: admitted.
  ASSERT_TRUE(store.Check("alice", kNow + 3, &d).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 45);  // 5 units: the refused one was not counted

  ASSERT_TRUE(store.Erase("bob").ok());
  ASSERT_TRUE(store.Check("alice", kNow + 4, &d).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 44);
}

// A member, a code, a lease: each takes memory of its own, and one more of
// them in a store with no room for it is refused, while what was there
// stays.
TEST(OwnedMemoryTest, AKnownSetOtpSubjectOrLeaseTableThatCannotGrowIsRefused) {
  const std::string member(40, 'm');  // longer than a string's inline storage
  Store measure(int64_t{1} << 30);
  ASSERT_TRUE(measure.Set(SetOp::kAdd, "devices", member + "1").ok());
  ASSERT_TRUE(measure.Issue("bob", "code-hash-1", "issue-1").ok());
  ASSERT_TRUE(measure.Acquire("carol", "lease-1").ok());
  const int64_t first = measure.bytes();
  const int64_t member_bytes = BytesOf(
      measure, [&] { ASSERT_TRUE(measure.Set(SetOp::kAdd, "devices", member + "2").ok()); });
  const int64_t code_bytes =
      BytesOf(measure, [&] { ASSERT_TRUE(measure.Issue("bob", "code-hash-2", "issue-2").ok()); });
  const int64_t lease_bytes =
      BytesOf(measure, [&] { ASSERT_TRUE(measure.Acquire("carol", "lease-2").ok()); });
  ASSERT_GT(member_bytes, 40);
  ASSERT_GT(code_bytes, 0);
  ASSERT_GT(lease_bytes, 0);

  {
    Store store(first + member_bytes - 1);
    ASSERT_TRUE(store.Set(SetOp::kAdd, "devices", member + "1").ok());
    ASSERT_TRUE(store.Issue("bob", "code-hash-1", "issue-1").ok());
    ASSERT_TRUE(store.Acquire("carol", "lease-1").ok());
    EXPECT_EQ(store.bytes(), first);
    const Status s = store.Set(SetOp::kAdd, "devices", member + "2");
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(s.message().rfind("cannot add to the set: store is full (engine.max_memory: ", 0), 0u)
        << s.message();
    SetReply reply;
    ASSERT_TRUE(store.Set(SetOp::kCount, "devices", "", &reply).ok());
    EXPECT_EQ(reply.value, 1);
    // Refreshing a member takes nothing new.
    EXPECT_TRUE(store.Set(SetOp::kAdd, "devices", member + "1").ok());
    EXPECT_EQ(store.bytes(), first);
  }
  {
    Store store(first + code_bytes - 1);
    ASSERT_TRUE(store.Set(SetOp::kAdd, "devices", member + "1").ok());
    ASSERT_TRUE(store.Issue("bob", "code-hash-1", "issue-1").ok());
    ASSERT_TRUE(store.Acquire("carol", "lease-1").ok());
    const Status s = store.Issue("bob", "code-hash-2", "issue-2");
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(s.message().rfind("cannot issue a code: store is full (engine.max_memory: ", 0), 0u)
        << s.message();
    EXPECT_EQ(store.bytes(), first);
  }
  {
    Store store(first + lease_bytes - 1);
    ASSERT_TRUE(store.Set(SetOp::kAdd, "devices", member + "1").ok());
    ASSERT_TRUE(store.Issue("bob", "code-hash-1", "issue-1").ok());
    ASSERT_TRUE(store.Acquire("carol", "lease-1").ok());
    int64_t in_flight = -1;
    EXPECT_EQ(store.Acquire("carol", "lease-2").code(), StatusCode::kResourceExhausted);
    EXPECT_TRUE(store.Acquire("carol", "lease-1", &in_flight).ok());  // held: a refresh
    EXPECT_EQ(in_flight, 1);
    EXPECT_EQ(store.bytes(), first);
  }
}

// Whatever grows and shrinks, once everything has expired (or was erased)
// the figure is back at the empty store's: nothing drifts.
TEST(OwnedMemoryTest, TheFigureComesBackToItsBaseWhenEverythingIsFreed) {
  Store store(int64_t{1} << 30, "1000/minute");
  const int64_t base = store.bytes();
  for (int i = 0; i < 300; ++i) {
    const std::string subject = Subject(i);
    // Up to 40 events at instants of their own: rings of 4 to 64.
    for (int t = 0; t <= i % 40; ++t) ASSERT_TRUE(store.Check(subject, kNow + t).ok());
    if (i % 3 == 0) {
      ASSERT_TRUE(store.Refund(subject, kNow + 40, 1 + i % 7).ok());
    }
    if (i % 5 == 0) {
      ASSERT_TRUE(store.Erase(subject).ok());
    }
    const std::string key = "set:" + std::to_string(i % 50);
    ASSERT_TRUE(store.Set(SetOp::kAdd, key, std::string(static_cast<size_t>(i % 30), 'x')).ok());
    if (i % 4 == 0) {
      ASSERT_TRUE(
          store.Set(SetOp::kRemove, key, std::string(static_cast<size_t>(i % 30), 'x')).ok());
    }
    ASSERT_TRUE(store
                    .Issue("otp:" + std::to_string(i % 150), "code" + std::to_string(i),
                           "i" + std::to_string(i))
                    .ok());
    ASSERT_TRUE(store.Acquire("lease:" + std::to_string(i % 20), "l" + std::to_string(i)).ok());
  }
  EXPECT_GT(store.bytes(), base + 300 * 200);
  store.SweepExpired(kFarFuture);
  EXPECT_EQ(store.entries(), 0);
  EXPECT_EQ(store.bytes(), base);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Heap bytes in use, as glibc counts them (sanitizers replace malloc, so
// the tests that read it only run in plain builds).
int64_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

// A flood of new sliding_log subjects (redis-benchmark -r on a 50/minute
// rule) fills the store up to max_memory, and what the heap grew by is what
// the store's figure says: the logs are inside the bound.
TEST(OwnedMemoryTest, ASlidingLogFloodStaysWithinMaxMemoryAsTheHeapCountsIt) {
  constexpr int64_t kMaxMemory = 4 << 20;
  auto store = std::make_unique<Store>(kMaxMemory);
  const int64_t heap_before = HeapInUse();
  const int64_t bytes_before = store->bytes();
  int kept = 0, refused = 0;
  for (int i = 0; i < 40'000; ++i) {
    const Status s = store->Check(Subject(i), kNow + i / 100);
    if (s.ok()) {
      ++kept;
    } else {
      ASSERT_EQ(s.code(), StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  const int64_t heap = HeapInUse() - heap_before;
  const int64_t counted = store->bytes() - bytes_before;
  std::printf("subjects kept %d, refused %d; heap grew %lld bytes, counted %lld\n", kept, refused,
              static_cast<long long>(heap), static_cast<long long>(counted));
  EXPECT_GT(refused, 0) << "the flood reaches the bound";
  EXPECT_LE(store->bytes(), kMaxMemory);
  EXPECT_LE(heap, kMaxMemory + kMaxMemory / 50);
  EXPECT_NEAR(static_cast<double>(heap), static_cast<double>(counted), 0.02 * counted);
}

// The same for sets' members, OTP codes and events, and lease tables.
TEST(OwnedMemoryTest, SetsOtpAndLeasesAreCountedAsTheHeapHoldsThem) {
  auto store = std::make_unique<Store>(int64_t{1} << 30);
  const int64_t heap_before = HeapInUse();
  const int64_t bytes_before = store->bytes();
  for (int i = 0; i < 2'000; ++i) {
    const std::string n = std::to_string(i);
    for (int j = 0; j < 10; ++j) {
      // Members of 8 and 32 bytes: inside the string and on their own.
      ASSERT_TRUE(
          store
              ->Set(SetOp::kAdd, "set:" + n,
                    (j % 2 == 0 ? "m-" : "member-of-32-bytes-xxxxxxxxxx-") + std::to_string(j))
              .ok());
    }
    ASSERT_TRUE(store->Issue("otp:" + n, "hmac-of-the-code-32-bytes-long-" + n, "issue-" + n).ok());
    ASSERT_TRUE(store->Codes("otp:" + n, "attempt-" + n).has_value());
    for (int j = 0; j < 3; ++j) {
      ASSERT_TRUE(
          store->Acquire("jobs:" + n, "lease-id-of-32-bytes-xxxxxxxxx-" + std::to_string(j)).ok());
    }
  }
  const int64_t heap = HeapInUse() - heap_before;
  const int64_t counted = store->bytes() - bytes_before;
  std::printf("heap grew %lld bytes, counted %lld\n", static_cast<long long>(heap),
              static_cast<long long>(counted));
  EXPECT_NEAR(static_cast<double>(heap), static_cast<double>(counted), 0.02 * counted);
}
#endif

}  // namespace
}  // namespace floodgate::engine
