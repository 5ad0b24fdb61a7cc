// The Redis client's I/O driven by a caller's own event loop
// (Client::NewLoopDriver) against real servers: requests made on the loop's
// thread are written by its Step, together, and answered on that thread, in
// order per key; deadlines are kept without polling; an idle driver lets its
// loop sleep; a killed and restarted server is used again within a second;
// Detach answers what is pending; a cluster's slot map is followed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/client_helpers.h"
#include "redis/slot_map.h"
#include "testing/driven_loop.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

using client_testing::Eventually;
using client_testing::Latch;
using client_testing::MakeClient;
using client_testing::OptionsFor;
using client_testing::Text;
using floodgate::testing::DrivenLoop;
using floodgate::testing::RedisServer;
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::unique_ptr<DrivenLoop> DriveClient(Client& client) {
  Result<std::unique_ptr<LoopDriver>> driver = client.NewLoopDriver();
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  if (!driver.ok()) return nullptr;
  return std::make_unique<DrivenLoop>(std::move(driver).value());
}

// Sends PING from the loop until one is answered PONG (the driver has its
// own connections, opened on its first steps).
bool WaitUntilConnected(Client& client, DrivenLoop& loop) {
  return Eventually([&] {
    std::atomic<int> state{0};  // 0 waiting, 1 PONG, 2 anything else
    loop.RunAndWait([&] {
      client.Send("", {"PING"}, [&](Status s, const redisReply* r) {
        state.store(s.ok() && r->type == REDIS_REPLY_STATUS ? 1 : 2);
      });
    });
    Eventually([&] { return state.load() != 0; });
    return state.load() == 1;
  });
}

// Sends one command from the loop's thread and waits for its answer, as Text().
std::string OnLoop(DrivenLoop& loop, Client& client, const std::string& key,
                   std::vector<std::string> args) {
  std::mutex mu;
  std::string text;
  Latch latch(1);
  loop.Post([&] {
    client.Send(key, args, [&](Status s, const redisReply* r) {
      std::lock_guard<std::mutex> lock(mu);
      text = s.ok() ? DescribeReply(r) : "status " + s.ToString();
      latch.CountDown();
    });
  });
  EXPECT_TRUE(latch.Wait());
  std::lock_guard<std::mutex> lock(mu);
  return text;
}

TEST(ClientLoopDriverTest, OneIterationsRequestsShareOneWriteAndAreAnsweredOnTheLoopThread) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ClientOptions options = OptionsFor(redis.url());
  options.connections_per_node = 1;
  auto client = MakeClient(options);
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  constexpr int kCommands = 200;
  const Client::Stats before = client->GetStats();
  Latch latch(kCommands);
  std::vector<int64_t> values;  // appended on the loop's thread only
  std::atomic<int> elsewhere{0};
  loop->RunAndWait([&] {
    EXPECT_TRUE(client->RunsIoHere());
    for (int i = 0; i < kCommands; ++i) {
      client->Send("counter", {"INCR", "counter"}, [&](Status s, const redisReply* r) {
        if (std::this_thread::get_id() != loop->thread_id()) elsewhere.fetch_add(1);
        values.push_back(s.ok() && r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
        latch.CountDown();
      });
    }
  });
  ASSERT_TRUE(latch.Wait());
  EXPECT_EQ(elsewhere.load(), 0) << "callbacks ran off the loop's thread";
  loop->RunAndWait([&] {
    ASSERT_EQ(values.size(), size_t{kCommands});
    for (int i = 0; i < kCommands; ++i) EXPECT_EQ(values[i], i + 1);
  });
  const Client::Stats after = client->GetStats();
  EXPECT_EQ(after.commands_written - before.commands_written, uint64_t{kCommands});
  EXPECT_EQ(after.writes - before.writes, 1u) << "one iteration's requests, one write";
  EXPECT_FALSE(client->RunsIoHere());  // this thread is not the loop's
}

TEST(ClientLoopDriverTest, RequestsOnOneKeyRunInTheOrderSentAcrossIterations) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url()));
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  constexpr int kIterations = 50;
  constexpr int kPerIteration = 20;
  Latch latch(kIterations * kPerIteration);
  std::vector<int64_t> values;  // the loop's thread only
  for (int it = 0; it < kIterations; ++it) {
    loop->Post([&] {
      for (int i = 0; i < kPerIteration; ++i) {
        client->Send("ordered", {"INCR", "ordered"}, [&](Status s, const redisReply* r) {
          values.push_back(s.ok() && r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
          latch.CountDown();
        });
      }
    });
  }
  ASSERT_TRUE(latch.Wait());
  loop->RunAndWait([&] {
    ASSERT_EQ(values.size(), size_t{kIterations * kPerIteration});
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], int64_t(i) + 1) << i;
  });
}

