// ControlPlane: changes made while the service runs (docs/control-plane.md)
// — per-subject overrides of a rule's limits, blocks, runtime rules — and
// the log of who changed what.
//
// The records live in the store's ControlStore (store/control.h): Redis
// for a Redis store, so that every server sharing it applies a change
// within a second (each polls the version every kPollMs), and memory plus
// data_dir for the embedded one. This class validates a change, sends it
// to the store on its own thread (fronts never wait on it), reloads the
// records, and hands them to the limiter (`Apply`), which folds overrides
// into its rule set and blocks into its block table. A check for a subject
// with neither pays one branch per kind.
//
// A rule's block_for (AutoBlock) is the exception: it is in force and
// listed at once, as a pending record, and reaches the store in the
// background; until it has, every reload keeps it in the records it hands
// to the limiter.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/log.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/status.h"
#include "store/control.h"

namespace floodgate::service {

// Who asks for a change, as the change log names them.
struct Actor {
  // "admin" (the admin token), "read" (the read token), "loopback" (no
  // admin token set), "client_cert" (a name admin.client_names lists),
  // "rule" (block_for).
  std::string kind;
  std::string peer;       // the client's address, or "" (an embedding program)
  std::string name = {};  // "client_cert": the certificate's name admin.client_names lists
};

struct OverrideRecord {
  std::string rule;
  std::string key;
  std::vector<std::string> limits;  // as written: "5000/day"
  int64_t expires_at_ms = 0;        // 0: none
  std::string reason;
};

// A block of one subject (`key`) or of a network (`cidr`): exactly one of
// the two is set.
struct BlockRecord {
  std::string key;
  std::string rule;  // "" : every rule
  int64_t expires_at_ms = 0;
  std::string reason;
  // A block_for's block not in the store yet (AutoBlock): in force here and
  // listed, but another server does not know it, nor does a restart.
  bool pending = false;
  // A network block: the network's canonical text ("203.0.113.0/24",
  // "2001:db8::/32"; ParseNetwork), `key` empty. It blocks the addresses
  // inside the network (NetworkBlockTable).
  std::string cidr = {};
};

struct RuntimeRuleRecord {
  std::string name;
  std::string definition;  // the JSON the rule was given as
  Rule rule;               // parsed
};

// What the limiter applies (Apply): every live record.
struct ControlRecords {
  std::vector<OverrideRecord> overrides;
  std::vector<BlockRecord> blocks;
  std::vector<RuntimeRuleRecord> rules;
};

class ControlPlane {
 public:
  // Between polls of the store's version, on the clock's monotonic reading.
  static constexpr int64_t kPollMs = 250;
  // The longest ttl_ms a block or an override takes: 366 days, as a rule's
  // block_for. Checked before anything is written, so that no far-future
  // expiry can overflow into one already past (a block that would answer
  // success and block nothing).
  static constexpr int64_t kMaxTtlMs = 366LL * 86'400'000;

  // What the control plane needs of the limiter.
  struct Hooks {
    // Takes the records in force (called on the control thread, and once
    // from Start).
    std::function<void(const ControlRecords&)> apply;
    // The rule named `name` of the config file (not a runtime one), if any.
    std::function<const Rule*(std::string_view name)> file_rule;
    // The rule named `name` in force (file or runtime), if any: a copy.
    std::function<std::optional<Rule>(std::string_view name)> rule;
    // Puts one block in force at once, beside those `apply` gave (a
    // block_for made while a reload was applied). Called on the control
    // thread.
    std::function<void(const BlockRecord&)> add_block;
  };

  ControlPlane(const Clock& clock, Hooks hooks);
  ~ControlPlane();  // applies the changes accepted, then stops the thread

  // Opens the store's records with `open` and starts polling them. A store
  // that keeps none (no opener, or an UNAVAILABLE error from it) leaves
  // every change refused with that error.
  Status Start(const store::ControlStoreOpener& open, const store::ControlStoreOptions& options);

  using Done = std::function<void(const Status& status, const std::string& json)>;

  // Each validates, then answers `done` on the control thread once the
  // store has the change (or at once, on a validation error: then nothing
  // changed). `json` is the record as the admin API shows it. ttl_ms: an
  // override's in [0, kMaxTtlMs] (0: no expiry), a block's in
  // [1, kMaxTtlMs] (a block always expires).
  void SetOverride(const Actor& who, std::string_view rule, std::string_view key,
                   std::vector<std::string> limits, int64_t ttl_ms, std::string reason, Done done);
  void DeleteOverride(const Actor& who, std::string_view rule, std::string_view key, Done done);
  void Block(const Actor& who, std::string_view key, std::string_view rule, int64_t ttl_ms,
             std::string reason, Done done);
  void Unblock(const Actor& who, std::string_view key, std::string_view rule, Done done);
  // Network blocks: as Block and Unblock, for every address inside
  // `network`, "address/length" (an address alone is its /32 or /128),
  // IPv4 or IPv6, validated as ParseNetwork does (INVALID_ARGUMENT, and
  // nothing changes). The records have `cidr` set and no key.
  void BlockNetwork(const Actor& who, std::string_view network, std::string_view rule,
                    int64_t ttl_ms, std::string reason, Done done);
  void UnblockNetwork(const Actor& who, std::string_view network, std::string_view rule, Done done);
  // The canonical text of the network `text` names ("::ffff:203.0.113.0/120"
  // is "203.0.113.0/24"), or INVALID_ARGUMENT naming what is wrong:
  // ParseCidr's refusals (service/lists/cidr.h), and host bits set, which
  // ParseCidr would clear but a block refuses, naming the network meant
  // ("'203.0.113.7/24' has host bits set; the network is 203.0.113.0/24"):
  // an operator who typed an address may not mean its whole network.
  static Result<std::string> ParseNetwork(std::string_view text);
  // A rule's block_for: blocks `key` on `rule` until `until_ms` without
  // waiting. The block is listed at once (ListBlocks, BlocksOf: pending)
  // and kept in the records every reload applies until it is in the
  // store, which it reaches in the background (dropped, and counted, when
  // too many wait: then it is neither listed nor kept through a reload).
  // The caller puts it in force in its block table after this returns.
  // Safe on the decision path: it takes the records' mutex only, never
  // waits for the control thread.
  void AutoBlock(std::string_view rule, std::string_view key, int64_t until_ms,
                 std::string_view reason);
  void PutRule(const Actor& who, std::string_view name, std::string_view json, Done done);
  void DeleteRule(const Actor& who, std::string_view name, Done done);

