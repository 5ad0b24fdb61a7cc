// Leases on a real redis-server: the golden lease vectors through the
// Redis store's LeaseStore (as its Rooms hand it on) at explicit instants (one server, a Redis
// Cluster, Twemproxy), every lease key with a TTL (or gone) after every step; the script's own
// reply, `expired` included, on the same vectors; its key names; a key of the wrong type refused
// with nothing written; bad arguments refused before any write; threads on one subject never
// holding more than max_in_flight; real TTLs on Redis's clock; and `floodgate audit` on lease keys.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/lease_store.h"
#include "redis/remote_store.h"
#include "redis/scripts.h"
#include "redis/wrong_type.h"
#include "testing/audit_cli.h"
#include "testing/lease_vectors.h"
#include "testing/nutcracker.h"
#include "testing/redis_cluster.h"
#include "testing/redis_peek.h"
#include "testing/redis_server.h"
#include "testing/remote_store.h"

namespace floodgate::redis {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

// The store opened as the service opens it (store::Rooms), and its client
// (null on failure).
struct Opened {
  store::Rooms rooms;
  Client* client = nullptr;
};

Opened OpenStore(const std::string& url, const Clock& clock) {
  Opened opened;
  auto remote = testing::OpenRemoteStore(url, clock, /*timeout_ms=*/5000);  // not latency
  if (remote == nullptr) return opened;
  opened.client = &remote->client();
  opened.rooms = RemoteStore::RoomsOf(std::move(remote));
  return opened;
}

// One lease operation through the LeaseStore interface, waited for.
std::pair<Status, store::LeaseResult> LeaseAndWait(store::LeaseStore& store,
                                                   const store::LeaseOp& op) {
  std::promise<std::pair<Status, store::LeaseResult>> done;
  store::LeaseResult result;
  Status status;
  const store::Answer answer =
      store.Lease(op, &result, &status, [&done]() -> store::Done<store::LeaseResult> {
        return [&done](const Status& s, const store::LeaseResult& r) { done.set_value({s, r}); };
      });
  if (answer == store::Answer::kNow) return {status, result};
  return done.get_future().get();
}

store::LeaseOp Op(store::LeaseOpKind kind, std::string_view subject, std::string_view lease,
                  int64_t ttl_ms = 1000, int64_t max_in_flight = 3, const int64_t* at_ms = nullptr,
                  std::string_view rule = "r") {
  return store::LeaseOp{kind, rule, subject, lease, ttl_ms, max_in_flight, at_ms};
}

// The integer a key-routed command answers (PTTL, EXISTS), or INT64_MIN.
int64_t Integer(Client& client, const std::string& key, std::vector<std::string> argv) {
  auto r = client.Call(key, argv);
  if (!r.ok() || (*r)->type != REDIS_REPLY_INTEGER) return INT64_MIN;
  return (*r)->integer;
}

// Runs one lease vector case through `store` with subjects under `prefix`;
// `peek` routes by key to the same deployment. After each step the
// subject's key must have a TTL or not exist: PTTL -1 (a key without one)
// is the one answer refused (a key in its last millisecond reads 0). The
// script sets TTLs from the vectors' instants, which may leave a key 1 ms
// to live in real time while the next step comes at the same vector
// instant: it is then kept for the test's duration (PEXPIRE, so it never
// ends up without a TTL).
void RunLeaseCase(store::LeaseStore& store, Client& peek, const testing::LeaseCase& lc,
                  const std::string& prefix, int* steps) {
  for (size_t i = 0; i < lc.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const auto& step = lc.steps[i];
    const std::string subject = prefix + step.key;
    const auto [s, r] =
        LeaseAndWait(store, testing::LeaseOpOf(step, "r:vectors", subject, &step.t_ms));
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.now_ms, step.t_ms);
    testing::ExpectLeaseMatches(step, r.ok, r.in_flight, r.ms);
    const std::string key = LeaseKey("r:vectors", subject);
    const int64_t pttl = Integer(peek, key, {"PTTL", key});
    EXPECT_NE(pttl, -1) << key << " has no TTL";
    EXPECT_GE(pttl, -2);
    if (pttl >= 0) {
      EXPECT_GE(Integer(peek, key, {"PEXPIRE", key, "600000"}), 0);
    }
    ++*steps;
  }
}

