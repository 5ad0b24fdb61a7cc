// AlertDelivery against a real HTTP receiver: headers and signature, retries
// with backoff while the receiver is down, giving up after retry_for, the
// queue bound, and what Stop hands back; on a ManualClock, the retry
// schedule try by try and the give-up instant, as the clock decides.
#include "service/alerts/alert_delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "testing/eventually.h"
#include "testing/http_receiver.h"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;
using floodgate::testing::Eventually;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

PendingAlert Event(const std::string& id, const std::string& url) {
  return PendingAlert{id, url, "{\"event_id\":\"" + id + "\"}", "sha256=abc", WallMs(), 0, ""};
}

// What the delivery reported, for assertions.
struct Finished {
  std::mutex mu;
  std::vector<std::pair<std::string, AlertDelivery::Outcome>> events;
  std::vector<std::string> failures;

  void Attach(AlertDelivery::Options* o) {
    o->on_finished = [this](const PendingAlert& a, AlertDelivery::Outcome outcome) {
      std::lock_guard<std::mutex> lock(mu);
      events.emplace_back(a.event_id, outcome);
    };
    o->on_failed = [this](const PendingAlert&, const std::string& error) {
      std::lock_guard<std::mutex> lock(mu);
      failures.push_back(error);
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  }
  // Waits for `n` finished events (the callback runs after the delivery
  // has counted the event, so WaitIdle may return before it).
  bool WaitFor(size_t n) {
    for (int i = 0; i < 500 && count() < n; ++i) std::this_thread::sleep_for(10ms);
    return count() >= n;
  }
};

AlertDelivery::Options Fast() {
  AlertDelivery::Options o;
  o.workers = 2;
  o.timeout_ms = 5000;  // a late 200 would be retried: a duplicate
  o.backoff_initial_ms = 20;
  o.backoff_max_ms = 80;
  o.retry_for_ms = 60'000;
  return o;
}

TEST(AlertDeliveryTest, PostsTheBodyWithItsSignatureAndIdempotencyKey) {
  testing::HttpReceiver receiver(204);
  Finished finished;
  AlertDelivery::Options o = Fast();
  finished.Attach(&o);
  AlertDelivery delivery(std::move(o));
  ASSERT_TRUE(delivery.Add(Event("e1", receiver.url("/quota"))));
  const auto got = receiver.WaitFor(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].head.starts_with("POST /quota HTTP/1.1\r\n"));
  EXPECT_EQ(got[0].body, "{\"event_id\":\"e1\"}");
  EXPECT_EQ(got[0].Header("X-Floodgate-Signature"), "sha256=abc");
  EXPECT_EQ(got[0].Header("Idempotency-Key"), "e1");
  EXPECT_EQ(got[0].Header("Content-Type"), "application/json");
  ASSERT_TRUE(delivery.WaitIdle(5s));
  EXPECT_EQ(delivery.GetStats().delivered, 1);
  EXPECT_EQ(delivery.GetStats().pending, 0);
  ASSERT_TRUE(finished.WaitFor(1));
  EXPECT_EQ(finished.events.at(0).second, AlertDelivery::Outcome::kDelivered);
}

TEST(AlertDeliveryTest, RetriesWithBackoffWhileTheReceiverIsDownThenDeliversOnce) {
  int port = 0;
  {
    testing::HttpReceiver probe;
    port = probe.port();  // free, and nobody listens there once it is gone
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  Finished finished;
  AlertDelivery::Options o = Fast();
  finished.Attach(&o);
  AlertDelivery delivery(std::move(o));
  const auto added = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(delivery.Add(Event("e" + std::to_string(i), url)));
  ASSERT_TRUE(testing::Eventually([&] { return delivery.GetStats().retried >= 5 * 3; }));
  const AlertDelivery::Stats down = delivery.GetStats();
  const int64_t elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - added)
                                 .count();
  EXPECT_EQ(down.delivered, 0);
  EXPECT_EQ(down.pending, 5);
  // Backoff 20, 40, 80, 80 … ms, jittered into its upper half: tries at
  // least 10 ms apart, so a handful each, not the thousands a refused
  // connection would allow without it.
  EXPECT_LE(down.retried, 5 * (1 + elapsed_ms / 10));

  testing::HttpReceiver receiver(200, port);
  ASSERT_TRUE(delivery.WaitIdle(5s));
  const auto got = receiver.WaitFor(5);
  ASSERT_EQ(got.size(), 5u);  // each once: none twice
  std::set<std::string> ids;
  for (const auto& r : got) ids.insert(r.Header("Idempotency-Key"));
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(delivery.GetStats().delivered, 5);
  ASSERT_TRUE(finished.WaitFor(5));
  EXPECT_FALSE(finished.failures.empty());
}

