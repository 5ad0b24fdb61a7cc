// The expiring sets' requests and replies (floodgate/expiring_sets.h), as
// values: what every store's sets take and give.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate {

// Members are opaque byte strings up to this length (keys: kMaxKeyBytes).
inline constexpr size_t kMaxSetMemberBytes = 512;

struct SetMember {
  std::string member;
  // When it expires, in ms since the epoch on the store's clock (Redis's
  // own TIME on the Redis store).
  int64_t expires_at_ms = 0;

  friend bool operator==(const SetMember&, const SetMember&) = default;
};

enum class SetOp { kAdd, kRemove, kContains, kCount, kMembers };

// One operation. `member` for kAdd, kRemove and kContains; `ttl_ms` for kAdd.
struct SetRequest {
  SetOp op = SetOp::kCount;
  std::string_view key;
  std::string_view member;
  int64_t ttl_ms = 0;
};

// An operation's answer.
struct SetReply {
  int64_t now_ms = 0;  // the instant the store acted at (its clock)
  // kAdd: 1 for a new member, 0 for a refreshed one. kRemove: 1 if the
  // member was there. kContains: 1 if it is. kCount: live members. kMembers:
  // how many are listed.
  int64_t value = 0;
  std::vector<SetMember> members;  // kMembers: earliest expiry first, ties in byte order
};

}  // namespace floodgate