// Runs every lease vector. A case whose key expired in real time between a
// step and its stretch (a TTL of a few ms left, a stalled machine) fails its
// first run; it is run once more from scratch under a new prefix, and only
// a second failure counts: a real difference fails both times.
void RunLeaseVectors(store::LeaseStore& store, Client& peek, int* steps) {
  const auto cases = testing::LoadLeaseVectors();
  ASSERT_GE(cases.size(), 8u);
  int index = 0, reruns = 0;
  for (const auto& lc : cases) {
    SCOPED_TRACE(lc.name);
    ::testing::TestPartResultArray first_run;
    {
      ::testing::ScopedFakeTestPartResultReporter intercept(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &first_run);
      RunLeaseCase(store, peek, lc, "case" + std::to_string(index++) + ":", steps);
    }
    if (first_run.size() > 0) {
      ++reruns;
      RunLeaseCase(store, peek, lc, "case" + std::to_string(index++) + ":", steps);
    }
  }
  EXPECT_LE(reruns, 2) << "lease cases needing a second run: a timing artefact should be rare";
}

using Peek = testing::RedisPeek;

TEST(LeaseKeyTest, NamesTheRuleAndSubjectApart) {
  EXPECT_EQ(LeaseKey("api", "alice"), "fg:lease:{api:alice}");
  EXPECT_EQ(LeaseKey("a:b", "c"), "fg:lease:{a%3Ab:c}");
  EXPECT_EQ(LeaseKey("a", "b:c"), "fg:lease:{a:b:c}");
  EXPECT_NE(LeaseKey("a:b", "c"), LeaseKey("a", "b:c"));
  EXPECT_NE(LeaseKey("a%3Ab", "c"), LeaseKey("a:b", "c"));
  EXPECT_EQ(LeaseKey("x", std::string("\0}{", 3)), std::string("fg:lease:{x:\0}{}", 16));
  EXPECT_EQ(ExpectedType(LeaseKey("a:b", "c")), "zset");
  EXPECT_EQ(ExpectedType(LeaseKey("control", "x")), "zset");
}

TEST(RedisLeaseVectorsTest, Standalone) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ManualClock clock(kT0);
  auto store = OpenStore(redis.url(), clock);
  ASSERT_NE(store.client, nullptr);
  int steps = 0;
  RunLeaseVectors(*store.rooms.leases, *store.client, &steps);
  EXPECT_GE(steps, 60);
  Peek peek(redis.port());
  EXPECT_EQ(peek.KeysWithoutTtl(), 0);
  EXPECT_GT(peek.Integer({"DBSIZE"}), 0);  // what the vectors left holds leases, with TTLs
}

TEST(RedisLeaseVectorsTest, Cluster) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start(3)) << cluster.error();
  ManualClock clock(kT0);
  auto store = OpenStore(cluster.url(), clock);
  ASSERT_NE(store.client, nullptr);
  int steps = 0;
  RunLeaseVectors(*store.rooms.leases, *store.client, &steps);
  EXPECT_GE(steps, 60);
  int with_keys = 0;
  for (size_t n = 0; n < cluster.size(); ++n) {
    Peek peek(cluster.server(n).port());
    EXPECT_EQ(peek.KeysWithoutTtl(), 0) << "node " << n;
    with_keys += peek.Integer({"DBSIZE"}) > 0 ? 1 : 0;
  }
  EXPECT_GE(with_keys, 2);  // the subjects really are spread over the masters
}

