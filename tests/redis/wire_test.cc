// The client's RESP pieces without a server: command encoding, the bounded
// reply reader on well-formed, split, hostile and random input, reply
// copies; key slots and CLUSTER SLOTS decoding; the circuit breaker's states.
#include "redis/wire.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "redis/circuit_breaker.h"
#include "redis/slot_map.h"

namespace floodgate::redis {
namespace {

// Feeds `bytes` to a fresh reader and returns every complete reply; sets
// *error when the reader refused the input.
std::vector<OwnedReply> ReadAll(std::string_view bytes, bool* error, size_t chunk = 0) {
  ReaderPtr reader = NewReplyReader();
  std::vector<OwnedReply> out;
  *error = false;
  if (chunk == 0) chunk = bytes.size() == 0 ? 1 : bytes.size();
  for (size_t pos = 0; pos < bytes.size(); pos += chunk) {
    const std::string_view part = bytes.substr(pos, chunk);
    if (redisReaderFeed(reader.get(), part.data(), part.size()) != REDIS_OK) {
      *error = true;
      return out;
    }
    while (true) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) {
        *error = true;
        return out;
      }
      if (raw == nullptr) break;
      out.emplace_back(static_cast<redisReply*>(raw));
    }
  }
  return out;
}

TEST(WireTest, EncodesCommandsAsBulkArrays) {
  std::string out;
  const std::string_view args[] = {"SET", "k", std::string_view("a\0\r\nb", 5)};
  AppendCommand(out, args);
  EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\0\r\nb\r\n", 31));
  const std::vector<std::string> more = {"PING", ""};
  AppendCommand(out, more);
  EXPECT_EQ(out.substr(31), "*2\r\n$4\r\nPING\r\n$0\r\n\r\n");
}

TEST(WireTest, ReadsEveryReplyTypeSplitAnywhere) {
  const std::string bytes =
      "+OK\r\n-ERR bad\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n*-1\r\n*0\r\n"
      "*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+x\r\n";
  for (size_t chunk : {size_t{0}, size_t{1}, size_t{2}, size_t{7}}) {
    bool error = false;
    std::vector<OwnedReply> replies = ReadAll(bytes, &error, chunk);
    ASSERT_FALSE(error) << chunk;
    ASSERT_EQ(replies.size(), 8u) << chunk;
    EXPECT_EQ(DescribeReply(replies[0].get()), "OK");
    EXPECT_EQ(DescribeReply(replies[1].get()), "(error) ERR bad");
    EXPECT_EQ(replies[2]->integer, -42);
    EXPECT_EQ(std::string(replies[3]->str, replies[3]->len), "he\r\no");
    EXPECT_EQ(replies[4]->type, REDIS_REPLY_NIL);
    EXPECT_EQ(replies[5]->type, REDIS_REPLY_NIL);
    EXPECT_EQ(replies[6]->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(replies[6]->elements, 0u);
    EXPECT_EQ(DescribeReply(replies[7].get()), "[(integer) 1, [\"a\", (nil)], x]");
  }
}

TEST(WireTest, HostileHeadersAreErrorsNotCrashes) {
  // Each would make hiredis 0.14's own allocator abort() or read out of
  // bounds; the bounded reader refuses them.
  for (const std::string bytes :
       {"*2147483647\r\n", "*4294967295\r\n:1\r\n", "*-5\r\n", "*99999999999999999999\r\n",
        "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "$-7\r\n", "?what\r\n",
        ":12x\r\n", "*4194305\r\n"}) {
    bool error = false;
    std::vector<OwnedReply> replies = ReadAll(bytes, &error);
    EXPECT_TRUE(error || replies.empty()) << bytes;
  }
  // The largest array allowed is accepted (its elements then follow).
  bool error = false;
  ReadAll("*" + std::to_string(kMaxReplyElements) + "\r\n", &error);
  EXPECT_FALSE(error);
}

TEST(WireTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  const std::string alphabet = "*$:+-\r\n0123456789-1abc";
  for (int round = 0; round < 3000; ++round) {
    std::string bytes;
    const int len = 1 + static_cast<int>(rng() % 64);
    for (int i = 0; i < len; ++i) bytes += alphabet[rng() % alphabet.size()];
    bool error = false;
    std::vector<OwnedReply> replies = ReadAll(bytes, &error, 1 + rng() % 8);
    for (const OwnedReply& r : replies) {
      OwnedReply copy = CopyReply(*r);
      ASSERT_NE(copy, nullptr);
      EXPECT_EQ(DescribeReply(copy.get()), DescribeReply(r.get()));
    }
  }
}

TEST(WireTest, CopiesAndErrorPrefixes) {
  bool error = false;
  std::vector<OwnedReply> replies =
      ReadAll("*2\r\n$3\r\nabc\r\n:5\r\n-MOVED 3999 127.0.0.1:6381\r\n-ASKING x\r\n", &error);
  ASSERT_EQ(replies.size(), 3u);
  OwnedReply copy = CopyReply(*replies[0]);
  replies[0].reset();
  EXPECT_EQ(DescribeReply(copy.get()), "[\"abc\", (integer) 5]");
  EXPECT_TRUE(IsErrorWithPrefix(replies[1].get(), "MOVED"));
  EXPECT_FALSE(IsErrorWithPrefix(replies[1].get(), "MOVE"));
  EXPECT_FALSE(IsErrorWithPrefix(replies[2].get(), "ASK"));
  EXPECT_FALSE(IsErrorWithPrefix(copy.get(), "abc"));
}

TEST(SlotMapTest, KeySlotsAsRedisComputesThem) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the CRC16-XMODEM check value
  // Values from CLUSTER KEYSLOT on a real cluster (the client test checks more).
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot(""), 0);
  // Hash tags: the first {...} with something inside.
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16("foo{}{bar}") & 16383);
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("fg:{api:user:42}"), KeySlot("api:user:42"));
  EXPECT_EQ(KeySlot("{"), Crc16("{") & 16383);
}

