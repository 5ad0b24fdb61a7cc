// Quota alerts on the Redis store, with a real redis-server and a real HTTP
// receiver: two Limiters (two servers) sharing one Redis send one event per
// threshold; events pending at a graceful stop are handed back to the stream
// and sent by the next server at once; events a crashed server held are
// taken over after claim_after; the stream key always has an expiry; the
// group forgets the consumers of stopped servers, never one holding events.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/limiter.h"
#include "nlohmann/json.hpp"
#include "redis/alert_stream.h"
#include "redis/client.h"
#include "testing/eventually.h"
#include "testing/http_receiver.h"
#include "testing/redis_server.h"

namespace floodgate {
namespace {

using namespace std::chrono_literals;
using testing::Eventually;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RedisAlertsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::RedisServer();
    ASSERT_TRUE(server_->Start()) << server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ::setenv("FG_TEST_ALERT_SECRET", "redis-alerts-secret", 1);
    Command("FLUSHALL");
  }

  // A client of the suite's Redis, for the stream's own operations.
  static Result<std::unique_ptr<redis::Client>> NewClient() {
    redis::ClientOptions options;
    options.url = *ParseStoreUrl(server_->url());
    options.timeout_ms = 2000;
    return redis::Client::Create(options);
  }

  Config MakeConfig(const std::string& webhook, const std::string& limit = "100/day") {
    Config c;
    c.store = server_->url();
    c.redis.timeout_ms = 2000;
    c.redis.local_cache = false;
    c.engine.sweep_interval_ms = 0;
    Rule r;
    r.name = "quota";
    r.limits = {*ParseLimit(limit)};
    r.alerts.thresholds = {80, 100};
    r.alerts.webhook = webhook;
    r.alerts.secret_env = "FG_TEST_ALERT_SECRET";
    c.rules.push_back(r);
    c.alert_delivery.backoff_initial_ms = 20;
    c.alert_delivery.backoff_max_ms = 100;
    c.alert_delivery.timeout_ms = 5000;  // a late 200 would be retried: a duplicate
    return c;
  }

  // A command on a connection of its own; the reply's integer (or -100).
  static int64_t Command(const char* format, const char* arg = nullptr) {
    redisContext* c = redisConnect("127.0.0.1", server_->port());
    auto* r = static_cast<redisReply*>(redisCommand(c, format, arg));
    const int64_t v = r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    return v;
  }

  // The stream group's consumers: name -> entries pending.
  static std::map<std::string, int64_t> Consumers() {
    std::map<std::string, int64_t> out;
    redisContext* c = redisConnect("127.0.0.1", server_->port());
    auto* r =
        static_cast<redisReply*>(redisCommand(c, "XINFO CONSUMERS %s floodgate", "fg:{alerts}"));
    for (size_t i = 0; r != nullptr && r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      std::string name;
      int64_t pending = -1;
      for (size_t f = 0; e->type == REDIS_REPLY_ARRAY && f + 1 < e->elements; f += 2) {
        const std::string field(e->element[f]->str, e->element[f]->len);
        if (field == "name") name.assign(e->element[f + 1]->str, e->element[f + 1]->len);
        if (field == "pending") pending = e->element[f + 1]->integer;
      }
      out[name] = pending;
    }
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    return out;
  }

  static testing::RedisServer* server_;
  SystemClock clock_;
};
testing::RedisServer* RedisAlertsTest::server_ = nullptr;