TEST(ClientLoopDriverTest, IdleDriverLetsItsLoopSleep) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url()));
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));
  loop->RunAndWait([] {});  // whatever was left to do, done
  const int64_t before = loop->iterations();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(loop->iterations() - before, 1) << "an idle driver woke its loop";
}

TEST(ClientLoopDriverTest, ARequestNotAnsweredInTimeIsAnsweredAtItsDeadline) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ClientOptions options = OptionsFor(redis.url(), 20);
  auto client = MakeClient(options);
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  std::thread sleeper = floodgate::testing::StallServer(redis.port(), 0.4);
  const int64_t before = loop->iterations();
  std::atomic<int> code{-1};
  std::atomic<int64_t> latency_ms{-1};
  const Clock::time_point sent = Clock::now();
  loop->Post([&] {
    client->Send("", {"PING"}, [&](Status s, const redisReply*) {
      latency_ms.store(MsSince(sent));
      code.store(static_cast<int>(s.code()));
    });
  });
  ASSERT_TRUE(Eventually([&] { return code.load() >= 0; }, std::chrono::seconds(2)));
  EXPECT_EQ(code.load(), static_cast<int>(StatusCode::kDeadlineExceeded));
  EXPECT_GE(latency_ms.load(), 19);
  EXPECT_LE(latency_ms.load(), 20 + 60);  // slack for a shared machine
  // The loop slept until the deadline instead of polling for it.
  EXPECT_LE(loop->iterations() - before, 10);
  sleeper.join();
  // The late reply was dropped in order: the next answer is its own.
  std::atomic<int> echoed{0};
  loop->RunAndWait([&] {
    client->Send("", {"ECHO", "in step"}, [&](Status s, const redisReply* r) {
      echoed.store(s.ok() && r->type == REDIS_REPLY_STRING && std::string(r->str) == "in step" ? 1
                                                                                               : 2);
    });
  });
  ASSERT_TRUE(Eventually([&] { return echoed.load() != 0; }));
  EXPECT_EQ(echoed.load(), 1);
  EXPECT_GE(client->GetStats().stale_replies, 1u);
}

TEST(ClientLoopDriverTest, ACallersEarlierDeadlineIsKept) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url(), 300));
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  // A deadline already past: answered at the next step, never written.
  const uint64_t written = client->GetStats().commands_written;
  std::atomic<int> code{-1};
  loop->RunAndWait([&] {
    const std::string_view ping[] = {"PING"};
    client->Send(
        "", ping, [&](Status s, const redisReply*) { code.store(static_cast<int>(s.code())); },
        client->clock().MonotonicNs() - 1);
  });
  ASSERT_TRUE(Eventually([&] { return code.load() >= 0; }, std::chrono::seconds(2)));
  EXPECT_EQ(code.load(), static_cast<int>(StatusCode::kDeadlineExceeded));
  EXPECT_EQ(client->GetStats().commands_written, written);

  // While the server stalls, a batch command with a deadline 40 ms out is
  // answered then, one without at the client's 300 ms.
  std::thread sleeper = floodgate::testing::StallServer(redis.port(), 0.6);
  std::atomic<int64_t> early_ms{-1}, late_ms{-1};
  std::atomic<int> early_code{-1};
  const Clock::time_point sent = Clock::now();
  loop->RunAndWait([&] {
    Batch batch;
    const std::string_view ping[] = {"PING"};
    batch.Add(
        "", ping,
        [&](Status s, const redisReply*) {
          early_code.store(static_cast<int>(s.code()));
          early_ms.store(MsSince(sent));
        },
        client->clock().MonotonicNs() + 40 * 1'000'000);
    batch.Add("", ping, [&](Status, const redisReply*) { late_ms.store(MsSince(sent)); });
    client->Send(std::move(batch));
  });
  ASSERT_TRUE(Eventually([&] { return late_ms.load() >= 0; }, std::chrono::seconds(3)));
  EXPECT_EQ(early_code.load(), static_cast<int>(StatusCode::kDeadlineExceeded));
  EXPECT_GE(early_ms.load(), 39);
  EXPECT_LE(early_ms.load(), 40 + 60);  // slack for a shared machine
  EXPECT_GE(late_ms.load(), 299);
  sleeper.join();
}

