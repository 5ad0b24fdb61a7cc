// ControlPlane: see control_plane.h.
#include "service/control/control_plane.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/cidr.h"
#include "common/ip_address.h"
#include "common/json_text.h"
#include "common/length_fields.h"
#include "common/log.h"
#include "core/rule_eval.h"

namespace floodgate::service {
namespace {

// How many block_for changes may wait for the store: past it a new one is
// applied here only (and counted), so a flood of denials cannot grow memory.
constexpr size_t kMaxQueuedAutoBlocks = 10'000;

// ttl_ms out of [min, kMaxTtlMs]: the range, named (0 is an override's "no
// expiry"; a block needs at least 1).
Status TtlError(int64_t min) {
  return InvalidArgumentError("ttl_ms: must be an integer from " + std::to_string(min) + " to " +
                              std::to_string(ControlPlane::kMaxTtlMs) + " (366 days)" +
                              (min == 0 ? "; 0: no expiry" : "; a block always expires"));
}

// Records are stored as length-prefixed fields (common/length_fields.h); a
// key of two parts is the two fields.
std::string PairKey(std::string_view a, std::string_view b) {
  std::string key;
  fields::Append(&key, a);
  fields::Append(&key, b);
  return key;
}

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  json::AppendEscaped(&out, text);
  out += '"';
  return out;
}

// A network block's entry key starts with this: a key block's starts with a
// field's length (a digit), so the two never meet, and a reader that knows
// only key blocks skips a network's as not one of its own.
constexpr std::string_view kNetworkIdPrefix = "cidr:";

// A block's entry key in the blocks table: its key (or network) and rule.
std::string BlockId(const BlockRecord& b) {
  if (b.cidr.empty()) return PairKey(b.key, b.rule);
  return std::string(kNetworkIdPrefix) + PairKey(b.cidr, b.rule);
}

// Reads a blocks-table entry key into b's key (or cidr) and rule; false for
// one that is not a block's (another version's, or damaged).
bool ReadBlockId(std::string_view id, BlockRecord* b) {
  if (!id.starts_with(kNetworkIdPrefix)) {
    return fields::Read(&id, &b->key) && fields::Read(&id, &b->rule);
  }
  id.remove_prefix(kNetworkIdPrefix.size());
  if (!fields::Read(&id, &b->cidr) || !fields::Read(&id, &b->rule)) return false;
  // Only a network's canonical text is written; anything else is damage.
  const Result<std::string> canonical = ControlPlane::ParseNetwork(b->cidr);
  return canonical.ok() && *canonical == b->cidr;
}

// What the change log names as a block's target: [rule/]key, or
// [rule/]cidr:network.
std::string BlockTarget(const BlockRecord& b) {
  const std::string subject = b.cidr.empty() ? b.key : std::string(kNetworkIdPrefix) + b.cidr;
  return b.rule.empty() ? subject : b.rule + "/" + subject;
}

// The rules table's JSON, read as the YAML of one rule (JSON is YAML's flow
// style): the same parser, checks and messages as the config file's rules.
Result<Rule> ParseRuntimeRule(std::string_view name, std::string_view json) {
  std::string flat(json);
  // A JSON string holds no raw line break, so joining lines changes no value
  // and keeps the flow mapping on the rule's line.
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  std::replace(flat.begin(), flat.end(), '\r', ' ');
  if (flat.find_first_not_of(" \t") == std::string::npos ||
      flat[flat.find_first_not_of(" \t")] != '{') {
    return InvalidArgumentError("the rule must be a JSON object of the YAML rule's fields");
  }
  const std::string yaml = "rules:\n  " + Quoted(name) + ": " + flat + "\n";
  auto config = ParseConfig(yaml, "rule");
  if (!config.ok()) return config.status();
  if (config->rules.size() != 1) return InvalidArgumentError("expected one rule");
  // The subjects room compiles the file's rules only (and a deny_list names
  // a list of the file, which this one-rule config has none of).
  if (config->rules.front().subject.any()) {
    return InvalidArgumentError(
        "a runtime rule takes no 'key' template, 'on_missing', 'deny_list' or 'allow_list': "
        "put a rule that reads the request in the config file");
  }
  return std::move(config->rules.front());
}

}  // namespace

