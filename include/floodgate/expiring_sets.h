// ExpiringSets: sets whose members each carry their own expiry (seeds 000
// and 001): a phone number's recent requests, a user's live sessions, the
// devices seen for an account this week. Kept in the Limiter's store,
// embedded or Redis, with the same semantics on both:
//
//  - Add(key, member, ttl_ms) adds a member that lives ttl_ms from now;
//    adding it again moves its expiry to ttl_ms from then.
//  - A member added at t with ttl_ms = 1000 is listed and counted up to
//    t + 999 and gone from t + 1000. Expired members are never returned or
//    counted.
//  - The set itself expires with its last member: nothing is ever stored
//    without an expiry.
//  - A set holds at most sets.max_members live members: adding a new member
//    to a full set is refused with RESOURCE_EXHAUSTED (refreshing one that
//    is there still works).
//
//   auto added = limiter->sets().Add("otp:+15550100", "req-1", 300'000);
//   auto n = limiter->sets().Count("otp:+15550100");
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/set_types.h"
#include "floodgate/status.h"

namespace floodgate {

// Thread-safe.
class ExpiringSets {
 public:
  struct Stats {
    int64_t adds = 0;            // members added or refreshed
    int64_t removes = 0;         // remove operations (whether or not the member was there)
    int64_t reads = 0;           // contains, count and members operations
    int64_t full = 0;            // adds refused because the set was full
    int64_t backend_errors = 0;  // operations the store failed (Redis down or late)
  };

  // Runs `request`. Errors: INVALID_ARGUMENT for an empty or too long key
  // or member, or a ttl_ms outside [1, sets.max_ttl]; RESOURCE_EXHAUSTED for
  // a new member of a full set or a new set in a full embedded store;
  // UNAVAILABLE or DEADLINE_EXCEEDED when Redis fails. An error changes
  // nothing. Blocks for a round trip on the Redis store.
  Result<SetReply> Run(const SetRequest& request);

  // Run without blocking. `done` runs exactly once: before RunAsync returns
  // on the embedded store or for an invalid request, else on one of the
  // Redis store's I/O threads. It must be quick and must not block.
  using Callback = std::function<void(const Status& status, const SetReply& reply)>;
  void RunAsync(const SetRequest& request, Callback done);

  // Conveniences over Run.
  Result<bool> Add(std::string_view key, std::string_view member, int64_t ttl_ms);
  Result<bool> Remove(std::string_view key, std::string_view member);
  Result<bool> Contains(std::string_view key, std::string_view member);
  Result<int64_t> Count(std::string_view key);
  Result<std::vector<SetMember>> Members(std::string_view key);

  Stats GetStats() const;

  struct Impl;
  explicit ExpiringSets(std::unique_ptr<Impl> impl);
  ~ExpiringSets();
  ExpiringSets(const ExpiringSets&) = delete;
  ExpiringSets& operator=(const ExpiringSets&) = delete;

 private:
  std::unique_ptr<Impl> impl_;
};

// "add", "remove", "contains", "count", "members".
std::string_view SetOpName(SetOp op);

}  // namespace floodgate