TEST_F(RedisAlertsTest, TwoServersOnOneRedisSendOneEventPerThreshold) {
  testing::HttpReceiver receiver;
  auto a = Limiter::Create(MakeConfig(receiver.url("/quota")), clock_);
  auto b = Limiter::Create(MakeConfig(receiver.url("/quota")), clock_);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Check("quota", "user:42", 70).ok());
  // 100 requests at once, half through each server: 30 fit.
  std::atomic<int> admitted{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    Limiter* l = (i % 2 == 0 ? a : b)->get();
    threads.emplace_back([&, l] {
      while (!go.load()) std::this_thread::yield();
      auto d = l->Check("quota", "user:42");
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d->fallback, Fallback::kNone);
      if (d->allowed) admitted.fetch_add(1);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 30);
  const auto got = receiver.WaitFor(2);
  std::this_thread::sleep_for(500ms);  // anything more would have come by now
  ASSERT_EQ(receiver.WaitFor(3, 0ms).size(), 2u);
  std::set<int> thresholds;
  for (const auto& r : got) {
    const auto j = nlohmann::json::parse(r.body);
    thresholds.insert(j.at("threshold").get<int>());
    EXPECT_EQ(j.at("used").get<int>(), j.at("threshold").get<int>());
  }
  EXPECT_EQ(thresholds, (std::set<int>{80, 100}));
  const int64_t emitted = (*a)->alerts().GetStats().emitted + (*b)->alerts().GetStats().emitted;
  EXPECT_EQ(emitted, 2);
  // Counted once the receiver's answer is read, just after it got them.
  auto delivered = [&] {
    return (*a)->alerts().GetStats().delivered + (*b)->alerts().GetStats().delivered;
  };
  Eventually([&] { return delivered() >= 2; });
  EXPECT_EQ(delivered(), 2);
  // The stream key expires by itself, like every key floodgate writes.
  EXPECT_GT(Command("PTTL %s", "fg:{alerts}"), 0);
}

TEST_F(RedisAlertsTest, AGracefulStopHandsPendingEventsToTheNextServer) {
  int port = 0;
  {
    testing::HttpReceiver probe;
    port = probe.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/quota";
  Config config = MakeConfig(url, "10/day");
  config.alert_delivery.claim_after_ms = 60'000;  // a takeover would be too late for this test
  std::set<std::string> emitted_ids;
  {
    auto limiter = Limiter::Create(config, clock_);
    ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
    ASSERT_TRUE((*limiter)->Check("quota", "k", 10).ok());
    // Until both are taken from the stream and have failed.
    Alerts::Stats s;
    Eventually([&] {
      s = (*limiter)->alerts().GetStats();
      return s.pending >= 2 && s.retried >= 2;
    });
    EXPECT_EQ(s.emitted, 2);
    EXPECT_EQ(s.pending, 2);
    EXPECT_GE(s.retried, 2);
    for (const AlertRecord& r : (*limiter)->alerts().Recent(10)) {
      emitted_ids.insert(r.event.event_id);
    }
  }
  EXPECT_GT(Command("PTTL %s", "fg:{alerts}"), 0);
  testing::HttpReceiver receiver(200, port);
  const auto start = std::chrono::steady_clock::now();
  auto next = Limiter::Create(config, clock_);
  ASSERT_TRUE(next.ok());
  const auto got = receiver.WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // not after claim_after
  std::set<std::string> ids;
  for (const auto& r : got) ids.insert(r.Header("Idempotency-Key"));
  EXPECT_EQ(ids, emitted_ids);
  for (int i = 0; i < 100 && Command("XLEN %s", "fg:{alerts}") != 0; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(Command("XLEN %s", "fg:{alerts}"), 0) << "delivered entries are deleted";
  const auto recent = (*next)->alerts().Recent(10);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].status, AlertStatus::kDelivered);
  EXPECT_GE(recent[0].attempts, 2);  // the first server's tries count
}