TEST(RedisLeaseVectorsTest, BehindTwemproxy) {
  testing::Nutcracker proxy;
  ASSERT_TRUE(proxy.Start(2)) << proxy.error();
  ManualClock clock(kT0);
  auto store = OpenStore(proxy.url(), clock);
  ASSERT_NE(store.client, nullptr);
  int steps = 0;
  RunLeaseVectors(*store.rooms.leases, *store.client, &steps);
  EXPECT_GE(steps, 60);
}

class RedisLeaseStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << redis_.error();
    store_ = OpenStore(redis_.url(), clock_);
    ASSERT_NE(store_.client, nullptr);
  }
  store::LeaseResult Run(const store::LeaseOp& op) {
    auto [s, r] = LeaseAndWait(*store_.rooms.leases, op);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }
  // The script called directly: its reply's five integers, or an error text.
  std::vector<int64_t> Eval(Peek& peek, const std::vector<std::string>& args,
                            std::string* error = nullptr) {
    std::vector<std::string> argv = {"EVAL", std::string(ScriptFor(Feature::kConcurrency).source),
                                     "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    redisReply* r = peek.Command(argv);
    std::vector<int64_t> out;
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        out.push_back(r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer
                                                                 : INT64_MIN);
      }
    } else if (r != nullptr && r->type == REDIS_REPLY_ERROR && error != nullptr) {
      *error = std::string(r->str, r->len);
    }
    if (r != nullptr) freeReplyObject(r);
    return out;
  }

  // Eval, then the key's PTTL and a stretch to ten minutes, all in one
  // MULTI/EXEC. The script sets the key's TTL from the vectors' instants,
  // which may leave it a millisecond of real time; run as one, nothing can
  // expire it between the script and the stretch, however slow the machine.
  std::vector<int64_t> EvalAndKeep(Peek& peek, const std::string& key,
                                   const std::vector<std::string>& args, int64_t* pttl,
                                   std::string* error) {
    std::vector<std::string> eval = {"EVAL", std::string(ScriptFor(Feature::kConcurrency).source),
                                     "1"};
    eval.insert(eval.end(), args.begin(), args.end());
    std::vector<int64_t> out;
    for (const std::vector<std::string>& argv :
         {std::vector<std::string>{"MULTI"}, eval, {"PTTL", key}, {"PEXPIRE", key, "600000"}}) {
      redisReply* queued = peek.Command(argv);
      const bool taken = queued != nullptr && queued->type == REDIS_REPLY_STATUS;
      if (queued != nullptr) freeReplyObject(queued);
      if (!taken) {
        *error = "the transaction refused " + argv[0];
        freeReplyObject(peek.Command({"DISCARD"}));
        return out;
      }
    }
    redisReply* r = peek.Command({"EXEC"});
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
      const redisReply* script = r->element[0];
      if (script->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < script->elements; ++i) {
          out.push_back(script->element[i]->type == REDIS_REPLY_INTEGER
                            ? script->element[i]->integer
                            : INT64_MIN);
        }
      } else if (script->type == REDIS_REPLY_ERROR) {
        *error = std::string(script->str, script->len);
      }
      if (r->element[1]->type == REDIS_REPLY_INTEGER) *pttl = r->element[1]->integer;
    } else {
      *error = "EXEC failed";
    }
    if (r != nullptr) freeReplyObject(r);
    return out;
  }

  ManualClock clock_{kT0};
  testing::RedisServer redis_;
  Opened store_;
};

