// Keys of the wrong type (redis/wrong_type.h): the errors the scripts and
// Redis give for them, the type floodgate keeps at each of its names, and
// the log that tells of each key once per interval with bounded memory, on
// instants given by the test.
#include "redis/wrong_type.h"

#include <gtest/gtest.h>

#include <string>

#include "redis/alert_stream.h"
#include "redis/control_store.h"
#include "redis/lease_store.h"
#include "redis/otp_store.h"
#include "redis/script_call.h"
#include "redis/set_store.h"

namespace floodgate::redis {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(WrongTypeTest, TheScriptsErrorsNameTheTypes) {
  WrongType what;
  ASSERT_TRUE(
      ParseWrongType("redis: WRONGTYPE floodgate: the key holds a list, not a string", &what));
  EXPECT_EQ(what.found, "list");
  EXPECT_EQ(what.expected, "string");
  EXPECT_EQ(what.key_index, 0);
  ASSERT_TRUE(ParseWrongType("WRONGTYPE floodgate: KEYS[2] holds a hash, not a zset", &what));
  EXPECT_EQ(what.found, "hash");
  EXPECT_EQ(what.expected, "zset");
  EXPECT_EQ(what.key_index, 2);
}

TEST(WrongTypeTest, RedissOwnErrorIsOneTooWithoutTypes) {
  WrongType what;
  ASSERT_TRUE(ParseWrongType(
      "redis: WRONGTYPE Operation against a key holding the wrong kind of value", &what));
  EXPECT_EQ(what.found, "");
  EXPECT_EQ(what.expected, "");
  EXPECT_TRUE(ParseWrongType("WRONGTYPE floodgate: the key holds", &what));  // cut short
  EXPECT_EQ(what.found, "");
}

TEST(WrongTypeTest, OtherErrorsAreNot) {
  EXPECT_FALSE(ParseWrongType("no reply from redis 127.0.0.1:6379 within 20 ms"));
  EXPECT_FALSE(ParseWrongType("redis: ERR floodgate: bad fixed_window arguments"));
  EXPECT_FALSE(ParseWrongType(""));
}

TEST(WrongTypeTest, TheTypeFloodgateKeepsAtEachOfItsNames) {
  EXPECT_EQ(ExpectedType(StateKey("api", "", "alice")), "string");
  EXPECT_EQ(ExpectedType(StateKey("api", "pro", "alice")), "string");
  EXPECT_EQ(ExpectedType(StateKey("a:b", "", "x}y")), "string");
  EXPECT_EQ(ExpectedType(ThrottleKey("alice")), "string");
  EXPECT_EQ(ExpectedType(SetKey("phones")), "zset");
  EXPECT_EQ(ExpectedType(LeaseKey("api", "alice")), "zset");
  EXPECT_EQ(ExpectedType(LeaseKey("a:b", "x}y")), "zset");
  EXPECT_EQ(ExpectedType(StateKey("lease", "", "x")), "string");  // fg:{lease:x}
  for (const std::string& key : OtpKeys("+15550100")) EXPECT_EQ(ExpectedType(key), "zset");
  EXPECT_EQ(ExpectedType(AlertStream::kKey), "stream");
  EXPECT_EQ(ExpectedType(RedisControlStore::kOverridesKey), "hash");
  EXPECT_EQ(ExpectedType(RedisControlStore::kBlocksKey), "hash");
  EXPECT_EQ(ExpectedType(RedisControlStore::kRulesKey), "hash");
  EXPECT_EQ(ExpectedType(RedisControlStore::kVersionKey), "string");
  EXPECT_EQ(ExpectedType(RedisControlStore::kLogKey), "list");
  EXPECT_EQ(ExpectedType("fg:{control}:other"), "");
  EXPECT_EQ(ExpectedType(StateKey("control", "log", "x")), "string");  // fg:{control:x}:log
  EXPECT_EQ(ExpectedType("fg:otp:{x}:other"), "");
  EXPECT_EQ(ExpectedType("fg:mine"), "");
  EXPECT_EQ(ExpectedType("ratelimit:alice"), "");
}

TEST(WrongTypeLogTest, EachKeyIsLoggedOncePerIntervalAndEveryFailureCounted) {
  WrongTypeLog log(60 * kSecond, 10);
  const WrongType list{"list", "string", 0};
  const int64_t t = 1000 * kSecond;
  EXPECT_TRUE(log.Report("fg:{api:a}", list, t));
  EXPECT_FALSE(log.Report("fg:{api:a}", list, t + 1));
  EXPECT_TRUE(log.Report("fg:{api:b}", list, t + 2));
  EXPECT_FALSE(log.Report("fg:{api:a}", list, t + 60 * kSecond - 1));  // 59.999... s later
  EXPECT_TRUE(log.Report("fg:{api:a}", list, t + 60 * kSecond));       // 60 s later
  EXPECT_EQ(log.count(), 5u);
}

TEST(WrongTypeLogTest, ManyKeysAreRememberedUpToTheBoundThenSummedUp) {
  WrongTypeLog log(60 * kSecond, 3);
  const WrongType hash{"hash", "zset", 0};
  const int64_t t = 1000 * kSecond;
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(log.Report("fg:set:{" + std::to_string(i) + "}", hash, t));
  // A fourth key is counted, not logged by itself (the summary line is).
  EXPECT_FALSE(log.Report("fg:set:{3}", hash, t));
  EXPECT_FALSE(log.Report("fg:set:{4}", hash, t + kSecond));
  EXPECT_EQ(log.tracked(), 3u);
  EXPECT_EQ(log.count(), 5u);
  // An interval on, the old keys are forgotten and new ones fit again.
  EXPECT_TRUE(log.Report("fg:set:{4}", hash, t + 61 * kSecond));
  EXPECT_EQ(log.tracked(), 1u);
  // However many keys come, memory stays bounded.
  for (int i = 0; i < 10000; ++i)
    log.Report("fg:{r:" + std::to_string(i) + "}", hash, t + 62 * kSecond);
  EXPECT_EQ(log.tracked(), 3u);
  EXPECT_EQ(log.count(), 10006u);
}

}  // namespace
}  // namespace floodgate::redis
