// RedisSketchBoard: store::SketchBoard on Redis, one top_board.lua call per
// operation (src/redis/scripts/top_board.lua): the sorted set
// `fg:{top}:servers` names the servers by when their sketches expire, the
// hash `fg:{top}:blobs` holds them; one hash tag, so each call is one
// atomic step on one node, even on a Cluster or behind Twemproxy. Both keys
// always have a TTL.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "redis/client.h"
#include "store/sketch_board.h"

namespace floodgate::redis {

// Thread-safe (the Client is); blocking.
class RedisSketchBoard final : public store::SketchBoard {
 public:
  static constexpr std::string_view kServersKey = "fg:{top}:servers";
  static constexpr std::string_view kBlobsKey = "fg:{top}:blobs";
  // Servers read at most.
  static constexpr int kMaxServers = 256;

  RedisSketchBoard(Client& client, const Clock& clock) : client_(client), clock_(clock) {}

  // Lifetimes are on this server's clock (servers' clocks are assumed to
  // agree to well within a lifetime; Redis's need not).
  Status Publish(std::string_view server, std::string_view blob, int64_t ttl_ms) override;
  Result<std::vector<std::pair<std::string, std::string>>> Read() override;

 private:
  Client& client_;
  const Clock& clock_;
};

}  // namespace floodgate::redis