struct ControlPlane::Task {
  std::function<void()> run;
  bool auto_block = false;
};

ControlPlane::ControlPlane(const Clock& clock, Hooks hooks)
    : clock_(clock), hooks_(std::move(hooks)), unavailable_(UnavailableError("not started")) {}

ControlPlane::~ControlPlane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ControlPlane::Start(const store::ControlStoreOpener& open,
                           const store::ControlStoreOptions& options) {
  Result<std::unique_ptr<store::ControlStore>> opened =
      open ? open(options) : UnavailableError("this store keeps no control records");
  if (!opened.ok()) {
    // Records that cannot be read (a corrupt data_dir file) must not be
    // silently dropped: refuse to start. A store that keeps none (a test's
    // fake) leaves the service running with every change refused.
    if (opened.status().code() != StatusCode::kUnavailable) return opened.status();
    unavailable_ = opened.status();
    return Status::Ok();
  }
  store_ = std::move(*opened);
  if (Status s = Reload(); !s.ok()) {
    // Redis down at start: serve (the rules' on_backend_error decides), and
    // load the records once it answers (the first poll that reaches it).
    Log(LogLevel::kWarn, "control records not loaded yet", {{"error", s.message()}});
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ControlPlane::Run() {
  // The poll is timed on clock_'s monotonic reading, as every wait is: a
  // ManualClock drives it in tests, and a step of the wall clock neither
  // hurries nor delays it. The thread sleeps in real time, at most the
  // clock's MaxSleepNs, and the reading decides whether the poll is due.
  int64_t next_poll_ns = clock_.MonotonicNs();
  for (;;) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (int64_t now = clock_.MonotonicNs(); !stopping_ && tasks_.empty() && now < next_poll_ns;
           now = clock_.MonotonicNs()) {
        wake_.wait_for(lock, std::chrono::nanoseconds(clock_.SleepNs(now, next_poll_ns)));
      }
      // Changes already accepted are applied, even while stopping: their
      // callers are told the outcome.
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
        if (task->auto_block) --auto_blocks_queued_;
      } else if (stopping_) {
        return;
      }
    }
    if (task != nullptr) {
      task->run();
      continue;
    }
    // Every kPollMs: another server's change shows as a new version.
    next_poll_ns = clock_.MonotonicNs() + kPollMs * 1'000'000;
    auto version = store_->Version();
    if (!version.ok()) {
      int64_t suppressed = 0;
      if (unreachable_log_.Allow(clock_.MonotonicNs() / 1'000'000, &suppressed)) {
        Log(LogLevel::kWarn, "control records unreachable",
            {{"error", version.status().message()}, {"suppressed", std::to_string(suppressed)}});
      }
      continue;
    }
    if (*version != version_) (void)Reload();
  }
}

void ControlPlane::Enqueue(std::unique_ptr<Task> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      task = nullptr;
    }
  }
  wake_.notify_one();
}

