// HttpPost and WebhookQueue against a real HTTP receiver on a loopback
// port: the request's shape, 2xx as sent and anything else as failed,
// refused connections, a silent receiver bounded by the timeout (on the
// clock given: real time on SystemClock, only when moved on a
// ManualClock), the queue's bound, and what shutdown drops.
#include "service/delivery/webhook_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "floodgate/clock.h"
#include "service/delivery/http_post.h"
#include "testing/http_receiver.h"
#include "testing/redis_server.h"

namespace floodgate::service {
namespace {

HttpUrl Url(const std::string& text) {
  auto u = ParseHttpUrl(text);
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  return u.ok() ? *u : HttpUrl{};
}

TEST(HttpPostTest, SendsAJsonPostAndReadsTheStatus) {
  testing::HttpReceiver receiver(201);
  auto r = HttpPost(Url(receiver.url("/sms?x=1")), R"({"code":"1"})",
                    {{"Authorization", "Bearer t\r\nX-Evil: 1"}}, 2000, SystemClock::Default());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  const auto got = receiver.WaitFor(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].head.rfind("POST /sms?x=1 HTTP/1.1\r\n", 0), 0u) << got[0].head;
  EXPECT_NE(got[0].head.find("Content-Type: application/json"), std::string::npos);
  EXPECT_NE(got[0].head.find("Host: 127.0.0.1:" + std::to_string(receiver.port())),
            std::string::npos);
  // A header value cannot start a header of its own.
  EXPECT_NE(got[0].head.find("Authorization: Bearer t  X-Evil: 1"), std::string::npos)
      << got[0].head;
  EXPECT_EQ(got[0].body, R"({"code":"1"})");
}

TEST(HttpPostTest, RefusedAndSilentReceivers) {
  const int port = testing::FreePort();
  auto refused = HttpPost(Url("http://127.0.0.1:" + std::to_string(port) + "/"), "{}", {}, 2000,
                          SystemClock::Default());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("refused"), std::string::npos)
      << refused.status().message();

  testing::HttpReceiver silent(0);
  const auto start = std::chrono::steady_clock::now();
  auto timed_out = HttpPost(Url(silent.url()), "{}", {}, 300, SystemClock::Default());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(HttpPostTest, TheTimeoutRunsOutWhenTheClockSaysSo) {
  testing::HttpReceiver silent(0);
  ManualClock clock;
  std::atomic<bool> done{false};
  std::optional<Result<HttpPostResult>> result;
  std::thread post([&] {
    result.emplace(HttpPost(Url(silent.url()), "{}", {}, 300, clock));
    done = true;
  });
  // However the test ends, the POST's time runs out and its thread is joined.
  struct Joiner {
    ManualClock& clock;
    std::thread& thread;
    ~Joiner() {
      clock.AdvanceMs(3'600'000);
      if (thread.joinable()) thread.join();
    }
  } joiner{clock, post};
  ASSERT_EQ(silent.WaitFor(1).size(), 1u);  // sent, and not answered
  // Real time well past the timeout, and all but a millisecond of it on the clock.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  clock.AdvanceMs(299);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(done.load());
  clock.AdvanceMs(1);
  post.join();  // returns within about a millisecond: no timeout here
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->status().code(), StatusCode::kDeadlineExceeded) << result->status().ToString();
}

TEST(WebhookQueueTest, CountsSentAndFailed) {
  testing::HttpReceiver ok(200), broken(503);
  WebhookQueue good({Url(ok.url()), 2000, 10, {}, "test"});
  WebhookQueue bad({Url(broken.url()), 2000, 10, {}, "test"});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(good.TryReserve());
    good.Push("{\"n\":" + std::to_string(i) + "}");
  }
  ASSERT_TRUE(bad.TryReserve());
  bad.Push("{}");
  ASSERT_TRUE(good.WaitIdle(std::chrono::seconds(10)));
  ASSERT_TRUE(bad.WaitIdle(std::chrono::seconds(10)));
  const auto got = ok.WaitFor(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].body, "{\"n\":2}");  // in order
  EXPECT_EQ(good.GetStats().sent, 3);
  EXPECT_EQ(good.GetStats().queued, 0);
  EXPECT_EQ(bad.GetStats().failed, 1);
  EXPECT_EQ(bad.GetStats().sent, 0);
}

TEST(WebhookQueueTest, TheBoundRefusesAndShutdownDrops) {
  testing::HttpReceiver silent(0);
  auto queue =
      std::make_unique<WebhookQueue>(WebhookQueue::Options{Url(silent.url()), 500, 2, {}, "t"});
  ASSERT_TRUE(queue->TryReserve());
  queue->Push("{}");  // taken by the worker, which then waits on the silent receiver
  ASSERT_TRUE(queue->TryReserve());
  EXPECT_FALSE(queue->TryReserve());  // two claimed: full
  queue->Unreserve();
  ASSERT_TRUE(queue->TryReserve());
  queue->Push("{}");
  silent.WaitFor(1);
  EXPECT_EQ(queue->GetStats().dropped, 1);
  EXPECT_EQ(queue->GetStats().queued, 2);
  // Destroying it waits for the POST in flight (at most its timeout) and
  // drops the rest rather than sending them.
  const auto start = std::chrono::steady_clock::now();
  queue.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(silent.WaitFor(1).size(), 1u);
}

}  // namespace
}  // namespace floodgate::service
