// `floodgate audit`: see audit.h.
//
// SCAN walks each master's keyspace in steps, so the audit never blocks
// Redis the way KEYS would; a key may be reported twice by SCAN (it
// guarantees only that every key present throughout is seen), so reports
// are de-duplicated per node. For each batch of keys the PTTLs are asked
// for in one pipeline, and the TYPEs of the keys named like floodgate's own
// (redis::ExpectedType) in another. Every key under the prefix is audited
// for its TTL whatever floodgate keeps there (rule states, CL.THROTTLE,
// expiring sets, lease tables, OTP, reservations): each of them lives no
// longer than its content, so none should lack one. --fix uses EXPIRE … NX (Redis 7), so a
// key that got its own TTL meanwhile keeps it; older servers get a plain
// EXPIRE. A key of the wrong type is only reported: it is someone's data,
// and deleting it is the operator's call (DEL, or let it expire).
// The control records (fg:{control}:*, redis/control_store.h) are never
// reported or fixed for their missing TTL: they are configuration, meant to
// last until changed; their types are checked like any key of floodgate's.
#include "app/audit.h"

#include <atomic>
#include <future>
#include <ostream>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/store_url.h"
#include "redis/client.h"
#include "redis/control_store.h"
#include "redis/wrong_type.h"

namespace floodgate::app {
namespace {

std::string ReplyText(const redisReply* r) {
  return r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : std::string();
}

// Escapes a binary key for one output line.
std::string Printable(std::string_view key) {
  std::string out;
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

constexpr int64_t kFailed = -100;

// The PTTL of every key of a SCAN page, asked in one pipeline; kFailed
// where the request failed.
std::vector<int64_t> PttlAll(redis::Client& client, const std::string& node,
                             const redisReply* keys) {
  std::vector<int64_t> ttls(keys->elements, kFailed);
  if (keys->elements == 0) return ttls;
  std::atomic<size_t> left{keys->elements};
  std::promise<void> all;
  for (size_t i = 0; i < keys->elements; ++i) {
    const std::string key = ReplyText(keys->element[i]);
    const std::string_view args[] = {"PTTL", key};
    client.SendToNode(node, args, [&, i](Status s, const redisReply* r) {
      if (s.ok() && r != nullptr && r->type == REDIS_REPLY_INTEGER) ttls[i] = r->integer;
      if (left.fetch_sub(1) == 1) all.set_value();
    });
  }
  all.get_future().wait();
  return ttls;
}

// The TYPE of every key of a SCAN page whose name floodgate uses, asked in
// one pipeline: "" for the others (not asked), and for failed requests
// (then *failed is set).
std::vector<std::string> TypeAll(redis::Client& client, const std::string& node,
                                 const redisReply* keys, bool* failed) {
  std::vector<std::string> types(keys->elements);
  std::vector<size_t> asked;
  for (size_t i = 0; i < keys->elements; ++i) {
    if (!redis::ExpectedType(ReplyText(keys->element[i])).empty()) asked.push_back(i);
  }
  if (asked.empty()) return types;
  std::atomic<size_t> left{asked.size()};
  std::atomic<bool> any_failed{false};
  std::promise<void> all;
  for (const size_t i : asked) {
    const std::string key = ReplyText(keys->element[i]);
    const std::string_view args[] = {"TYPE", key};
    client.SendToNode(node, args, [&, i](Status s, const redisReply* r) {
      if (s.ok() && r != nullptr && r->type == REDIS_REPLY_STATUS) {
        types[i] = ReplyText(r);
      } else {
        any_failed.store(true);
      }
      if (left.fetch_sub(1) == 1) all.set_value();
    });
  }
  all.get_future().wait();
  *failed = any_failed.load();
  return types;
}

}  // namespace

int RunAudit(const AuditOptions& options, std::ostream& out, std::ostream& err) {
  auto url = ParseStoreUrl(options.redis_url);
  if (!url.ok()) {
    err << "audit: " << url.status().message() << "\n";
    return 2;
  }
  if (url->mode == StoreMode::kProxy) {
    err << "audit: a proxy (Twemproxy) cannot SCAN; run the audit against each Redis server "
           "behind it (redis://host:port)\n";
    return 2;
  }
  redis::ClientOptions co;
  co.url = *url;
  co.timeout_ms = options.timeout_ms;
  co.connect_timeout_ms = options.timeout_ms;
  co.connections_per_node = 1;
  auto client = redis::Client::Create(co);
  if (!client.ok()) {
    err << "audit: " << client.status().message() << "\n";
    return 2;
  }
  const std::vector<std::string> masters = (*client)->Masters();
  if (masters.empty()) {
    err << "audit: cannot reach " << url->Redacted() << "\n";
    return 2;
  }
  const std::string match = options.prefix + "*";
  const std::string ttl = std::to_string(options.fix_ttl_s);
  int64_t scanned = 0, without_ttl = 0, fixed = 0, wrong_type = 0, control = 0;
  for (const std::string& node : masters) {
    absl::flat_hash_set<std::string> reported, reported_type;
    std::string cursor = "0";
    do {
      auto page = (*client)->CallNode(node, {"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
      if (!page.ok() || (*page)->type != REDIS_REPLY_ARRAY || (*page)->elements != 2) {
        err << "audit: SCAN on " << node << " failed: "
            << (page.ok() ? redis::DescribeReply(page->get()) : page.status().message()) << "\n";
        return 2;
      }
      cursor = ReplyText((*page)->element[0]);
      const redisReply* keys = (*page)->element[1];
      const std::vector<int64_t> ttls = PttlAll(**client, node, keys);
      bool type_failed = false;
      const std::vector<std::string> types = TypeAll(**client, node, keys, &type_failed);
      if (type_failed) {
        err << "audit: TYPE failed on " << node << "\n";
        return 2;
      }
      for (size_t i = 0; i < keys->elements; ++i) {
        const std::string key = ReplyText(keys->element[i]);
        ++scanned;
        if (ttls[i] == kFailed) {
          err << "audit: PTTL failed on " << node << "\n";
          return 2;
        }
        // "none": deleted (or expired) since SCAN saw it.
        const std::string_view expected = redis::ExpectedType(key);
        if (!types[i].empty() && types[i] != "none" && types[i] != expected &&
            reported_type.insert(key).second) {
          ++wrong_type;
          out << "wrong-type " << node << " found=" << types[i] << " expected=" << expected << " "
              << Printable(key) << "\n";
        }
        // The control records live without an expiry by design: giving one
        // to an override would make it vanish.
        if (redis::RedisControlStore::IsControlKey(key)) {
          if (ttls[i] == -1 && reported.insert(key).second) ++control;
          continue;
        }
        if (ttls[i] != -1 || !reported.insert(key).second) continue;
        ++without_ttl;
        out << "no-ttl " << node << " " << Printable(key) << "\n";
        if (!options.fix) continue;
        auto set = (*client)->CallNode(node, {"EXPIRE", key, ttl, "NX"});
        if (set.ok() && (*set)->type == REDIS_REPLY_ERROR) {  // before Redis 7: no NX
          set = (*client)->CallNode(node, {"EXPIRE", key, ttl});
        }
        if (!set.ok() || (*set)->type != REDIS_REPLY_INTEGER) {
          err << "audit: EXPIRE failed on " << node << ": "
              << (set.ok() ? redis::DescribeReply(set->get()) : set.status().message()) << "\n";
          return 2;
        }
        if ((*set)->integer == 1) ++fixed;
      }
    } while (cursor != "0");
  }
  err << "audit: scanned " << scanned << " keys matching '" << match << "' on " << masters.size()
      << (masters.size() == 1 ? " node" : " nodes") << ": " << without_ttl << " without a TTL";
  if (control > 0) {
    err << " (not counting " << control << " control " << (control == 1 ? "key" : "keys")
        << " under " << redis::RedisControlStore::kKeyPrefix << ", which have none by design)";
  }
  if (options.fix) err << ", " << fixed << " given one (" << options.fix_ttl_s << " s)";
  err << ", " << wrong_type << " of the wrong type";
  if (wrong_type > 0) err << " (not changed: delete them once you know whose they are)";
  err << "\n";
  return without_ttl > fixed || wrong_type > 0 ? 1 : 0;
}

}  // namespace floodgate::app
