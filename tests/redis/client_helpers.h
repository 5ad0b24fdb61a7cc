// Helpers for the Redis client tests: clients on a URL, waiting for
// callbacks and conditions, reading a server's INFO fields.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "redis/client.h"
#include "testing/eventually.h"
#include "testing/redis_cluster.h"

namespace floodgate::redis::client_testing {

// Generous by default: functional tests must pass under TSan on a busy
// machine; the failure tests set the production 20 ms themselves.
inline ClientOptions OptionsFor(const std::string& url, int64_t timeout_ms = 3000) {
  Result<StoreUrl> parsed = ParseStoreUrl(url);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  ClientOptions options;
  if (parsed.ok()) options.url = *parsed;
  options.timeout_ms = timeout_ms;
  options.connect_timeout_ms = 3000;
  return options;
}

inline std::unique_ptr<Client> MakeClient(const ClientOptions& options) {
  Result<std::unique_ptr<Client>> client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

using floodgate::testing::Eventually;

// Counts callbacks down to zero.
class Latch {
 public:
  explicit Latch(int64_t count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ <= 0; });
  }
  int64_t remaining() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t count_;
};

// An integer field of `INFO section` from the server at `port` ("" -> -1).
inline int64_t InfoField(int port, const std::string& section, const std::string& field) {
  const std::string info = floodgate::testing::QueryText(port, {"INFO", section});
  const size_t at = info.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(info.substr(at + field.size() + 1));
}

// The text of a reply for assertions ("PONG", "(error) ...", "(integer) 3").
inline std::string Text(const Result<OwnedReply>& r) {
  if (!r.ok()) return "status " + r.status().ToString();
  return DescribeReply(r->get());
}

}  // namespace floodgate::redis::client_testing
