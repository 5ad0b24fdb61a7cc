// LeaseStore: see lease_store.h. The entry's one state word is a pointer to
// the table (null until a lease is granted); the variant's release hook
// frees it whenever the store frees the entry, so returning "keep nothing"
// from the update is how an emptied table goes at once.
#include "engine/lease_store.h"

#include <openssl/evp.h>

#include "core/concurrency.h"
#include "engine/expiring_set.h"
#include "floodgate/rule.h"

namespace floodgate::engine {
namespace {

// The first byte of a table key: which form follows.
constexpr char kDirectForm = 'd';  // rule length (2 bytes, big-endian), rule, subject
constexpr char kDigestForm = 'h';  // SHA-256 of the direct form with an 8-byte length
constexpr size_t kDirectHead = 3;

ExpiringSet* TableOf(int64_t* state) { return reinterpret_cast<ExpiringSet*>(state[0]); }

void ReleaseTable(int64_t* state) {
  delete TableOf(state);
  state[0] = 0;
}

// The table as core/concurrency.h's functions see it, with a step's room:
// a lease not yet held claims its bytes (and, in a table just made, the
// table's) before it is added, and is not added when the room refuses them
// (the store then answers the step as full). Everything else is the set's.
class ClaimingTable {
 public:
  ClaimingTable(ExpiringSet& set, core::MemoryRoom* room, size_t unclaimed)
      : set_(set), room_(room), unclaimed_(unclaimed) {}

  size_t Prune(int64_t now_ms) { return set_.Prune(now_ms); }
  bool Upsert(std::string_view id, int64_t expires_at_ms) {
    if (set_.ExpiryOf(id) == 0) {
      if (!core::Claim(room_, ExpiringSet::MemberBytes(id) + unclaimed_)) return false;
      unclaimed_ = 0;
    }
    return set_.Upsert(id, expires_at_ms);
  }
  bool Erase(std::string_view id) { return set_.Erase(id); }
  int64_t ExpiryOf(std::string_view id) const { return set_.ExpiryOf(id); }
  int64_t NthExpiry(size_t index) const { return set_.NthExpiry(index); }
  size_t size() const { return set_.size(); }
  int64_t LastExpiry() const { return set_.LastExpiry(); }

 private:
  ExpiringSet& set_;
  core::MemoryRoom* room_;
  size_t unclaimed_;  // the table's own bytes, until a lease is added
};

}  // namespace

VariantLayout LeaseStore::Layout() {
  return VariantLayout{.state_words = 1,
                       .release = &ReleaseTable,
                       .owned_bytes = &SetWordBytes,
                       .encode = &EncodeSetWord,
                       .decode = &DecodeSetWord};
}

std::string LeaseStore::TableKey(std::string_view rule, std::string_view subject) {
  std::string key;
  if (rule.size() <= 0xffff && kDirectHead + rule.size() + subject.size() <= kMaxKeyBytes) {
    // Rule names are at most 64 bytes: every subject of up to 445 bytes
    // takes this form.
    key.reserve(kDirectHead + rule.size() + subject.size());
    key.push_back(kDirectForm);
    key.push_back(static_cast<char>(rule.size() >> 8));
    key.push_back(static_cast<char>(rule.size() & 0xff));
    key.append(rule).append(subject);
    return key;
  }
  // The whole pair, the rule's length first (8 bytes: any length), hashed.
  std::string pair;
  pair.reserve(8 + rule.size() + subject.size());
  for (int shift = 56; shift >= 0; shift -= 8) {
    pair.push_back(static_cast<char>((static_cast<uint64_t>(rule.size()) >> shift) & 0xff));
  }
  pair.append(rule).append(subject);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  key.push_back(kDigestForm);
  if (EVP_Digest(pair.data(), pair.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    // Only a broken OpenSSL fails here. The pair's own bytes, cut to fit,
    // still name it for every pair that differs within them.
    key.append(pair, 0, kMaxKeyBytes - 1);
    return key;
  }
  key.append(reinterpret_cast<const char*>(digest), size);
  return key;
}

store::Answer LeaseStore::Lease(const store::LeaseOp& op, store::LeaseResult* result,
                                Status* status, store::Later<store::LeaseResult>) {
  *status = Run(op, op.at_ms != nullptr ? *op.at_ms : clock_.NowMs(), result);
  return store::Answer::kNow;
}

Status LeaseStore::Run(const store::LeaseOp& op, int64_t now_ms, store::LeaseResult* result) {
  *result = store::LeaseResult{};
  result->now_ms = now_ms;
  const std::string key = TableKey(op.rule, op.subject);
  core::LeaseOutcome out;
  bool existed = false;
  const Status s = store_.Update(
      variant_, key, now_ms, [&](int64_t* state, bool, core::MemoryRoom* room) -> int64_t {
        ExpiringSet* table = TableOf(state);
        existed = table != nullptr;
        if (table == nullptr) {
          // No live lease: a release or renewal finds nothing (and keeps
          // nothing), an acquisition starts the table.
          if (op.kind != store::LeaseOpKind::kAcquire) return 0;
          table = new ExpiringSet();
          state[0] = reinterpret_cast<int64_t>(table);
        }
        switch (op.kind) {
          case store::LeaseOpKind::kAcquire: {
            // A table just made is claimed with its first lease: one that
            // stays empty is freed at once (below) and never counted.
            ClaimingTable claiming(*table, room, existed ? 0 : ExpiringSet::kObjectBytes);
            out = core::AcquireLease(claiming, op.lease, now_ms, op.ttl_ms, op.max_in_flight);
            break;
          }
          case store::LeaseOpKind::kRelease:
            out = core::ReleaseLease(*table, op.lease, now_ms);
            break;
          case store::LeaseOpKind::kRenew:
            out = core::RenewLease(*table, op.lease, now_ms, op.ttl_ms);
            break;
        }
        // An empty table is no table: "keep nothing" frees the entry (and the
        // release hook the table) now, not at its expiry.
        return table->empty() ? 0 : table->LastExpiry();
      });
  if (s.code() == StatusCode::kResourceExhausted) {
    // Only a lease that takes memory is refused (a table that keeps
    // something, or one more lease in it): it was not granted, whatever the
    // update computed.
    return ResourceExhaustedError(
        (existed ? "cannot hold one more lease: " : "cannot hold the leases of a new subject: ") +
        s.message());
  }
  if (!s.ok()) return s;
  result->ok = out.ok;
  result->in_flight = out.in_flight;
  result->ms = out.ms;
  return Status::Ok();
}

}  // namespace floodgate::engine