// The script's reply on the vectors, `expired` included (LeaseStore::Lease
// does not report it).
TEST_F(RedisLeaseStoreTest, TheScriptsReplyMatchesTheVectorsFieldByField) {
  Peek peek(redis_.port());
  const auto cases = testing::LoadLeaseVectors();
  ASSERT_GE(cases.size(), 8u);
  int index = 0, expired = 0;
  for (const auto& lc : cases) {
    SCOPED_TRACE(lc.name);
    const std::string prefix = "case" + std::to_string(index++) + ":";
    for (size_t i = 0; i < lc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = lc.steps[i];
      const std::string key = LeaseKey("r", prefix + step.key);
      std::vector<std::string> args = {key};
      switch (step.kind) {
        case store::LeaseOpKind::kAcquire:
          args.insert(args.end(),
                      {"acquire", std::to_string(step.t_ms), step.lease,
                       std::to_string(step.ttl_ms), std::to_string(step.max_in_flight)});
          break;
        case store::LeaseOpKind::kRelease:
          args.insert(args.end(), {"release", std::to_string(step.t_ms), step.lease});
          break;
        case store::LeaseOpKind::kRenew:
          args.insert(args.end(), {"renew", std::to_string(step.t_ms), step.lease,
                                   std::to_string(step.ttl_ms)});
          break;
      }
      std::string error;
      int64_t pttl = INT64_MIN;
      const std::vector<int64_t> reply = EvalAndKeep(peek, key, args, &pttl, &error);
      ASSERT_EQ(reply.size(), 5u) << error;
      EXPECT_TRUE(reply[0] == 0 || reply[0] == 1);
      EXPECT_EQ(reply[3], step.t_ms);
      testing::ExpectLeaseMatches(step, reply[0] == 1, reply[1], reply[2], &reply[4]);
      if (step.expect.contains("expired")) ++expired;
      EXPECT_NE(pttl, -1) << key << " has no TTL";
      EXPECT_GE(pttl, -2);
    }
  }
  EXPECT_GE(expired, 20);
}

