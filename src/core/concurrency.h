// concurrency: leases rather than a rate. A subject holds at most
// max_in_flight leases at once; each is live from its grant until it is
// released or its expiry passes (now >= expires_at: gone), and a renewal
// moves its expiry to now + ttl. Every operation first drops the expired
// leases, so a holder that dies frees its slot by the lease's TTL.
//
// Pure functions over a lease table, shared by the embedded store (an
// engine::ExpiringSet) and mirrored by scripts/concurrency.lua (a sorted
// set scored by expiry): the golden vectors in tests/vectors/concurrency.json
// run on both. The table type provides, as engine::ExpiringSet does:
//   size_t Prune(int64_t now_ms);                    // drops expiry <= now
//   bool Upsert(std::string_view id, int64_t expires_at_ms);
//   bool Erase(std::string_view id);
//   int64_t ExpiryOf(std::string_view id) const;     // 0: absent
//   int64_t NthExpiry(size_t index) const;           // 0: earliest; 0 past the end
//   size_t size() const;
//   int64_t LastExpiry() const;                      // 0 when empty
// Not thread-safe: callers serialise access to a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace floodgate::core {

struct LeaseOutcome {
  bool ok = false;
  int64_t in_flight = 0;  // live leases after the operation
  // Acquire granted, renew done: ttl_ms. Acquire refused: ms until enough
  // leases have expired for one more to fit (-1 when max_in_flight is 0:
  // never). Release, or a refused renew: 0.
  int64_t ms = 0;
  int64_t expired = 0;  // leases this operation found expired and dropped
};

// Grants lease `id` (expiring at now_ms + ttl_ms) iff fewer than
// max_in_flight live leases are held. An id already held is refreshed as
// a renewal would (ok, no new slot taken).
template <typename Table>
LeaseOutcome AcquireLease(Table& table, std::string_view id, int64_t now_ms, int64_t ttl_ms,
                          int64_t max_in_flight) {
  LeaseOutcome out;
  out.expired = static_cast<int64_t>(table.Prune(now_ms));
  if (table.ExpiryOf(id) != 0 || static_cast<int64_t>(table.size()) < max_in_flight) {
    table.Upsert(id, now_ms + ttl_ms);
    out.ok = true;
    out.ms = ttl_ms;
  } else if (max_in_flight <= 0) {
    out.ms = -1;
  } else {
    // size - max_in_flight + 1 leases must go: the (size - max)-th expiry.
    out.ms = table.NthExpiry(table.size() - static_cast<size_t>(max_in_flight)) - now_ms;
  }
  out.in_flight = static_cast<int64_t>(table.size());
  return out;
}

// Releases lease `id`: ok iff it was live.
template <typename Table>
LeaseOutcome ReleaseLease(Table& table, std::string_view id, int64_t now_ms) {
  LeaseOutcome out;
  out.expired = static_cast<int64_t>(table.Prune(now_ms));
  out.ok = table.Erase(id);
  out.in_flight = static_cast<int64_t>(table.size());
  return out;
}

// Renews lease `id` to expire at now_ms + ttl_ms: ok iff it was live (an
// expired or unknown lease is not brought back).
template <typename Table>
LeaseOutcome RenewLease(Table& table, std::string_view id, int64_t now_ms, int64_t ttl_ms) {
  LeaseOutcome out;
  out.expired = static_cast<int64_t>(table.Prune(now_ms));
  if (table.ExpiryOf(id) != 0) {
    table.Upsert(id, now_ms + ttl_ms);
    out.ok = true;
    out.ms = ttl_ms;
  }
  out.in_flight = static_cast<int64_t>(table.size());
  return out;
}

}  // namespace floodgate::core