TEST(ClientLoopDriverTest, AKilledServerFailsFastAndIsUsedAgainWithinASecondOfItsReturn) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ClientOptions options = OptionsFor(redis.url(), 20);
  auto client = MakeClient(options);
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  // One INCR per millisecond from the loop, each outcome recorded.
  struct Outcome {
    bool ok;
    int64_t sent_ms;
    int64_t latency_ms;
  };
  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::atomic<bool> stop{false};
  const Clock::time_point start = Clock::now();
  std::thread load([&] {
    while (!stop.load()) {
      loop->Post([&] {
        const int64_t sent_ms = MsSince(start);
        client->Send("load", {"INCR", "load"}, [&, sent_ms](Status s, const redisReply*) {
          std::lock_guard<std::mutex> lock(mu);
          outcomes.push_back({s.ok(), sent_ms, MsSince(start) - sent_ms});
        });
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  auto last_ok_after = [&](int64_t ms) {
    std::lock_guard<std::mutex> lock(mu);
    return !outcomes.empty() && outcomes.back().ok && outcomes.back().sent_ms > ms;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  redis.Kill();
  const int64_t killed_ms = MsSince(start);
  EXPECT_TRUE(
      Eventually([&] { return client->GetStats().open_circuits == 1; }, std::chrono::seconds(2)))
      << "the circuit did not open";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(redis.RestartSamePort()) << redis.error();
  const int64_t back_ms = MsSince(start);
  const bool recovered =
      Eventually([&] { return last_ok_after(back_ms); }, std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop.store(true);
  load.join();
  // Detaches on the loop's thread, answering what is still in flight, so no
  // callback runs after `outcomes` and `mu` are gone.
  loop->Stop();
  EXPECT_TRUE(recovered) << "not used again within 1 s of the server's return";

  std::lock_guard<std::mutex> lock(mu);
  // As in client_test.cc: a few answers late on a loaded machine, none as
  // late as the server was away (over 300 ms).
  int late = 0, down_ok = 0, down_failed = 0;
  int64_t worst = 0;
  for (const Outcome& o : outcomes) {
    if (o.latency_ms > options.timeout_ms + 60) ++late;
    worst = std::max(worst, o.latency_ms);
    if (o.sent_ms > killed_ms + 50 && o.sent_ms < back_ms - 50) (o.ok ? down_ok : down_failed)++;
  }
  EXPECT_LE(late, 3) << "answers later than the timeout";
  EXPECT_LT(worst, 250) << "an answer waited for the server";
  EXPECT_EQ(down_ok, 0);
  EXPECT_GT(down_failed, 50);
  EXPECT_GE(client->GetStats().circuit_rejections, 1u);
}

TEST(ClientLoopDriverTest, DetachAnswersEverythingPendingOnTheLoopThread) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url()));
  auto loop = DriveClient(*client);
  ASSERT_TRUE(WaitUntilConnected(*client, *loop));

  std::thread sleeper = floodgate::testing::StallServer(redis.port(), 1.0);
  constexpr int kRequests = 10;
  std::atomic<int> unavailable{0}, other{0}, elsewhere{0};
  loop->RunAndWait([&] {
    for (int i = 0; i < kRequests; ++i) {
      client->Send("", {"PING"}, [&](Status s, const redisReply*) {
        if (std::this_thread::get_id() != loop->thread_id()) elsewhere.fetch_add(1);
        (s.code() == StatusCode::kUnavailable ? unavailable : other).fetch_add(1);
      });
    }
  });
  loop->RunAndWait([] {});  // written, now in flight
  loop->Stop();             // detaches on the loop's thread
  EXPECT_EQ(unavailable.load(), kRequests) << "answered by Detach, before Stop returned";
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(elsewhere.load(), 0);
  sleeper.join();
  // The client itself goes on, on its I/O thread.
  EXPECT_EQ(Text(client->Call("", {"PING"})), "PONG");
}

TEST(ClientLoopDriverTest, BlockingCallsOnTheLoopThreadAreRefused) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url()));
  auto loop = DriveClient(*client);
  Result<OwnedReply> reply = UnavailableError("not run");
  loop->RunAndWait([&] { reply = client->Call("", {"PING"}); });
  EXPECT_EQ(reply.status().code(), StatusCode::kInternal) << Text(reply);
  EXPECT_EQ(Text(client->Call("", {"PING"})), "PONG");  // from this thread, fine
}