TEST_F(RedisAlertsTest, EventsACrashedServerHeldAreTakenOver) {
  testing::HttpReceiver receiver;
  auto client = NewClient();
  ASSERT_TRUE(client.ok());
  // A server that took an event and died: it never acknowledges it.
  redis::AlertStream dead(**client, {"floodgate", "dead-server", 1000, 3'600'000});
  const PendingAlert event{"0123456789abcdef0123456789abcdef",
                           receiver.url("/taken"),
                           "{\"event_id\":\"0123456789abcdef0123456789abcdef\"}",
                           "sha256=x",
                           WallMs(),
                           1,
                           ""};
  ASSERT_TRUE(dead.Add(std::span<const PendingAlert>(&event, 1)).ok());
  const auto claimed = std::chrono::steady_clock::now();
  auto taken = dead.Claim(10, 60'000);
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(taken->size(), 1u);
  EXPECT_EQ(taken->at(0).attempts, 1);

  Config config = MakeConfig(receiver.url("/quota"));
  config.alert_delivery.claim_after_ms = 1000;
  auto limiter = Limiter::Create(config, clock_);
  ASSERT_TRUE(limiter.ok());
  const auto got = receiver.WaitFor(1, 10s);
  ASSERT_EQ(got.size(), 1u);
  // Taken over only once it had been idle claim_after, however long the
  // server took to start.
  EXPECT_GE(std::chrono::steady_clock::now() - claimed, 1s);
  EXPECT_EQ(got[0].Header("Idempotency-Key"), event.event_id);
  EXPECT_TRUE(got[0].head.starts_with("POST /taken "));
}

TEST_F(RedisAlertsTest, ForgetKeepsAConsumerThatHoldsEntriesAndLeaveOnlyAnEmptyOne) {
  auto client = NewClient();
  ASSERT_TRUE(client.ok());
  redis::AlertStream holder(**client, {"floodgate", "holder", 1000, 60'000});
  redis::AlertStream idle(**client, {"floodgate", "idle", 1000, 60'000});
  redis::AlertStream live(**client, {"floodgate", "live", 1000, 60'000});
  const std::vector<PendingAlert> events(3, {"id", "http://h/", "{}", "s", WallMs(), 0, ""});
  ASSERT_TRUE(holder.Add(events).ok());
  // A consumer joins the group when it first reads an entry.
  ASSERT_EQ(holder.Claim(1, 60'000)->size(), 1u);
  for (redis::AlertStream* s : {&idle, &live}) {
    auto got = s->Claim(1, 60'000);
    ASSERT_EQ(got->size(), 1u);
    const std::string id = got->at(0).stream_id;
    ASSERT_TRUE(s->Ack(std::span<const std::string>(&id, 1)).ok());
  }
  ASSERT_EQ(Consumers(), (std::map<std::string, int64_t>{{"holder", 1}, {"idle", 0}, {"live", 0}}));

  // Not idle long enough: nobody is forgotten.
  auto forgot = live.Forget(60'000);
  ASSERT_TRUE(forgot.ok()) << forgot.status().ToString();
  EXPECT_EQ(*forgot, 0);
  // Idle long enough: the empty one goes, the one holding an entry stays
  // (deleting it would drop the entry), and the caller is never forgotten.
  std::this_thread::sleep_for(20ms);
  forgot = live.Forget(10);
  ASSERT_TRUE(forgot.ok());
  EXPECT_EQ(*forgot, 1);
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"holder", 1}, {"live", 0}}));
  // Leaving: refused while holding, done once empty.
  ASSERT_TRUE(holder.Leave().ok());
  EXPECT_EQ(Consumers().count("holder"), 1u);
  ASSERT_TRUE(live.Leave().ok());
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"holder", 1}}));
  // Taken over, the entry is live's; then the holder holds nothing.
  std::this_thread::sleep_for(20ms);
  ASSERT_EQ(live.Claim(10, 10)->size(), 1u);
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"holder", 0}, {"live", 1}}));
  forgot = live.Forget(0);
  ASSERT_TRUE(forgot.ok());
  EXPECT_EQ(*forgot, 1);
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"live", 1}}));
  EXPECT_EQ(Command("XLEN %s", "fg:{alerts}"), 1) << "the entry itself is never touched";
}