Status ControlPlane::Reload() {
  auto snapshot = store_->Load(clock_.NowMs());
  if (!snapshot.ok()) return snapshot.status();
  ControlRecords records;
  for (const store::ControlEntry& e : snapshot->entries) {
    std::string_view key(e.key), value(e.value);
    if (e.table == store::kOverridesTable) {
      OverrideRecord o;
      std::string limits;
      if (!fields::Read(&key, &o.rule) || !fields::Read(&key, &o.key) ||
          !fields::Read(&value, &limits) || !fields::Read(&value, &o.reason)) {
        continue;  // not one of ours: another version's, or damaged
      }
      std::string_view rest(limits);
      std::string one;
      while (fields::Read(&rest, &one)) o.limits.push_back(one);
      o.expires_at_ms = e.expires_at_ms;
      records.overrides.push_back(std::move(o));
    } else if (e.table == store::kBlocksTable) {
      BlockRecord b;
      if (!ReadBlockId(e.key, &b)) continue;
      b.reason = e.value;
      b.expires_at_ms = e.expires_at_ms;
      records.blocks.push_back(std::move(b));
    } else if (e.table == store::kRulesTable) {
      auto rule = ParseRuntimeRule(e.key, e.value);
      if (!rule.ok()) {
        Log(LogLevel::kWarn, "runtime rule not applied",
            {{"rule", e.key}, {"error", rule.status().message()}});
        continue;
      }
      records.rules.push_back({e.key, e.value, std::move(*rule)});
    }
  }
  // Block_for blocks on their way to the store stay in force: the snapshot
  // may predate their write (a change queued before them reloads first).
  const size_t stored = records.blocks.size();
  uint64_t seen = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, p] : pending_blocks_) records.blocks.push_back(p.record);
    seen = last_block_seq_;
  }
  hooks_.apply(records);
  records.blocks.resize(stored);
  // One made while `apply` replaced the block table may have been put in
  // force before that and lost: put it back. (One made from now on is put
  // in force by its caller after AutoBlock, so after this.)
  std::vector<BlockRecord> late;
  {
    std::lock_guard<std::mutex> lock(mu_);
    records_ = std::move(records);
    version_ = snapshot->version;
    for (const auto& [id, p] : pending_blocks_) {
      if (p.seq > seen) late.push_back(p.record);
    }
  }
  for (const BlockRecord& b : late) hooks_.add_block(b);
  return Status::Ok();
}

Status ControlPlane::Write(const store::ControlWrite& write) {
  auto applied = store_->Apply(write, clock_.NowMs());
  if (!applied.ok()) return applied.status();
  return Reload();
}

std::string ControlPlane::OverrideJson(const OverrideRecord& o) const {
  std::string out = "{\"rule\":" + Quoted(o.rule) + ",\"key\":" + Quoted(o.key) + ",\"limits\":[";
  for (size_t i = 0; i < o.limits.size(); ++i) {
    if (i > 0) out += ',';
    out += Quoted(o.limits[i]);
  }
  out += "],\"expires_in_ms\":";
  out += o.expires_at_ms == 0
             ? "null"
             : std::to_string(std::max<int64_t>(0, o.expires_at_ms - clock_.NowMs()));
  out += ",\"reason\":" + Quoted(o.reason) + "}";
  return out;
}

std::string ControlPlane::BlockJson(const BlockRecord& b) const {
  std::string out = b.cidr.empty() ? "{\"key\":" + Quoted(b.key) : "{\"cidr\":" + Quoted(b.cidr);
  out += ",\"rule\":";
  out += b.rule.empty() ? "null" : Quoted(b.rule);
  out += ",\"expires_in_ms\":" +
         std::to_string(std::max<int64_t>(0, b.expires_at_ms - clock_.NowMs()));
  out += ",\"reason\":" + Quoted(b.reason);
  if (b.pending) out += ",\"pending\":true";
  out += '}';
  return out;
}

std::string ControlPlane::LogEntry(const Actor& who, std::string_view action,
                                   std::string_view target, std::string_view before,
                                   std::string_view after) {
  // block_for may block many subjects a second under attack: their lines
  // are spaced (every change is still in the change log).
  if (who.kind == "rule") {
    const int64_t now = clock_.NowMs();
    if (now - last_rule_line_ms_ < 1000) {
      ++rule_lines_suppressed_;
    } else {
      last_rule_line_ms_ = now;
      Log(LogLevel::kInfo, "admin change",
          {{"who", who.kind},
           {"action", std::string(action)},
           {"target", std::string(target)},
           {"after", std::string(after)},
           {"suppressed", std::to_string(rule_lines_suppressed_)}});
      rule_lines_suppressed_ = 0;
    }
  } else {
    Log(LogLevel::kInfo, "admin change",
        {{"who", who.name.empty() ? who.kind : who.kind + ":" + who.name},
         {"peer", who.peer},
         {"action", std::string(action)},
         {"target", std::string(target)},
         {"before", before.empty() ? "null" : std::string(before)},
         {"after", after.empty() ? "null" : std::string(after)}});
  }
  std::string out = "{\"at_ms\":" + std::to_string(clock_.NowMs()) +
                    ",\"who\":" + Quoted(who.kind) +
                    (who.name.empty() ? "" : ",\"client\":" + Quoted(who.name)) +
                    ",\"peer\":" + Quoted(who.peer) + ",\"action\":" + Quoted(action) +
                    ",\"target\":" + Quoted(target) + ",\"before\":";
  out += before.empty() ? "null" : std::string(before);
  out += ",\"after\":";
  out += after.empty() ? "null" : std::string(after);
  out += '}';
  return out;
}

