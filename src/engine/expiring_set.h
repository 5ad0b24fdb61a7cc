// ExpiringSet: a set of byte-string members, each with its own expiry: the
// embedded store's form of an expiring set (and of the OTP state's codes and
// event logs). Pure: every call takes the instant it acts at; nothing reads
// a clock.
//
// A member with expiry T is live while now < T: added at t with a TTL of
// 1000 ms, it is there at t + 999 and gone at t + 1000. Members are kept in
// the order Redis keeps a sorted set scored by expiry (expiry, then bytes),
// so both stores list a set the same way.
//
// Warning: not thread-safe. The store runs it under a shard lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/functional/function_ref.h"

namespace floodgate::engine {

class ExpiringSet;

// VariantLayout's encode and decode for a state whose one word owns an
// ExpiringSet (an expiring set, a lease table): the set's members; a state
// whose set is gone by now_ms decodes to an empty word.
void EncodeSetWord(const int64_t* state, int words, std::string* out);
bool DecodeSetWord(std::string_view in, int words, int64_t now_ms, int64_t* state);
// VariantLayout's owned_bytes for such a state: the set and its members.
size_t SetWordBytes(const int64_t* state);

class ExpiringSet {
 public:
  // Drops every member whose expiry is <= now_ms. Returns how many.
  size_t Prune(int64_t now_ms);

  // Adds `member`, or moves its expiry to `expires_at_ms` (earlier or later).
  // Returns true when the member was not there.
  bool Upsert(std::string_view member, int64_t expires_at_ms);

  // Removes `member`. Returns whether it was there.
  bool Erase(std::string_view member);

  // The member's expiry, or 0 when it is not in the set. Prune first: an
  // expired member stays until then.
  int64_t ExpiryOf(std::string_view member) const;

  size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  void Clear();

  // The latest expiry of any member (when the whole set is gone), or 0 when
  // empty.
  int64_t LastExpiry() const;
  // The `index`-th earliest expiry (0: the earliest), or 0 past the end.
  int64_t NthExpiry(size_t index) const;
  // Removes the member that expires first. No-op when empty.
  void EraseFirst();

  // Calls fn(member, expires_at_ms) for every member, earliest expiry first
  // (ties in byte order).
  void ForEach(absl::FunctionRef<void(std::string_view member, int64_t expires_at_ms)> fn) const;

  // Heap bytes the members hold, as core::MallocChunkSize counts them (a
  // node in each index, and a long member's own buffer): what the set's
  // owner counts against engine.max_memory, with kObjectBytes for the set
  // itself when it is allocated on its own.
  size_t HeapBytes() const { return bytes_; }
  // What Upsert of a member not in the set adds to HeapBytes.
  static size_t MemberBytes(std::string_view member);
  // The set object's own chunk, when allocated on its own.
  static const size_t kObjectBytes;

  // For a snapshot of the embedded store: appends the members (count, then
  // each member's length, bytes and expiry) to *out.
  void Encode(std::string* out) const;
  // Reads what Encode wrote from the front of *in (and consumes it) into
  // this empty set, skipping members expired at now_ms. False for bytes that
  // are not such a set.
  bool Decode(std::string_view* in, int64_t now_ms);

 private:
  using Members = std::map<std::string, int64_t, std::less<>>;
  // (expiry, member): the member points at its key in members_, whose nodes
  // never move.
  struct ByExpiry {
    bool operator()(const std::pair<int64_t, const std::string*>& a,
                    const std::pair<int64_t, const std::string*>& b) const {
      if (a.first != b.first) return a.first < b.first;
      return *a.second < *b.second;
    }
  };

  Members members_;
  std::set<std::pair<int64_t, const std::string*>, ByExpiry> by_expiry_;
  size_t bytes_ = 0;
};

}  // namespace floodgate::engine