TEST(ClientLoopDriverTest, ClusterRequestsFollowTheSlotMap) {
  floodgate::testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  auto client = MakeClient(OptionsFor(cluster.url()));
  ASSERT_FALSE(client->Masters().empty());  // the I/O thread read the slot map
  auto loop = DriveClient(*client);

  constexpr int kKeys = 300;
  Latch written(kKeys);
  std::atomic<int> failures{0};
  loop->RunAndWait([&] {
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "k" + std::to_string(i);
      client->Send(key, {"SET", key, "v" + std::to_string(i)}, [&](Status s, const redisReply* r) {
        if (!s.ok() || r->type == REDIS_REPLY_ERROR) failures.fetch_add(1);
        written.CountDown();
      });
    }
  });
  ASSERT_TRUE(written.Wait());
  EXPECT_EQ(failures.load(), 0);
  // Each key landed on its slot's master: read back through the I/O thread.
  for (int i = 0; i < kKeys; i += 37) {
    const std::string key = "k" + std::to_string(i);
    EXPECT_EQ(Text(client->Call(key, {"GET", key})), "\"v" + std::to_string(i) + "\"");
  }
  EXPECT_EQ(client->GetStats().moved, 0u) << "the driver knew the slot map";
}

TEST(ClientLoopDriverTest, ClusterRedirectsAreFollowedAndMovedUpdatesTheDriversMap) {
  floodgate::testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  auto client = MakeClient(OptionsFor(cluster.url()));
  const std::vector<std::string> masters = client->Masters();
  ASSERT_EQ(masters.size(), 3u);
  auto loop = DriveClient(*client);
  const std::string key = "migrating:{d}";
  const std::string slot = std::to_string(KeySlot(key));
  ASSERT_EQ(OnLoop(*loop, *client, key, {"SET", key, "v1"}), "OK");

  std::string source, target;
  std::map<std::string, std::string> ids;
  for (const std::string& node : masters) {
    Result<OwnedReply> id = client->CallNode(node, {"CLUSTER", "MYID"});
    ASSERT_TRUE(id.ok());
    ids[node].assign((*id)->str, (*id)->len);
    if (Text(client->CallNode(node, {"EXISTS", key})) == "(integer) 1") source = node;
  }
  ASSERT_FALSE(source.empty());
  for (const std::string& node : masters) {
    if (node != source) target = node;
  }
  const HostPort to = *ParseHostPort(target);
  // Migrating: the old master answers ASK, which the driver follows.
  ASSERT_EQ(Text(client->CallNode(target, {"CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source]})),
            "OK");
  ASSERT_EQ(Text(client->CallNode(source, {"CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target]})),
            "OK");
  ASSERT_EQ(Text(client->CallNode(source, {"MIGRATE", to.host, std::to_string(to.port), "", "0",
                                           "5000", "KEYS", key})),
            "OK");
  Client::Stats before = client->GetStats();
  EXPECT_EQ(OnLoop(*loop, *client, key, {"GET", key}), "\"v1\"");
  EXPECT_EQ(client->GetStats().ask - before.ask, 1u);
  // Moved: the driver's copy of the map is stale until its MOVED.
  for (const std::string& node : masters) {
    ASSERT_EQ(Text(client->CallNode(node, {"CLUSTER", "SETSLOT", slot, "NODE", ids[target]})),
              "OK");
  }
  before = client->GetStats();
  EXPECT_EQ(OnLoop(*loop, *client, key, {"GET", key}), "\"v1\"");
  EXPECT_EQ(client->GetStats().moved - before.moved, 1u);
  before = client->GetStats();
  EXPECT_EQ(OnLoop(*loop, *client, key, {"SET", key, "v2"}), "OK");
  EXPECT_EQ(client->GetStats().moved - before.moved, 0u) << "the driver learnt the slot's node";
  EXPECT_EQ(Text(client->Call(key, {"GET", key})), "\"v2\"");
}

}  // namespace
}  // namespace floodgate::redis