TEST(SlotMapTest, DecodesClusterSlots) {
  bool error = false;
  // Two ranges on one master (one announced with an empty host), one on another.
  const std::string bytes =
      "*3\r\n"
      "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
      "*4\r\n:5461\r\n:10922\r\n*2\r\n$0\r\n\r\n:7001\r\n*2\r\n$9\r\n127.0.0.1\r\n:7003\r\n"
      "*3\r\n:10923\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n";
  std::vector<OwnedReply> replies = ReadAll(bytes, &error);
  ASSERT_FALSE(error);
  ASSERT_EQ(replies.size(), 1u);
  Result<SlotMap> map = SlotMap::FromClusterSlots(replies[0].get(), HostPort{"10.9.9.9", 7001});
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->nodes(), (std::vector<std::string>{"127.0.0.1:7000", "10.9.9.9:7001"}));
  EXPECT_EQ(map->covered_slots(), 16384);
  EXPECT_EQ(map->NodeOf(0), 0);
  EXPECT_EQ(map->NodeOf(5460), 0);
  EXPECT_EQ(map->NodeOf(5461), 1);
  EXPECT_EQ(map->NodeOf(10922), 1);
  EXPECT_EQ(map->NodeOf(16383), 0);

  // A partial map leaves slots unserved.
  replies = ReadAll("*1\r\n*3\r\n:0\r\n:9\r\n*2\r\n$1\r\nh\r\n:1\r\n", &error);
  map = SlotMap::FromClusterSlots(replies[0].get(), HostPort{"q", 1});
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->covered_slots(), 10);
  EXPECT_EQ(map->NodeOf(10), -1);
}

TEST(SlotMapTest, RefusesMalformedReplies) {
  const std::vector<std::string> bad = {
      "-ERR This instance has cluster support disabled\r\n",
      ":1\r\n",
      "*1\r\n:1\r\n",
      "*1\r\n*2\r\n:0\r\n:1\r\n",
      "*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n",      // start > end
      "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",  // past the last slot
      "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",      // port 0
      "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\nh\r\n",            // no port
      "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",           // host not a string
  };
  for (const std::string& bytes : bad) {
    bool error = false;
    std::vector<OwnedReply> replies = ReadAll(bytes, &error);
    ASSERT_EQ(replies.size(), 1u) << bytes;
    Result<SlotMap> map = SlotMap::FromClusterSlots(replies[0].get(), HostPort{"q", 1});
    EXPECT_FALSE(map.ok()) << bytes;
    EXPECT_EQ(map.status().code(), StatusCode::kUnavailable);
  }
  EXPECT_FALSE(SlotMap::FromClusterSlots(nullptr, HostPort{"q", 1}).ok());
}

TEST(CircuitBreakerTest, OpensAfterConsecutiveFailuresAndOneProbeDecides) {
  std::atomic<int64_t> gauge{0};
  std::atomic<uint64_t> opens{0};
  CircuitBreaker b(3, /*open_ns=*/100, &gauge, &opens);
  EXPECT_TRUE(b.Allow());
  EXPECT_FALSE(b.RecordFailure(0));
  EXPECT_FALSE(b.RecordFailure(1));
  b.RecordSuccess();  // not consecutive any more
  EXPECT_FALSE(b.RecordFailure(2));
  EXPECT_FALSE(b.RecordFailure(3));
  EXPECT_TRUE(b.Allow());
  EXPECT_TRUE(b.RecordFailure(10));  // the third in a row
  EXPECT_FALSE(b.Allow());
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(gauge.load(), 1);
  EXPECT_EQ(opens.load(), 1u);

  // Late successes do not close it; more failures do not reopen it.
  b.RecordSuccess();
  EXPECT_FALSE(b.RecordFailure(20));
  EXPECT_FALSE(b.Allow());

  // The open period: 100 ns from 10.
  EXPECT_FALSE(b.TryStartProbe(109));
  EXPECT_TRUE(b.TryStartProbe(110));
  EXPECT_FALSE(b.TryStartProbe(110));  // one probe at a time
  EXPECT_EQ(b.state(), CircuitBreaker::State::kHalfOpen);
  EXPECT_FALSE(b.Allow());
  b.ProbeFailed(150);
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_FALSE(b.TryStartProbe(249));
  EXPECT_TRUE(b.TryStartProbe(250));
  EXPECT_TRUE(b.ProbeSucceeded());
  EXPECT_TRUE(b.Allow());
  EXPECT_EQ(gauge.load(), 0);
  EXPECT_EQ(opens.load(), 1u);
  EXPECT_FALSE(b.ProbeSucceeded());  // nothing to close

  // Counting starts again from zero.
  EXPECT_FALSE(b.RecordFailure(300));
  EXPECT_FALSE(b.RecordFailure(301));
  EXPECT_TRUE(b.RecordFailure(302));
  EXPECT_EQ(opens.load(), 2u);
}

TEST(CircuitBreakerTest, GaugeReleasedWhenDestroyedOpen) {
  std::atomic<int64_t> gauge{0};
  {
    CircuitBreaker b(1, 100, &gauge, nullptr);
    EXPECT_TRUE(b.RecordFailure(0));
    EXPECT_EQ(gauge.load(), 1);
  }
  EXPECT_EQ(gauge.load(), 0);
}

}  // namespace
}  // namespace floodgate::redis
