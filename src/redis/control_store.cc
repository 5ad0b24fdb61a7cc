// RedisControlStore: see control_store.h and scripts/control.lua.
//
// Version and RecentLog are single reads, so plain commands; Load is a
// script too, although it writes nothing, because the version and three
// hashes must be read as of one instant (no MULTI behind Twemproxy), and
// because it leaves the expired entries out on Redis rather than shipping
// them. The entry encoding puts the expiry first so that the script can
// judge an entry without touching the value, and splits at the first ':'
// (the expiry has none), so the value needs no escaping.
#include "redis/control_store.h"

#include <algorithm>
#include <array>
#include <span>
#include <tuple>
#include <utility>

#include "redis/feature_script_call.h"
#include "redis/reply_util.h"
#include "redis/script_call.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "control";

// The tables in the order of the script's KEYS[1..3].
constexpr std::array<const char*, 3> kTables = {store::kOverridesTable, store::kBlocksTable,
                                                store::kRulesTable};

// The table's 1-based index in the script's KEYS; 0 for no table of ours.
int TableIndex(std::string_view table) {
  for (size_t i = 0; i < kTables.size(); ++i) {
    if (table == kTables[i]) return static_cast<int>(i) + 1;
  }
  return 0;
}

// "<expires_at_ms>:<value>" into its parts; false when it is not that.
bool DecodeEntry(std::string_view encoded, int64_t* expires_at_ms, std::string* value) {
  const size_t colon = encoded.find(':');
  if (colon == std::string_view::npos || !ParseInteger(encoded.substr(0, colon), expires_at_ms)) {
    return false;
  }
  value->assign(encoded.substr(colon + 1));
  return true;
}

// `s` with the step of the control store it failed in (the client's
// message names the node and what went wrong); the code is kept.
Status InStep(std::string_view step, const Status& s) {
  return Status(s.code(), "control store " + std::string(step) + ": " + s.message());
}

}  // namespace

Result<OwnedReply> RedisControlStore::Run(std::vector<std::string> argv) {
  // Every key has the hash tag {control}: one slot, and any of them routes.
  static const std::string keys[] = {std::string(kOverridesKey), std::string(kBlocksKey),
                                     std::string(kRulesKey), std::string(kVersionKey),
                                     std::string(kLogKey)};
  return CallFeatureScript(client_, Feature::kControl, keys, argv);
}

Result<OwnedReply> RedisControlStore::Command(std::string_view key,
                                              std::span<const std::string> args,
                                              int64_t deadline_ns) {
  auto reply = deadline_ns > 0 ? client_.Call(key, args, deadline_ns) : client_.Call(key, args);
  if (!reply.ok()) return reply.status();
  if (*reply == nullptr) return InternalError("redis: no reply to " + args.front());
  if (Status e = ErrorReplyStatus(**reply); !e.ok()) {
    const std::string k(key);
    client_.NoteWrongType(e.message(), std::span<const std::string>(&k, 1));
    return e;
  }
  return reply;
}

namespace {
constexpr int64_t kVersionTimeoutMs = 100;
}  // namespace

Result<uint64_t> RedisControlStore::Version() {
  const std::vector<std::string> args = {"GET", std::string(kVersionKey)};
  // Polled every 250 ms, and the one call a stopping server may be waiting
  // in: a stalled Redis holds it kVersionTimeoutMs at most, whatever the
  // store's timeout (the next poll asks again).
  auto reply =
      Command(kVersionKey, args, client_.clock().MonotonicNs() + kVersionTimeoutMs * 1'000'000);
  if (!reply.ok()) return InStep("version", reply.status());
  const redisReply& r = **reply;
  if (r.type == REDIS_REPLY_NIL) return uint64_t{0};  // nothing written yet
  int64_t v = 0;
  if (r.type != REDIS_REPLY_STRING || !ParseInteger(std::string_view(r.str, r.len), &v) || v < 0) {
    return InternalError("redis: " + std::string(kVersionKey) +
                         " holds no version number: " + DescribeReply(&r));
  }
  return static_cast<uint64_t>(v);
}

