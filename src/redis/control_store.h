// RedisControlStore: the Redis store's ControlStore (store/control.h), the
// control plane's records and change log in Redis, shared by every
// floodgate server on it. Five keys under the hash tag {control}, so every
// call is one script (scripts/control.lua) on one slot: one server, a
// Cluster and Twemproxy alike (no MULTI, no pub/sub: the servers poll the
// version):
//   fg:{control}:overrides, :blocks, :rules  one hash per table, entry key ->
//       "<expires_at_ms>:<value>": the expiry in decimal (0: never), then the
//       value's bytes after the first ':', so any byte string round-trips
//   fg:{control}:version  the counter every write bumps
//   fg:{control}:log      the change log, newest first, its last 1000 entries
// Unlike every other key floodgate writes, these have no expiry, by design:
// they are configuration (an override without expiry lasts until deleted),
// and `floodgate audit` leaves them alone.
//
// Blocking calls, on the client's blocking path (Client::Call): for the
// control plane's own thread, never an event loop or a client I/O thread.
// Each is answered within the client's timeout_ms (twice that when Redis
// lacks the script and the call is sent again as EVAL): UNAVAILABLE or
// DEADLINE_EXCEEDED on a Redis failure, naming the step that failed.
// Thread-safe (no state but the client's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"
#include "redis/client.h"
#include "store/control.h"

namespace floodgate::redis {

class RedisControlStore final : public store::ControlStore {
 public:
  // The keys (see above); every one starts with kKeyPrefix.
  static constexpr std::string_view kKeyPrefix = "fg:{control}:";
  static constexpr std::string_view kOverridesKey = "fg:{control}:overrides";
  static constexpr std::string_view kBlocksKey = "fg:{control}:blocks";
  static constexpr std::string_view kRulesKey = "fg:{control}:rules";
  static constexpr std::string_view kVersionKey = "fg:{control}:version";
  static constexpr std::string_view kLogKey = "fg:{control}:log";
  static constexpr size_t kLogKeep = 1000;

  // Whether `key` is under kKeyPrefix: the control records' keys, which
  // live without an expiry by design.
  static bool IsControlKey(std::string_view key) { return key.starts_with(kKeyPrefix); }

  // `client` must outlive the store.
  explicit RedisControlStore(Client& client) : client_(client) {}

  // A GET of the version (0 before the first write).
  Result<uint64_t> Version() override;
  // One script call: the version and the entries as of one instant. The
  // entries come ordered by (table, key). An entry that is not in the
  // encoding above (written by someone else) is an INTERNAL error naming it.
  Result<store::ControlSnapshot> Load(int64_t now_ms) override;
  // One script call, which drops the entries of write.entry.table expired
  // at now_ms first. INVALID_ARGUMENT for a table other than the three,
  // without a call.
  Result<uint64_t> Apply(const store::ControlWrite& write, int64_t now_ms) override;
  // An LRANGE of the log.
  Result<std::vector<std::string>> RecentLog(size_t limit) override;

 private:
  // One call of the script with the five keys (EVALSHA, EVAL when Redis
  // lacks it); an error reply becomes UNAVAILABLE.
  Result<OwnedReply> Run(std::vector<std::string> argv);
  // A command on one key, whose error reply becomes UNAVAILABLE.
  // deadline_ns > 0: sooner than the client's timeout (Client::Call).
  Result<OwnedReply> Command(std::string_view key, std::span<const std::string> args,
                             int64_t deadline_ns = 0);

  Client& client_;
};

}  // namespace floodgate::redis
