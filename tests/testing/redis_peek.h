// A blocking hiredis connection for looking at what a test's redis-server
// holds directly, beside the client under test: raw commands, integers and
// texts, PTTLs, and every key without a TTL (the leak floodgate must never
// leave, seeds 002/004).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <vector>

namespace floodgate::testing {

class RedisPeek {
 public:
  explicit RedisPeek(int port) : c_(redisConnect("127.0.0.1", port)) {}
  ~RedisPeek() {
    if (c_ != nullptr) redisFree(c_);
  }
  RedisPeek(const RedisPeek&) = delete;
  RedisPeek& operator=(const RedisPeek&) = delete;

  // The reply, which the caller frees (freeReplyObject); null when the
  // connection failed.
  redisReply* Command(const std::vector<std::string>& argv) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  }
  // An integer reply, or INT64_MIN for any other.
  int64_t Integer(const std::vector<std::string>& argv) {
    redisReply* r = Command(argv);
    const int64_t v = r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : INT64_MIN;
    if (r != nullptr) freeReplyObject(r);
    return v;
  }
  // A status, string or error reply's text, or "".
  std::string Text(const std::vector<std::string>& argv) {
    redisReply* r = Command(argv);
    std::string t = r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "";
    if (r != nullptr) freeReplyObject(r);
    return t;
  }
  // An array reply's elements as text, or none.
  std::vector<std::string> Strings(const std::vector<std::string>& argv) {
    redisReply* r = Command(argv);
    std::vector<std::string> out;
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        out.emplace_back(r->element[i]->str, r->element[i]->len);
      }
    }
    if (r != nullptr) freeReplyObject(r);
    return out;
  }
  int64_t Pttl(const std::string& key) { return Integer({"PTTL", key}); }
  std::vector<std::string> Keys() { return Strings({"KEYS", "*"}); }
  // Keys without a TTL (PTTL -1), by SCAN. A key that expires between the
  // SCAN and its PTTL (-2) had one.
  int KeysWithoutTtl() {
    int missing = 0;
    std::string cursor = "0";
    do {
      redisReply* page = Command({"SCAN", cursor, "COUNT", "1000"});
      if (page == nullptr || page->type != REDIS_REPLY_ARRAY || page->elements != 2) {
        if (page != nullptr) freeReplyObject(page);
        return -1;  // no answer: never taken for "none"
      }
      cursor = std::string(page->element[0]->str, page->element[0]->len);
      for (size_t i = 0; i < page->element[1]->elements; ++i) {
        const redisReply* key = page->element[1]->element[i];
        if (Pttl(std::string(key->str, key->len)) == -1) ++missing;
      }
      freeReplyObject(page);
    } while (cursor != "0");
    return missing;
  }

 private:
  redisContext* c_;
};

}  // namespace floodgate::testing