TEST_F(RedisLeaseStoreTest, TheKeyLivesExactlyAsLongAsItsLastLease) {
  Peek peek(redis_.port());
  const std::string key = LeaseKey("r", "s");
  const int64_t at = kT0;
  Run(Op(store::LeaseOpKind::kAcquire, "s", "a", 60'000, 3, &at));
  Run(Op(store::LeaseOpKind::kAcquire, "s", "b", 120'000, 3, &at));
  EXPECT_EQ(peek.Text({"TYPE", key}), "zset");
  int64_t ttl = peek.Pttl(key);
  EXPECT_GT(ttl, 119'000);
  EXPECT_LE(ttl, 120'000);
  // A refused acquisition writes no lease and keeps the TTL.
  const store::LeaseResult refused = Run(Op(store::LeaseOpKind::kAcquire, "s", "c", 1000, 2, &at));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.ms, 60'000);
  EXPECT_EQ(peek.Integer({"ZCARD", key}), 2);
  EXPECT_GT(peek.Pttl(key), 119'000);
  // The last lease goes: the key follows the one left.
  EXPECT_TRUE(Run(Op(store::LeaseOpKind::kRelease, "s", "b", 0, 0, &at)).ok);
  ttl = peek.Pttl(key);
  EXPECT_GT(ttl, 59'000);
  EXPECT_LE(ttl, 60'000);
  // A renewal to a shorter TTL shortens the key's.
  EXPECT_TRUE(Run(Op(store::LeaseOpKind::kRenew, "s", "a", 5000, 0, &at)).ok);
  EXPECT_LE(peek.Pttl(key), 5000);
  // Released to nothing: no key at all.
  const store::LeaseResult last = Run(Op(store::LeaseOpKind::kRelease, "s", "a", 0, 0, &at));
  EXPECT_TRUE(last.ok);
  EXPECT_EQ(last.in_flight, 0);
  EXPECT_EQ(peek.Integer({"EXISTS", key}), 0);
  // Releases and renewals of unknown subjects write nothing.
  EXPECT_FALSE(Run(Op(store::LeaseOpKind::kRelease, "t", "a", 0, 0, &at)).ok);
  EXPECT_FALSE(Run(Op(store::LeaseOpKind::kRenew, "t", "a", 1000, 0, &at)).ok);
  EXPECT_FALSE(Run(Op(store::LeaseOpKind::kAcquire, "t", "a", 1000, 0, &at)).ok);
  EXPECT_EQ(peek.Integer({"DBSIZE"}), 0);
}

TEST_F(RedisLeaseStoreTest, AKeyOfTheWrongTypeIsRefusedAndLeftAlone) {
  Peek peek(redis_.port());
  const std::string key = LeaseKey("r", "s");
  ASSERT_EQ(peek.Text({"SET", key, "someone else's"}), "OK");
  for (const store::LeaseOpKind kind :
       {store::LeaseOpKind::kAcquire, store::LeaseOpKind::kRelease, store::LeaseOpKind::kRenew}) {
    const auto [s, r] = LeaseAndWait(*store_.rooms.leases, Op(kind, "s", "a"));
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_EQ(s.message(), "redis: WRONGTYPE floodgate: the key holds a string, not a zset");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.in_flight, 0);
  }
  EXPECT_EQ(peek.Text({"GET", key}), "someone else's");
  EXPECT_EQ(peek.Pttl(key), -1);  // not even given a TTL
  EXPECT_EQ(peek.Integer({"DBSIZE"}), 1);
  EXPECT_EQ(store_.client->GetStats().wrong_type, 3u);
  EXPECT_EQ(store_.rooms.store->GetUsage().wrong_type, 3);
  EXPECT_EQ(store_.rooms.store->GetUsage().backend_errors, 3);
  // Other subjects are not concerned.
  EXPECT_TRUE(Run(Op(store::LeaseOpKind::kAcquire, "other", "a")).ok);
}

TEST_F(RedisLeaseStoreTest, BadScriptArgumentsAreRefusedBeforeAnyWrite) {
  Peek peek(redis_.port());
  const std::vector<std::vector<std::string>> bad = {
      {"fg:lease:{r:x}", "acquire", "", "a", "0", "3"},
      {"fg:lease:{r:x}", "acquire", "", "a", "1000", "-1"},
      {"fg:lease:{r:x}", "acquire", "", "a", "ten", "3"},
      {"fg:lease:{r:x}", "acquire", "", "a", "1000"},
      {"fg:lease:{r:x}", "renew", "", "a"},
      {"fg:lease:{r:x}", "renew", "", "a", "0"},
      {"fg:lease:{r:x}", "release", "", "a", "1000"},
      {"fg:lease:{r:x}", "steal", "", "a"},
      {"fg:lease:{r:x}", "acquire", "yesterday", "a", "1000", "3"},
  };
  for (const auto& args : bad) {
    std::string error;
    EXPECT_TRUE(Eval(peek, args, &error).empty());
    EXPECT_EQ(error, "ERR floodgate: bad concurrency arguments");
  }
  // Two keys are one too many.
  std::string error;
  redisReply* r = peek.Command({"EVAL", std::string(ScriptFor(Feature::kConcurrency).source), "2",
                                "fg:lease:{r:x}", "fg:lease:{r:y}", "release", "", "a"});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_ERROR);
  freeReplyObject(r);
  EXPECT_EQ(peek.Integer({"DBSIZE"}), 0);
}

// Many holders on one subject at once, on Redis's own clock: the script
// is atomic, so no more than max_in_flight are ever held. `holders` counts
// the threads between a granted acquisition and their release.
TEST_F(RedisLeaseStoreTest, ThreadsOnOneSubjectNeverHoldMoreThanMaxInFlight) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  constexpr int64_t kMax = 3;
  std::atomic<int> holders{0}, most{0}, granted{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = std::to_string(t) + ":" + std::to_string(i);
        auto [s, r] = LeaseAndWait(*store_.rooms.leases,
                                   Op(store::LeaseOpKind::kAcquire, "shared", id, 60'000, kMax));
        if (!s.ok()) {
          ++failed;
          continue;
        }
        if (!r.ok) continue;
        ++granted;
        const int holding = ++holders;
        int seen = most.load();
        while (holding > seen && !most.compare_exchange_weak(seen, holding)) {
        }
        EXPECT_LE(r.in_flight, kMax);
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // the work it guards
        --holders;
        auto [s2, r2] =
            LeaseAndWait(*store_.rooms.leases, Op(store::LeaseOpKind::kRelease, "shared", id));
        EXPECT_TRUE(s2.ok()) << s2.ToString();
        EXPECT_TRUE(r2.ok);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(most.load(), kMax);
  EXPECT_GT(granted.load(), 100);
  EXPECT_LT(granted.load(), kThreads * kPerThread);  // they did contend
  Peek peek(redis_.port());
  EXPECT_EQ(peek.Integer({"EXISTS", LeaseKey("r", "shared")}), 0);  // all released
}

// Real time on Redis's clock: a lease nobody releases frees its slot by its
// TTL, and Redis drops the key by itself.
TEST_F(RedisLeaseStoreTest, AnAbandonedLeaseFreesItsSlotOnRedisTime) {
  // Seconds, not ms: the second acquisition must come while the first lease
  // still holds, however loaded the machine.
  constexpr int64_t kTtl = 3000;
  Peek peek(redis_.port());
  const store::LeaseResult first = Run(Op(store::LeaseOpKind::kAcquire, "s", "a", kTtl, 1));
  ASSERT_TRUE(first.ok);
  const store::LeaseResult refused = Run(Op(store::LeaseOpKind::kAcquire, "s", "b", kTtl, 1));
  EXPECT_FALSE(refused.ok);
  EXPECT_GT(refused.ms, 0);
  EXPECT_LE(refused.ms, kTtl);
  EXPECT_GE(refused.now_ms, first.now_ms);
  const auto start = std::chrono::steady_clock::now();
  while (peek.Integer({"EXISTS", LeaseKey("r", "s")}) == 1) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const store::LeaseResult later = Run(Op(store::LeaseOpKind::kAcquire, "s", "b", kTtl, 1));
  EXPECT_TRUE(later.ok);
  EXPECT_GE(later.now_ms, first.now_ms + kTtl);
}

// The service describes every rule, a concurrency one too.
TEST_F(RedisLeaseStoreTest, DescribesAConcurrencyRule) {
  Rule jobs;
  jobs.name = "jobs";
  jobs.algorithm = Algorithm::kConcurrency;
  jobs.limits = {ConcurrencyLimit(2, 1000)};
  auto compiled = core::CompileRule(jobs, "", jobs.limits);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  auto tag = store_.rooms.store->Describe(*compiled, store::kFirstRuleId);
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  EXPECT_FALSE(tag->empty());
}

TEST_F(RedisLeaseStoreTest, AuditKnowsLeaseKeys) {
  Peek peek(redis_.port());
  const std::string url = "--redis " + redis_.url();
  const std::string node = "127.0.0.1:" + std::to_string(redis_.port());
  // Leases floodgate holds: every key with its TTL, nothing to report.
  Run(Op(store::LeaseOpKind::kAcquire, "s", "a", 60'000));
  testing::CliRun clean = testing::RunAudit(url);
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_EQ(clean.out, "");
  // A lease table without a TTL (written by hand, or by a broken client)
  // is reported and fixed; one of another type is reported and left alone.
  ASSERT_EQ(peek.Integer({"ZADD", LeaseKey("r", "planted"), "1", "x"}), 1);
  ASSERT_EQ(peek.Text({"SET", LeaseKey("r", "wrong"), "v", "EX", "600"}), "OK");
  testing::CliRun found = testing::RunAudit(url);
  EXPECT_EQ(found.exit_code, 1) << found.err;
  EXPECT_NE(found.out.find("no-ttl " + node + " fg:lease:{r:planted}\n"), std::string::npos)
      << found.out;
  EXPECT_NE(
      found.out.find("wrong-type " + node + " found=string expected=zset fg:lease:{r:wrong}\n"),
      std::string::npos)
      << found.out;
  testing::CliRun fixed = testing::RunAudit(url + " --fix --ttl 60");
  EXPECT_NE(fixed.err.find("1 given one"), std::string::npos) << fixed.err;
  EXPECT_GT(peek.Pttl(LeaseKey("r", "planted")), 0);
  EXPECT_EQ(peek.Text({"GET", LeaseKey("r", "wrong")}), "v");
}

}  // namespace
}  // namespace floodgate::redis