void ControlPlane::SetOverride(const Actor& who, std::string_view rule, std::string_view key,
                               std::vector<std::string> limits, int64_t ttl_ms, std::string reason,
                               Done done) {
  std::optional<Rule> found = hooks_.rule(rule);
  if (!found.has_value())
    return done(NotFoundError("unknown rule '" + std::string(rule) + "'"), "");
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return done(
        InvalidArgumentError("key: must be 1 to " + std::to_string(kMaxKeyBytes) + " bytes"), "");
  }
  if (limits.empty() || limits.size() > static_cast<size_t>(kMaxLimitsPerRule)) {
    return done(InvalidArgumentError("limits: give 1 to " + std::to_string(kMaxLimitsPerRule) +
                                     " limits, e.g. [\"5000/day\"]"),
                "");
  }
  if (ttl_ms < 0 || ttl_ms > kMaxTtlMs) return done(TtlError(0), "");
  if (found->is_concurrency() && limits.size() != 1) {
    return done(InvalidArgumentError("limits: rule '" + std::string(rule) +
                                     "' is a concurrency rule: give its max_in_flight alone, "
                                     "e.g. [\"20\"]"),
                "");
  }
  std::vector<Limit> parsed;
  for (size_t i = 0; i < limits.size(); ++i) {
    auto limit = ParseLimitOf(*found, limits[i]);
    if (!limit.ok()) {
      return done(
          InvalidArgumentError("limits[" + std::to_string(i) + "]: " + limit.status().message()),
          "");
    }
    limits[i] = LimitTextOf(*found, *limit);
    parsed.push_back(*limit);
  }
  // The override keeps the rule's algorithm: its limits must fit it.
  Rule shaped = *found;
  shaped.tiers.clear();
  shaped.burst.clear();
  if (auto compiled = core::CompileRule(shaped, "", parsed); !compiled.ok()) {
    return done(InvalidArgumentError("limits: " + compiled.status().message()), "");
  }
  if (!store_) return done(unavailable_, "");
  OverrideRecord o{std::string(rule), std::string(key), std::move(limits),
                   ttl_ms > 0 ? clock_.NowMs() + ttl_ms : 0, std::move(reason)};
  Enqueue(std::make_unique<Task>(Task{[this, who, o = std::move(o), done = std::move(done)] {
    std::optional<OverrideRecord> before = GetOverride(o.rule, o.key);
    store::ControlWrite w;
    w.entry.table = store::kOverridesTable;
    w.entry.key = PairKey(o.rule, o.key);
    std::string limits_field;
    for (const std::string& l : o.limits) fields::Append(&limits_field, l);
    fields::Append(&w.entry.value, limits_field);
    fields::Append(&w.entry.value, o.reason);
    w.entry.expires_at_ms = o.expires_at_ms;
    const std::string after = OverrideJson(o);
    w.log = LogEntry(who, "override.set", o.rule + "/" + o.key, before ? OverrideJson(*before) : "",
                     after);
    const Status s = Write(w);
    done(s, s.ok() ? after : "");
  }}));
}

void ControlPlane::DeleteOverride(const Actor& who, std::string_view rule, std::string_view key,
                                  Done done) {
  if (!store_) return done(unavailable_, "");
  std::optional<OverrideRecord> before = GetOverride(rule, key);
  if (!before) {
    return done(NotFoundError("no override of rule '" + std::string(rule) + "' for this key"), "");
  }
  Enqueue(std::make_unique<Task>(Task{[this, who, o = *before, done = std::move(done)] {
    store::ControlWrite w;
    w.entry.table = store::kOverridesTable;
    w.entry.key = PairKey(o.rule, o.key);
    w.erase = true;
    const std::string was = OverrideJson(o);
    w.log = LogEntry(who, "override.delete", o.rule + "/" + o.key, was, "");
    const Status s = Write(w);
    done(s, s.ok() ? was : "");
  }}));
}

