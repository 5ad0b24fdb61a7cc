// SetStore: see set_store.h. The entry's one state word is a pointer to the
// set (null for a set that does not exist yet); the variant's release hook
// frees it whenever the store frees the entry.
#include "engine/set_store.h"

#include <string>

#include "engine/expiring_set.h"

namespace floodgate::engine {
namespace {

ExpiringSet* SetOf(int64_t* state) { return reinterpret_cast<ExpiringSet*>(state[0]); }

void ReleaseSet(int64_t* state) {
  delete SetOf(state);
  state[0] = 0;
}

}  // namespace

VariantLayout SetStore::Layout() {
  return VariantLayout{.state_words = 1,
                       .release = &ReleaseSet,
                       .owned_bytes = &SetWordBytes,
                       .encode = &EncodeSetWord,
                       .decode = &DecodeSetWord};
}

store::Answer SetStore::Run(const SetRequest& request, int64_t max_members, SetReply* reply,
                            Status* status, store::Later<SetReply>) {
  *status = Run(request, max_members, clock_.NowMs(), reply);
  return store::Answer::kNow;
}

Status SetStore::Run(const SetRequest& request, int64_t max_members, int64_t now_ms,
                     SetReply* reply) {
  *reply = SetReply{};
  reply->now_ms = now_ms;
  Status refused;
  bool existed = false;
  const Status s = store_.Update(
      variant_, request.key, now_ms, [&](int64_t* state, bool, core::MemoryRoom* room) {
        ExpiringSet* set = SetOf(state);
        existed = set != nullptr;
        if (set != nullptr) set->Prune(now_ms);
        switch (request.op) {
          case SetOp::kAdd: {
            const bool present = set != nullptr && set->ExpiryOf(request.member) != 0;
            const size_t size = set != nullptr ? set->size() : 0;
            if (!present && static_cast<int64_t>(size) >= max_members) {
              refused = ResourceExhaustedError("set is full: " + std::to_string(size) +
                                               " live members (sets.max_members)");
              break;
            }
            // A new member (and a new set) takes memory: claimed first, and
            // not added when the store has no room for it.
            if (!present &&
                !core::Claim(room, ExpiringSet::MemberBytes(request.member) +
                                       (set == nullptr ? ExpiringSet::kObjectBytes : 0))) {
              break;
            }
            if (set == nullptr) {
              set = new ExpiringSet();
              state[0] = reinterpret_cast<int64_t>(set);
            }
            reply->value = set->Upsert(request.member, now_ms + request.ttl_ms) ? 1 : 0;
            break;
          }
          case SetOp::kRemove:
            reply->value = set != nullptr && set->Erase(request.member) ? 1 : 0;
            break;
          case SetOp::kContains:
            reply->value = set != nullptr && set->ExpiryOf(request.member) != 0 ? 1 : 0;
            break;
          case SetOp::kCount:
            reply->value = set != nullptr ? static_cast<int64_t>(set->size()) : 0;
            break;
          case SetOp::kMembers:
            if (set != nullptr) {
              reply->members.reserve(set->size());
              set->ForEach([&](std::string_view member, int64_t expires_at_ms) {
                reply->members.push_back(SetMember{std::string(member), expires_at_ms});
              });
            }
            reply->value = static_cast<int64_t>(reply->members.size());
            break;
        }
        // An empty set is no set: returning "keep nothing" frees the entry.
        return set != nullptr ? set->LastExpiry() : 0;
      });
  if (!refused.ok()) return refused;
  // The store refuses only what takes memory: a new set, a new member. A
  // read, or a removal, keeps nothing new and is answered.
  if (s.code() == StatusCode::kResourceExhausted) {
    *reply = SetReply{};
    reply->now_ms = now_ms;
    return ResourceExhaustedError(
        (existed ? "cannot add to the set: " : "cannot create a new set: ") + s.message());
  }
  return s;
}

}  // namespace floodgate::engine