TEST(AlertDeliveryTest, NonSuccessStatusesAreRetried) {
  testing::HttpReceiver receiver(503);
  AlertDelivery::Options o = Fast();
  AlertDelivery delivery(std::move(o));
  ASSERT_TRUE(delivery.Add(Event("e1", receiver.url())));
  ASSERT_GE(receiver.WaitFor(3).size(), 3u);
  receiver.set_status(200);
  ASSERT_TRUE(delivery.WaitIdle(5s));
  EXPECT_EQ(delivery.GetStats().delivered, 1);
  EXPECT_GE(delivery.GetStats().retried, 2);
}

TEST(AlertDeliveryTest, GivesUpWhenRetryForHasPassed) {
  testing::HttpReceiver receiver(500);
  Finished finished;
  AlertDelivery::Options o = Fast();
  o.retry_for_ms = 1000;  // several tries, even if one stalls a few hundred ms
  finished.Attach(&o);
  AlertDelivery delivery(std::move(o));
  ASSERT_TRUE(delivery.Add(Event("e1", receiver.url())));
  ASSERT_TRUE(delivery.WaitIdle(5s));
  EXPECT_EQ(delivery.GetStats().expired, 1);
  EXPECT_EQ(delivery.GetStats().delivered, 0);
  ASSERT_TRUE(finished.WaitFor(1));
  EXPECT_EQ(finished.events[0].second, AlertDelivery::Outcome::kExpired);
  // The last try came at the deadline, not a backoff after it.
  const auto tries = receiver.WaitFor(1);
  EXPECT_GE(tries.size(), 3u);

  // An event kept elsewhere longer than retry_for is given up untried.
  PendingAlert old = Event("old", receiver.url());
  old.created_ms -= 10'000;
  EXPECT_TRUE(delivery.Add(old));
  EXPECT_EQ(delivery.GetStats().expired, 2);
  EXPECT_EQ(receiver.WaitFor(100, 200ms).size(), tries.size());  // not tried
}

TEST(AlertDeliveryTest, AFullQueueRefusesAndStopHandsBackWhatIsLeft) {
  testing::HttpReceiver silent(0);  // reads and never answers: every POST times out
  AlertDelivery::Options o = Fast();
  o.capacity = 3;
  o.workers = 1;
  o.timeout_ms = 200;
  AlertDelivery delivery(std::move(o));
  EXPECT_TRUE(delivery.Add(Event("a", silent.url())));
  EXPECT_TRUE(delivery.Add(Event("b", silent.url())));
  EXPECT_TRUE(delivery.Add(Event("c", silent.url())));
  EXPECT_EQ(delivery.Room(), 0u);
  EXPECT_FALSE(delivery.Add(Event("d", silent.url())));
  EXPECT_EQ(delivery.Snapshot().size(), 3u);
  const uint64_t version = delivery.version();
  std::vector<PendingAlert> left = delivery.Stop();
  EXPECT_EQ(left.size(), 3u);
  EXPECT_NE(delivery.version(), version);
  EXPECT_FALSE(delivery.Add(Event("e", silent.url())));
  EXPECT_TRUE(delivery.Stop().empty());
}

TEST(AlertDeliveryTest, ABadUrlIsGivenUpAtOnce) {
  Finished finished;
  AlertDelivery::Options o = Fast();
  finished.Attach(&o);
  AlertDelivery delivery(std::move(o));
  ASSERT_TRUE(delivery.Add(Event("e1", "ftp://nowhere/")));
  ASSERT_TRUE(delivery.WaitIdle(5s));
  EXPECT_EQ(delivery.GetStats().expired, 1);
  EXPECT_EQ(delivery.GetStats().retried, 0);
}

// Long enough for a worker that reads a ManualClock every millisecond to
// have tried again, had it been going to.
constexpr auto kGrace = 30ms;