void ControlPlane::Block(const Actor& who, std::string_view key, std::string_view rule,
                         int64_t ttl_ms, std::string reason, Done done) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return done(
        InvalidArgumentError("key: must be 1 to " + std::to_string(kMaxKeyBytes) + " bytes"), "");
  }
  PutBlock(who, BlockRecord{std::string(key), std::string(rule), 0, std::move(reason)}, ttl_ms,
           std::move(done));
}

void ControlPlane::BlockNetwork(const Actor& who, std::string_view network, std::string_view rule,
                                int64_t ttl_ms, std::string reason, Done done) {
  Result<std::string> cidr = ParseNetwork(network);
  if (!cidr.ok()) return done(cidr.status(), "");
  BlockRecord b{"", std::string(rule), 0, std::move(reason)};
  b.cidr = std::move(*cidr);
  PutBlock(who, std::move(b), ttl_ms, std::move(done));
}

Result<std::string> ControlPlane::ParseNetwork(std::string_view text) {
  const Result<Cidr> network = ParseCidr(text);
  if (!network.ok()) return InvalidArgumentError("network: " + network.status().message());
  // ParseCidr read the address already: it parses.
  const std::optional<IpAddress> address = IpAddress::Parse(text.substr(0, text.find('/')));
  if (!address || *address != network->address()) {
    return InvalidArgumentError("network: '" + std::string(text) +
                                "' has host bits set; the network is " + network->ToString());
  }
  return network->ToString();
}

void ControlPlane::PutBlock(const Actor& who, BlockRecord b, int64_t ttl_ms, Done done) {
  if (ttl_ms <= 0 || ttl_ms > ControlPlane::kMaxTtlMs) return done(TtlError(1), "");
  if (!b.rule.empty() && !hooks_.rule(b.rule).has_value()) {
    return done(NotFoundError("unknown rule '" + b.rule + "'"), "");
  }
  if (!store_) return done(unavailable_, "");
  b.expires_at_ms = clock_.NowMs() + ttl_ms;
  Enqueue(std::make_unique<Task>(Task{[this, who, b = std::move(b), done = std::move(done)] {
    const std::string id = BlockId(b);
    std::string before;
    for (const BlockRecord& old : ListBlocks()) {
      if (BlockId(old) == id) before = BlockJson(old);
    }
    store::ControlWrite w;
    w.entry.table = store::kBlocksTable;
    w.entry.key = id;
    w.entry.value = b.reason;
    w.entry.expires_at_ms = b.expires_at_ms;
    const std::string after = BlockJson(b);
    w.log = LogEntry(who, "block.set", BlockTarget(b), before, after);
    const Status s = Write(w);
    done(s, s.ok() ? after : "");
  }}));
}

void ControlPlane::AutoBlock(std::string_view rule, std::string_view key, int64_t until_ms,
                             std::string_view reason) {
  if (!store_) return;
  BlockRecord b{std::string(key), std::string(rule), until_ms, std::string(reason)};
  std::string id = BlockId(b);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (auto_blocks_queued_ >= kMaxQueuedAutoBlocks) {
      ++auto_blocks_dropped_;
      return;
    }
    ++auto_blocks_queued_;
    const uint64_t seq = ++last_block_seq_;
    BlockRecord listed = b;
    listed.pending = true;
    pending_blocks_.insert_or_assign(id, PendingBlock{std::move(listed), seq});
    auto task = std::make_unique<Task>();
    task->auto_block = true;
    task->run = [this, b = std::move(b), id = std::move(id), seq] {
      store::ControlWrite w;
      w.entry.table = store::kBlocksTable;
      w.entry.key = id;
      w.entry.value = b.reason;
      w.entry.expires_at_ms = b.expires_at_ms;
      w.log = LogEntry(Actor{"rule", ""}, "block.set", BlockTarget(b), "", BlockJson(b));
      // Not reloaded after each: the block is in force here already, and a
      // flood of denials would reload once per block. The next poll sees
      // the new version and reloads once.
      auto s = store_->Apply(w, clock_.NowMs());
      if (!s.ok()) {
        Log(LogLevel::kWarn, "block_for not stored",
            {{"rule", b.rule}, {"error", s.status().message()}});
      }
      AutoBlockDone(id, seq, b, s.ok());
    };
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void ControlPlane::AutoBlockDone(const std::string& id, uint64_t seq, const BlockRecord& b,
                                 bool stored) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = pending_blocks_.find(id); it != pending_blocks_.end() && it->second.seq == seq) {
    pending_blocks_.erase(it);
  }
  // Not stored: the next reload drops it here too, as every server's.
  if (!stored) return;
  // The records are the store's from now on, this block included, until
  // the next reload reads them again.
  for (BlockRecord& old : records_.blocks) {
    if (old.cidr.empty() && old.key == b.key && old.rule == b.rule) {
      old = b;
      return;
    }
  }
  records_.blocks.push_back(b);
}

