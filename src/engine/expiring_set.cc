// ExpiringSet: two indexes over the same members, by member (lookups) and
// by expiry (pruning and ordering), so that every operation is logarithmic
// in the set's size and pruning costs only the members it drops.
#include "engine/expiring_set.h"

#include <iterator>
#include <memory>

#include "common/fixed_fields.h"
#include "core/memory_room.h"

namespace floodgate::engine {

size_t ExpiringSet::MemberBytes(std::string_view member) {
  // A red-black tree node in each index (libstdc++: colour and three links,
  // 32 bytes, then the value), plus the member's own buffer when it does not
  // fit the string's inline storage (15 bytes; a copy of `member` allocates
  // its size and a terminator).
  constexpr size_t kNodeHeader = 4 * sizeof(void*);
  constexpr size_t kNodes =
      core::MallocChunkSize(kNodeHeader + sizeof(Members::value_type)) +
      core::MallocChunkSize(kNodeHeader + sizeof(std::pair<int64_t, const std::string*>));
  constexpr size_t kInline = 15;
  return kNodes + (member.size() > kInline ? core::MallocChunkSize(member.size() + 1) : 0);
}

const size_t ExpiringSet::kObjectBytes = core::MallocChunkSize(sizeof(ExpiringSet));

size_t ExpiringSet::Prune(int64_t now_ms) {
  size_t dropped = 0;
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now_ms) {
    const std::string* member = by_expiry_.begin()->second;
    bytes_ -= MemberBytes(*member);
    by_expiry_.erase(by_expiry_.begin());
    members_.erase(members_.find(*member));
    ++dropped;
  }
  return dropped;
}

bool ExpiringSet::Upsert(std::string_view member, int64_t expires_at_ms) {
  auto it = members_.find(member);
  if (it != members_.end()) {
    if (it->second == expires_at_ms) return false;
    by_expiry_.erase({it->second, &it->first});
    it->second = expires_at_ms;
    by_expiry_.insert({expires_at_ms, &it->first});
    return false;
  }
  it = members_.emplace(std::string(member), expires_at_ms).first;
  by_expiry_.insert({expires_at_ms, &it->first});
  bytes_ += MemberBytes(member);
  return true;
}

bool ExpiringSet::Erase(std::string_view member) {
  auto it = members_.find(member);
  if (it == members_.end()) return false;
  bytes_ -= MemberBytes(member);
  by_expiry_.erase({it->second, &it->first});
  members_.erase(it);
  return true;
}

int64_t ExpiringSet::ExpiryOf(std::string_view member) const {
  auto it = members_.find(member);
  return it == members_.end() ? 0 : it->second;
}

void ExpiringSet::Clear() {
  by_expiry_.clear();
  members_.clear();
  bytes_ = 0;
}

int64_t ExpiringSet::LastExpiry() const {
  return by_expiry_.empty() ? 0 : std::prev(by_expiry_.end())->first;
}

int64_t ExpiringSet::NthExpiry(size_t index) const {
  if (index >= by_expiry_.size()) return 0;
  // Sets hold at most a configured cap of members; a walk is fine here
  // (retry-after of a limit at its count, once per refused request).
  return std::next(by_expiry_.begin(), static_cast<std::ptrdiff_t>(index))->first;
}

void ExpiringSet::EraseFirst() {
  if (by_expiry_.empty()) return;
  const std::string member = *by_expiry_.begin()->second;
  Erase(member);
}

void ExpiringSet::ForEach(
    absl::FunctionRef<void(std::string_view member, int64_t expires_at_ms)> fn) const {
  for (const auto& [expiry, member] : by_expiry_) fn(*member, expiry);
}

void ExpiringSet::Encode(std::string* out) const {
  fixed::Put<uint32_t>(out, static_cast<uint32_t>(members_.size()));
  ForEach([&](std::string_view member, int64_t expires_at_ms) {
    fixed::Put<uint32_t>(out, static_cast<uint32_t>(member.size()));
    out->append(member);
    fixed::Put<int64_t>(out, expires_at_ms);
  });
}

bool ExpiringSet::Decode(std::string_view* in, int64_t now_ms) {
  uint32_t n = 0;
  if (!empty() || !fixed::Get(in, &n)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    std::string_view member;
    int64_t expires_at_ms = 0;
    if (!fixed::Get(in, &len) || !fixed::Bytes(in, len, &member) ||
        !fixed::Get(in, &expires_at_ms)) {
      return false;
    }
    if (expires_at_ms > now_ms) Upsert(member, expires_at_ms);
  }
  return true;
}

void EncodeSetWord(const int64_t* state, int /*words*/, std::string* out) {
  const auto* set = reinterpret_cast<const ExpiringSet*>(state[0]);
  if (set == nullptr) {
    ExpiringSet().Encode(out);
  } else {
    set->Encode(out);
  }
}

size_t SetWordBytes(const int64_t* state) {
  const auto* set = reinterpret_cast<const ExpiringSet*>(state[0]);
  return set != nullptr ? ExpiringSet::kObjectBytes + set->HeapBytes() : 0;
}

bool DecodeSetWord(std::string_view in, int words, int64_t now_ms, int64_t* state) {
  if (words != 1) return false;
  auto set = std::make_unique<ExpiringSet>();
  if (!set->Decode(&in, now_ms) || !in.empty()) return false;
  if (!set->empty()) state[0] = reinterpret_cast<int64_t>(set.release());
  return true;
}

}  // namespace floodgate::engine