Result<store::ControlSnapshot> RedisControlStore::Load(int64_t now_ms) {
  auto reply = Run({"load", NumberArgument(now_ms)});
  if (!reply.ok()) return InStep("load", reply.status());
  const redisReply& r = **reply;
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 1 + kTables.size()) {
    return MalformedReply(kScript, "load: not {version, 3 tables}", &r);
  }
  store::ControlSnapshot snapshot;
  int64_t version = 0;
  if (!ReplyInteger(r, 0, &version) || version < 0) {
    return MalformedReply(kScript, "load: the version is no number", &r);
  }
  snapshot.version = static_cast<uint64_t>(version);
  for (size_t t = 0; t < kTables.size(); ++t) {
    const redisReply* entries = r.element[t + 1];
    if (entries == nullptr || entries->type != REDIS_REPLY_ARRAY || entries->elements % 2 != 0) {
      return MalformedReply(kScript, "load: a table is no array of pairs", &r);
    }
    for (size_t i = 0; i + 1 < entries->elements; i += 2) {
      store::ControlEntry entry;
      entry.table = kTables[t];
      std::string_view key, encoded;
      if (!ReplyString(*entries, i, &key) || !ReplyString(*entries, i + 1, &encoded)) {
        return MalformedReply(kScript, "load: an entry is not two strings", &r);
      }
      entry.key = std::string(key);
      if (!DecodeEntry(encoded, &entry.expires_at_ms, &entry.value)) {
        // Not written by floodgate: reported rather than dropped, as the
        // embedded store reports a corrupt file.
        return InternalError("redis: the entry '" + entry.key + "' of " + kTables[t] + " in " +
                             std::string(kKeyPrefix) + kTables[t] +
                             " is not <expires_at_ms>:<value>; delete it (HDEL)");
      }
      snapshot.entries.push_back(std::move(entry));
    }
  }
  // The order the embedded store gives, not Redis's hash order.
  std::sort(snapshot.entries.begin(), snapshot.entries.end(),
            [](const store::ControlEntry& a, const store::ControlEntry& b) {
              return std::tie(a.table, a.key) < std::tie(b.table, b.key);
            });
  return snapshot;
}

Result<uint64_t> RedisControlStore::Apply(const store::ControlWrite& write, int64_t now_ms) {
  const int table = TableIndex(write.entry.table);
  if (table == 0) return InvalidArgumentError("unknown control table '" + write.entry.table + "'");
  std::vector<std::string> argv;
  if (write.erase) {
    argv = {"del", NumberArgument(table), NumberArgument(now_ms), write.entry.key, write.log};
  } else {
    argv = {"put",
            NumberArgument(table),
            NumberArgument(now_ms),
            write.entry.key,
            NumberArgument(write.entry.expires_at_ms),
            write.entry.value,
            write.log};
  }
  auto reply = Run(std::move(argv));
  if (!reply.ok()) return InStep("apply", reply.status());
  if ((*reply)->type != REDIS_REPLY_INTEGER || (*reply)->integer < 1) {
    return MalformedReply(kScript, "apply: not a version", reply->get());
  }
  return static_cast<uint64_t>((*reply)->integer);
}

Result<std::vector<std::string>> RedisControlStore::RecentLog(size_t limit) {
  std::vector<std::string> out;
  if (limit == 0) return out;
  // The list never holds more than kLogKeep: a larger limit asks no more.
  const int64_t last = static_cast<int64_t>(std::min(limit, kLogKeep)) - 1;
  const std::vector<std::string> args = {"LRANGE", std::string(kLogKey), "0", NumberArgument(last)};
  auto reply = Command(kLogKey, args);
  if (!reply.ok()) return InStep("log", reply.status());
  const redisReply& r = **reply;
  out.reserve(r.type == REDIS_REPLY_ARRAY ? r.elements : 0);
  for (size_t i = 0; r.type == REDIS_REPLY_ARRAY && i < r.elements; ++i) {
    std::string_view entry;
    if (!ReplyString(r, i, &entry)) break;
    out.emplace_back(entry);
  }
  if (r.type != REDIS_REPLY_ARRAY || out.size() != r.elements) {
    return InternalError("redis: unexpected reply to LRANGE " + std::string(kLogKey) + " (" +
                         DescribeReply(&r) + ")");
  }
  return out;
}

}  // namespace floodgate::redis