  // Reads, from the records last loaded and the block_for blocks made
  // since (no store round trip).
  std::optional<OverrideRecord> GetOverride(std::string_view rule, std::string_view key) const;
  std::vector<OverrideRecord> ListOverrides(std::string_view rule) const;  // "" : every rule
  std::vector<BlockRecord> ListBlocks() const;
  std::vector<BlockRecord> BlocksOf(std::string_view key) const;  // a key's, no network's
  // The blocks of the network `cidr`, given as its canonical text
  // (ParseNetwork's).
  std::vector<BlockRecord> BlocksOfNetwork(std::string_view cidr) const;
  std::vector<RuntimeRuleRecord> RuntimeRules() const;
  // Whether `name` is a rule of the config file (which no change here may
  // replace or delete).
  bool IsFileRule(std::string_view name) const { return hooks_.file_rule(name) != nullptr; }
  // Whether `name` is a rule in force (the file's or a runtime one).
  bool IsKnownRule(std::string_view name) const { return hooks_.rule(name).has_value(); }
  // The last `limit` change-log entries (JSON objects), newest first: a
  // store round trip, answered on the control thread.
  void RecentLog(size_t limit, std::function<void(const Status&, std::vector<std::string>)> done);

  // JSON of one record, as every admin answer shows it.
  std::string OverrideJson(const OverrideRecord& o) const;
  std::string BlockJson(const BlockRecord& b) const;

  int64_t auto_blocks_dropped() const;

 private:
  struct Task;
  void Run();
  void Enqueue(std::unique_ptr<Task> task);
  // Loads the records from the store and applies them. Control thread.
  Status Reload();
  // Sends one change: the store applies it, then the records are reloaded.
  Status Write(const store::ControlWrite& write);
  // A block's change, validated but for its subject (Block and
  // BlockNetwork have checked the key or the network): the rule, the ttl,
  // then the write.
  void PutBlock(const Actor& who, BlockRecord b, int64_t ttl_ms, Done done);
  // Removes `gone` (one key's or one network's blocks), answering them as
  // `{<head>,"blocks":[...]}`: head is `"key":"..."` or `"cidr":"..."`.
  void RemoveBlocks(const Actor& who, std::vector<BlockRecord> gone, std::string head, Done done);
  // An AutoBlock's write is over (`stored`: the store has it): it is no
  // longer pending, and, stored, is one of the records. Control thread.
  void AutoBlockDone(const std::string& id, uint64_t seq, const BlockRecord& b, bool stored);

  // A block_for not in the store yet, by its (key, rule); `seq` tells a
  // newer one for the same pair from it.
  struct PendingBlock {
    BlockRecord record;
    uint64_t seq = 0;
  };
  // The change-log entry of a change, and its logfmt line. Control thread.
  std::string LogEntry(const Actor& who, std::string_view action, std::string_view target,
                       std::string_view before, std::string_view after);

  const Clock& clock_;
  Hooks hooks_;
  std::unique_ptr<store::ControlStore> store_;  // null: Start failed or not called
  Status unavailable_;                          // why store_ is null

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Task>> tasks_;  // guarded by mu_
  size_t auto_blocks_queued_ = 0;            // guarded by mu_
  int64_t auto_blocks_dropped_ = 0;          // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  // The last loaded, and the block_for blocks stored since (AutoBlockDone).
  ControlRecords records_;             // guarded by mu_
  uint64_t version_ = 0;               // of records_; control thread only
  int64_t last_rule_line_ms_ = 0;      // control thread only
  int64_t rule_lines_suppressed_ = 0;  // control thread only
  // A store that stays unreachable is logged every 10 s, per control plane
  // (each has its own store to tell of). Control thread only.
  LogEvery unreachable_log_{10'000};
  // The block_for blocks not in the store yet, by (key, rule) as the store
  // keys them, and the last number given to one; guarded by mu_.
  absl::flat_hash_map<std::string, PendingBlock> pending_blocks_;
  uint64_t last_block_seq_ = 0;
  std::thread thread_;
};

}  // namespace floodgate::service
