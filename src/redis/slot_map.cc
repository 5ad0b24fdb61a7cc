// CRC16 key slots and the CLUSTER SLOTS reply decoder. See slot_map.h.
#include "redis/slot_map.h"

#include <array>

namespace floodgate::redis {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

Status SlotsError(std::string what) {
  return UnavailableError("bad CLUSTER SLOTS reply: " + std::move(what));
}

bool IsString(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

}  // namespace

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

int KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kSlotCount - 1);
}

SlotMap::SlotMap() : slot_node_(kSlotCount, -1) {}

Result<SlotMap> SlotMap::FromClusterSlots(const redisReply* reply, const HostPort& queried) {
  if (reply == nullptr) return SlotsError("no reply");
  if (reply->type == REDIS_REPLY_ERROR) {
    return UnavailableError("CLUSTER SLOTS failed on " + queried.ToString() + ": " +
                            std::string(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_ARRAY) return SlotsError("not an array");
  SlotMap map;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    // [start, end, [host, port, id, ...], replicas...]
    if (range == nullptr || range->type != REDIS_REPLY_ARRAY || range->elements < 3) {
      return SlotsError("a slot range is not [start, end, master, ...]");
    }
    const redisReply* start = range->element[0];
    const redisReply* end = range->element[1];
    const redisReply* master = range->element[2];
    if (start == nullptr || end == nullptr || start->type != REDIS_REPLY_INTEGER ||
        end->type != REDIS_REPLY_INTEGER || start->integer < 0 || end->integer >= kSlotCount ||
        start->integer > end->integer) {
      return SlotsError("bad slot range");
    }
    if (master == nullptr || master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        !IsString(master->element[0]) || master->element[1] == nullptr ||
        master->element[1]->type != REDIS_REPLY_INTEGER) {
      return SlotsError("bad master address");
    }
    HostPort hp;
    hp.host.assign(master->element[0]->str, master->element[0]->len);
    // An empty or "?" address means "the node you asked" (Redis announces
    // no address for itself until it has seen one).
    if (hp.host.empty() || hp.host == "?") hp.host = queried.host;
    const long long port = master->element[1]->integer;
    if (port < 1 || port > 65535) return SlotsError("bad master port");
    hp.port = static_cast<int>(port);
    const std::string id = hp.ToString();
    int index = -1;
    for (size_t n = 0; n < map.nodes_.size(); ++n) {
      if (map.nodes_[n] == id) index = static_cast<int>(n);
    }
    if (index < 0) {
      if (map.nodes_.size() >= static_cast<size_t>(kSlotCount)) return SlotsError("too many nodes");
      index = static_cast<int>(map.nodes_.size());
      map.nodes_.push_back(id);
    }
    for (long long s = start->integer; s <= end->integer; ++s) {
      if (map.slot_node_[s] < 0) ++map.covered_;
      map.slot_node_[s] = static_cast<int16_t>(index);
    }
  }
  return map;
}

}  // namespace floodgate::redis