TEST_F(RedisAlertsTest, TheConsumersOfStoppedServersLeaveTheGroupAndNoEventIsLost) {
  testing::HttpReceiver receiver;
  auto client = NewClient();
  ASSERT_TRUE(client.ok());
  int serial = 0;
  std::set<std::string> sent;
  auto event = [&] {
    char id[33];
    std::snprintf(id, sizeof(id), "%032d", ++serial);
    sent.insert(id);
    return PendingAlert{id, receiver.url("/e"), "{}", "sha256=x", WallMs(), 0, ""};
  };
  // A server that took an event and died.
  redis::AlertStream dead(**client, {"floodgate", "dead-server", 1000, 3'600'000});
  const PendingAlert held = event();
  ASSERT_TRUE(dead.Add(std::span<const PendingAlert>(&held, 1)).ok());
  // Taken before its last read: Redis counts the consumer idle from when the
  // read ran, which the reply's arrival may follow by a stall.
  const auto died = std::chrono::steady_clock::now();
  ASSERT_EQ(dead.Claim(10, 60'000)->size(), 1u);
  // The group's consumers, noting when the dead server's was first seen
  // gone: however slow the machine, never before 3 claim_after of idleness.
  std::optional<std::chrono::steady_clock::time_point> dead_gone;
  auto consumers = [&] {
    auto now = Consumers();
    if (!dead_gone && !now.empty() && now.count("dead-server") == 0) {
      dead_gone = std::chrono::steady_clock::now();
    }
    return now;
  };
  auto servers = [&] {
    std::set<std::string> names;
    for (const auto& [name, pending] : consumers()) {
      if (name != "dead-server") names.insert(name);
    }
    return names;
  };

  Config config = MakeConfig(receiver.url("/quota"));
  config.alert_delivery.claim_after_ms = 1000;  // forgotten after 3 s idle
  auto a = Limiter::Create(config, clock_);
  ASSERT_TRUE(a.ok());
  std::set<std::string> both;
  {
    auto b = Limiter::Create(config, clock_);
    ASSERT_TRUE(b.ok());
    // Events (emitted elsewhere) until each server has taken one and so
    // joined the group.
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (both.size() < 2 && std::chrono::steady_clock::now() < until) {
      const PendingAlert e = event();
      ASSERT_TRUE(dead.Add(std::span<const PendingAlert>(&e, 1)).ok());
      std::this_thread::sleep_for(30ms);
      both = servers();
    }
    ASSERT_EQ(both.size(), 2u) << "each server joined the group";
  }
  // b stopped cleanly, holding nothing after its stop: it left the group.
  const auto after_b = servers();
  ASSERT_EQ(after_b.size(), 1u);
  const std::string a_name = *after_b.begin();
  EXPECT_EQ(both.count(a_name), 1u);

  // The dead server's event is taken over after claim_after and delivered;
  // its consumer, holding nothing then, is forgotten after 3 claim_after.
  std::set<std::string> received;
  for (const auto& r : receiver.WaitFor(sent.size(), 20s)) {
    received.insert(r.Header("Idempotency-Key"));
  }
  EXPECT_EQ(received, sent) << "every event delivered, the dead server's too";
  // Until the dead server is forgotten and a has acknowledged every
  // delivery (an acknowledgement follows its delivery by one round).
  std::map<std::string, int64_t> left = consumers();
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (left != std::map<std::string, int64_t>{{a_name, 0}} &&
         std::chrono::steady_clock::now() < until) {
    if (left.count("dead-server") != 0) {
      EXPECT_EQ(left.at("dead-server"), 0) << "its event was taken over before its delivery";
    }
    std::this_thread::sleep_for(50ms);
    left = consumers();
  }
  EXPECT_EQ(left, (std::map<std::string, int64_t>{{a_name, 0}}));
  ASSERT_TRUE(dead_gone.has_value());
  EXPECT_GE(*dead_gone - died, 3s) << "forgotten only after the bound";
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(receiver.WaitFor(sent.size() + 1, 0ms).size(), sent.size()) << "each one once";
  EXPECT_EQ(Command("XLEN %s", "fg:{alerts}"), 0) << "delivered entries are deleted";
  // A clean stop of the last server leaves an empty group.
  a->reset();
  EXPECT_TRUE(Consumers().empty());
}

TEST_F(RedisAlertsTest, TheStreamIsBoundedAndTrimmingIsCounted) {
  auto client = NewClient();
  ASSERT_TRUE(client.ok());
  redis::AlertStream stream(**client, {"floodgate", "c1", 100, 60'000});
  std::vector<PendingAlert> events(130,
                                   PendingAlert{"id", "http://h/", "{}", "s", WallMs(), 0, ""});
  auto trimmed = stream.Add(events);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  EXPECT_EQ(*trimmed, 30);
  EXPECT_EQ(Command("XLEN %s", "fg:{alerts}"), 100);
  const int64_t ttl = Command("PTTL %s", "fg:{alerts}");
  EXPECT_GT(ttl, 50'000);
  EXPECT_LE(ttl, 60'000);
  // Claims and acknowledgements never create the key, nor drop its expiry.
  ASSERT_TRUE(stream.Claim(10, 1000).ok());
  Command("DEL %s", "fg:{alerts}");
  auto none = stream.Claim(10, 1000);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(Command("EXISTS %s", "fg:{alerts}"), 0);
}

}  // namespace
}  // namespace floodgate