void ControlPlane::Unblock(const Actor& who, std::string_view key, std::string_view rule,
                           Done done) {
  if (!store_) return done(unavailable_, "");
  std::vector<BlockRecord> gone;
  for (BlockRecord& b : BlocksOf(key)) {
    if (rule.empty() || b.rule == rule) gone.push_back(std::move(b));
  }
  if (gone.empty()) return done(NotFoundError("no block for this key"), "");
  RemoveBlocks(who, std::move(gone), "\"key\":" + Quoted(key), std::move(done));
}

void ControlPlane::UnblockNetwork(const Actor& who, std::string_view network, std::string_view rule,
                                  Done done) {
  const Result<std::string> cidr = ParseNetwork(network);
  if (!cidr.ok()) return done(cidr.status(), "");
  if (!store_) return done(unavailable_, "");
  std::vector<BlockRecord> gone;
  for (BlockRecord& b : BlocksOfNetwork(*cidr)) {
    if (rule.empty() || b.rule == rule) gone.push_back(std::move(b));
  }
  if (gone.empty()) return done(NotFoundError("no block for the network " + *cidr), "");
  RemoveBlocks(who, std::move(gone), "\"cidr\":" + Quoted(*cidr), std::move(done));
}

void ControlPlane::RemoveBlocks(const Actor& who, std::vector<BlockRecord> gone, std::string head,
                                Done done) {
  Enqueue(std::make_unique<Task>(
      Task{[this, who, gone = std::move(gone), head = std::move(head), done = std::move(done)] {
        Status s;
        // As GET /v1/admin/blocks/{key} shows a key's blocks (and
        // /v1/admin/blocks/cidr/{addr}/{len} a network's): those removed.
        std::string removed = "{" + head + ",\"blocks\":[";
        const size_t first = removed.size();
        for (const BlockRecord& b : gone) {
          store::ControlWrite w;
          w.entry.table = store::kBlocksTable;
          w.entry.key = BlockId(b);
          w.erase = true;
          w.log = LogEntry(who, "block.delete", BlockTarget(b), BlockJson(b), "");
          auto applied = store_->Apply(w, clock_.NowMs());
          if (!applied.ok()) {
            s = applied.status();
            break;
          }
          if (removed.size() > first) removed += ',';
          removed += BlockJson(b);
        }
        removed += "]}";
        if (Status r = Reload(); s.ok()) s = r;
        done(s, s.ok() ? removed : "");
      }}));
}

void ControlPlane::PutRule(const Actor& who, std::string_view name, std::string_view json,
                           Done done) {
  if (hooks_.file_rule(name) != nullptr) {
    return done(InvalidArgumentError("rule '" + std::string(name) +
                                     "' comes from the config file; change it there"),
                "");
  }
  auto rule = ParseRuntimeRule(name, json);
  if (!rule.ok()) return done(rule.status(), "");
  if (Status s = core::CompileRule(*rule, "", rule->limits).status(); !s.ok()) return done(s, "");
  if (!store_) return done(unavailable_, "");
  Enqueue(std::make_unique<Task>(
      Task{[this, who, name = std::string(name), json = std::string(json), done = std::move(done)] {
        std::string before;
        for (const RuntimeRuleRecord& r : RuntimeRules()) {
          if (r.name == name) before = r.definition;
        }
        store::ControlWrite w;
        w.entry.table = store::kRulesTable;
        w.entry.key = name;
        w.entry.value = json;
        w.log = LogEntry(who, "rule.put", name, before, json);
        const Status s = Write(w);
        done(s, s.ok() ? json : "");
      }}));
}

