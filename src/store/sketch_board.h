// SketchBoard: the servers sharing a store publish their top-subjects
// sketches here, each under its own name with a lifetime, so that
// GET /v1/admin/top can merge every live server's (docs/visibility.md).
// The Redis store keeps it in Redis (redis/redis_sketch_board.h); the embedded
// store has none: its state is this process's alone, there is nobody to
// share with.
//
// Opened when the visibility starts (server::Visibility), not with
// the store: hence an opener (store/rooms.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/status.h"

namespace floodgate::store {

// Thread-safe; blocking (never on a thread that runs the store's I/O).
class SketchBoard {
 public:
  virtual ~SketchBoard() = default;
  // Leaves `blob` as `server`'s, replacing its last, for `ttl_ms`.
  virtual Status Publish(std::string_view server, std::string_view blob, int64_t ttl_ms) = 0;
  // Every server's blob that has not expired, as (server, blob) pairs.
  virtual Result<std::vector<std::pair<std::string, std::string>>> Read() = 0;
};

using SketchBoardOpener = std::function<std::unique_ptr<SketchBoard>()>;

}  // namespace floodgate::store
