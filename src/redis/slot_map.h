// Redis Cluster routing: the hash slot of a key (CRC16 of its hash tag) and
// the map from slots to masters, read from a CLUSTER SLOTS reply.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/store_url.h"
#include "floodgate/status.h"

namespace floodgate::redis {

inline constexpr int kSlotCount = 16384;

// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
uint16_t Crc16(std::string_view data);

// The slot of `key`: CRC16 of its hash tag (the bytes between the first '{'
// and the next '}', when that is not empty) or of the whole key, mod 16384.
int KeySlot(std::string_view key);

// Which master serves each slot. Immutable once built; thread-compatible.
class SlotMap {
 public:
  SlotMap();

  // Builds the map from a CLUSTER SLOTS reply received from `queried`
  // (whose host stands in for a master announced with an empty or "?"
  // address). Errors (UNAVAILABLE) describe a malformed or error reply.
  static Result<SlotMap> FromClusterSlots(const redisReply* reply, const HostPort& queried);

  // The index into nodes() of the master serving `slot`, or -1 when none
  // does (the cluster is not fully covered).
  int NodeOf(int slot) const { return slot_node_[slot]; }

  // The masters' ids ("host:port"), each once.
  const std::vector<std::string>& nodes() const { return nodes_; }

  // Slots with a master.
  int covered_slots() const { return covered_; }

 private:
  std::vector<std::string> nodes_;
  std::vector<int16_t> slot_node_;
  int covered_ = 0;
};

}  // namespace floodgate::redis