void ControlPlane::DeleteRule(const Actor& who, std::string_view name, Done done) {
  if (hooks_.file_rule(name) != nullptr) {
    return done(InvalidArgumentError("rule '" + std::string(name) +
                                     "' comes from the config file; change it there"),
                "");
  }
  if (!store_) return done(unavailable_, "");
  std::string before;
  for (const RuntimeRuleRecord& r : RuntimeRules()) {
    if (r.name == name) before = r.definition;
  }
  if (before.empty()) return done(NotFoundError("no runtime rule '" + std::string(name) + "'"), "");
  Enqueue(std::make_unique<Task>(
      Task{[this, who, name = std::string(name), before, done = std::move(done)] {
        store::ControlWrite w;
        w.entry.table = store::kRulesTable;
        w.entry.key = name;
        w.erase = true;
        w.log = LogEntry(who, "rule.delete", name, before, "");
        const Status s = Write(w);
        done(s, s.ok() ? before : "");
      }}));
}

std::optional<OverrideRecord> ControlPlane::GetOverride(std::string_view rule,
                                                        std::string_view key) const {
  const int64_t now = clock_.NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  for (const OverrideRecord& o : records_.overrides) {
    if (o.rule == rule && o.key == key && (o.expires_at_ms == 0 || o.expires_at_ms > now)) return o;
  }
  return std::nullopt;
}

std::vector<OverrideRecord> ControlPlane::ListOverrides(std::string_view rule) const {
  const int64_t now = clock_.NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OverrideRecord> out;
  for (const OverrideRecord& o : records_.overrides) {
    if ((rule.empty() || o.rule == rule) && (o.expires_at_ms == 0 || o.expires_at_ms > now)) {
      out.push_back(o);
    }
  }
  return out;
}

std::vector<BlockRecord> ControlPlane::ListBlocks() const {
  const int64_t now = clock_.NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BlockRecord> out;
  for (const BlockRecord& b : records_.blocks) {
    // A pending one of the same (key, rule) replaces it in the store soon.
    if (b.expires_at_ms > now &&
        (pending_blocks_.empty() || !pending_blocks_.contains(BlockId(b)))) {
      out.push_back(b);
    }
  }
  for (const auto& [id, p] : pending_blocks_) {
    if (p.record.expires_at_ms > now) out.push_back(p.record);
  }
  return out;
}

std::vector<BlockRecord> ControlPlane::BlocksOf(std::string_view key) const {
  std::vector<BlockRecord> out;
  for (BlockRecord& b : ListBlocks()) {
    if (b.cidr.empty() && b.key == key) out.push_back(std::move(b));
  }
  return out;
}

std::vector<BlockRecord> ControlPlane::BlocksOfNetwork(std::string_view cidr) const {
  std::vector<BlockRecord> out;
  for (BlockRecord& b : ListBlocks()) {
    if (!b.cidr.empty() && b.cidr == cidr) out.push_back(std::move(b));
  }
  return out;
}

std::vector<RuntimeRuleRecord> ControlPlane::RuntimeRules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.rules;
}

void ControlPlane::RecentLog(size_t limit,
                             std::function<void(const Status&, std::vector<std::string>)> done) {
  if (!store_) return done(unavailable_, {});
  Enqueue(std::make_unique<Task>(Task{[this, limit, done = std::move(done)] {
    auto log = store_->RecentLog(limit);
    if (!log.ok()) return done(log.status(), {});
    done(Status::Ok(), std::move(*log));
  }}));
}

int64_t ControlPlane::auto_blocks_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return auto_blocks_dropped_;
}

}  // namespace floodgate::service