TEST(AlertDeliveryClockTest, RetriesFollowTheBackoffOnTheClockThenGiveUpAtRetryFor) {
  testing::HttpReceiver receiver(503);
  ManualClock clock(WallMs());
  Finished finished;
  AlertDelivery::Options o;
  o.workers = 1;
  o.timeout_ms = 5000;
  o.backoff_initial_ms = 1000;
  o.backoff_max_ms = 4000;
  o.retry_for_ms = 10'000;
  o.clock = &clock;
  finished.Attach(&o);
  AlertDelivery delivery(std::move(o));
  PendingAlert alert = Event("e1", receiver.url());
  alert.created_ms = clock.NowMs();  // emitted now, on this clock
  ASSERT_TRUE(delivery.Add(alert));

  // The first try at once; each failure is scheduled again before
  // `retried` counts it, so once it has, the clock may move.
  ASSERT_EQ(receiver.WaitFor(1).size(), 1u);
  ASSERT_TRUE(Eventually([&] { return delivery.GetStats().retried == 1; }));
  // Waits of 1, 2, 4, 4 s, each drawn from its upper half: none may come a
  // millisecond before half, each must have come at the full wait.
  int64_t elapsed_ms = 0;
  size_t tries = 1;
  for (const int64_t wait : {1000, 2000, 4000}) {
    clock.AdvanceMs(wait / 2 - 1);
    EXPECT_EQ(receiver.WaitFor(tries + 1, kGrace).size(), tries) << "too early, wait " << wait;
    clock.AdvanceMs(wait - (wait / 2 - 1));
    elapsed_ms += wait;
    ASSERT_EQ(receiver.WaitFor(tries + 1).size(), tries + 1) << "not at the wait " << wait;
    ++tries;
    ASSERT_TRUE(
        Eventually([&] { return delivery.GetStats().retried == static_cast<int64_t>(tries); }));
  }
  ASSERT_EQ(elapsed_ms, 7000);
  EXPECT_EQ(finished.count(), 0u);

  // The next wait (4 s, drawn from 2..4 s) is cut to the 3 s left of
  // retry_for: the last try comes at the deadline, and the event is given
  // up there, not a back-off later.
  clock.AdvanceMs(3000);
  ASSERT_TRUE(finished.WaitFor(1));
  EXPECT_EQ(finished.events.at(0).second, AlertDelivery::Outcome::kExpired);
  EXPECT_EQ(delivery.GetStats().expired, 1);
  EXPECT_EQ(delivery.GetStats().pending, 0);
  // Tried at 0, 1, 3, 7 and 10 s (the clock jumped there at once: one try).
  EXPECT_EQ(receiver.WaitFor(100, kGrace).size(), 5u);
  EXPECT_EQ(delivery.GetStats().retried, 4);
}

TEST(AlertDeliveryClockTest, AWallClockStepBackDoesNotBringRetriesForward) {
  testing::HttpReceiver receiver(500);
  ManualClock clock(WallMs());
  AlertDelivery::Options o;
  o.workers = 1;
  o.backoff_initial_ms = 1000;
  o.backoff_max_ms = 1000;
  o.retry_for_ms = 3'600'000;
  o.clock = &clock;
  AlertDelivery delivery(std::move(o));
  PendingAlert alert = Event("e1", receiver.url());
  alert.created_ms = clock.NowMs();
  ASSERT_TRUE(delivery.Add(alert));
  ASSERT_EQ(receiver.WaitFor(1).size(), 1u);
  ASSERT_TRUE(Eventually([&] { return delivery.GetStats().retried == 1; }));
  // The wall clock steps an hour back and then forward by 499 ms: the
  // monotonic reading moved 499 ms, short of the earliest retry (500 ms).
  clock.SetMs(clock.NowMs() - 3'600'000);
  clock.SetMs(clock.NowMs() + 499);
  EXPECT_EQ(receiver.WaitFor(2, kGrace).size(), 1u);
  // Monotonic time alone reaches the full wait: the retry comes.
  clock.AdvanceNs(501 * 1'000'000);
  EXPECT_EQ(receiver.WaitFor(2).size(), 2u);
}

}  // namespace
}  // namespace floodgate::service
