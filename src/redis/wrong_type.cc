// Keys of the wrong type: see wrong_type.h.
#include "redis/wrong_type.h"

#include "common/log.h"
#include "redis/control_store.h"
#include "redis/redis_sketch_board.h"

namespace floodgate::redis {
namespace {

// The word after "a " or "an " at the start of `text`, and where it ends.
bool TypeWord(std::string_view text, std::string_view* word, size_t* end) {
  size_t at = 0;
  if (text.starts_with("an ")) {
    at = 3;
  } else if (text.starts_with("a ")) {
    at = 2;
  } else {
    return false;
  }
  size_t stop = at;
  while (stop < text.size() && text[stop] != ',' && text[stop] != ' ') ++stop;
  if (stop == at) return false;
  *word = text.substr(at, stop - at);
  *end = stop;
  return true;
}

}  // namespace

bool ParseWrongType(std::string_view message, WrongType* out) {
  const size_t at = message.find("WRONGTYPE");
  if (at == std::string_view::npos) return false;
  if (out == nullptr) return true;
  *out = WrongType{};
  std::string_view rest = message.substr(at);
  constexpr std::string_view kOwn = "WRONGTYPE floodgate: ";
  if (!rest.starts_with(kOwn)) return true;  // Redis's own: no types named
  rest.remove_prefix(kOwn.size());
  if (rest.starts_with("KEYS[")) {
    int index = 0;
    size_t i = 5;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9' && index < 1000) {
      index = index * 10 + (rest[i] - '0');
      ++i;
    }
    if (i < rest.size() && rest[i] == ']') out->key_index = index;
  }
  const size_t holds = rest.find(" holds ");
  if (holds == std::string_view::npos) return true;
  rest.remove_prefix(holds + 7);
  std::string_view found, expected;
  size_t end = 0;
  if (!TypeWord(rest, &found, &end)) return true;
  out->found = std::string(found);
  rest.remove_prefix(end);
  if (rest.starts_with(", not ") && TypeWord(rest.substr(6), &expected, &end)) {
    out->expected = std::string(expected);
  }
  return true;
}

std::string_view ExpectedType(std::string_view key) {
  if (key == "fg:{alerts}") return "stream";
  // Before the rule states' fg:{ below, which these names also start with.
  if (RedisControlStore::IsControlKey(key)) {
    if (key == RedisControlStore::kVersionKey) return "string";
    if (key == RedisControlStore::kLogKey) return "list";
    if (key == RedisControlStore::kOverridesKey || key == RedisControlStore::kBlocksKey ||
        key == RedisControlStore::kRulesKey) {
      return "hash";
    }
    return "";
  }
  // The servers' top-subjects sketches (redis/redis_sketch_board.h), before the
  // rule states' fg:{ below, which these names also start with.
  if (key == RedisSketchBoard::kServersKey) return "zset";
  if (key == RedisSketchBoard::kBlobsKey) return "hash";
  if (key.starts_with("fg:{") || key.starts_with("fg:cl:{")) return "string";
  // fg:rsv:{ is no fg:{ either: a reservation's record or settled marker.
  if (key.starts_with("fg:rsv:{")) return "string";
  // fg:lease:{ is no fg:{ (the brace comes later): the order above does
  // not matter to it.
  if (key.starts_with("fg:set:{") || key.starts_with("fg:lease:{")) return "zset";
  if (key.starts_with("fg:otp:{")) {
    for (std::string_view suffix : {"}:codes", "}:issues", "}:attempts"}) {
      if (key.ends_with(suffix)) return "zset";
    }
  }
  return "";
}

WrongTypeLog::WrongTypeLog(int64_t interval_ns, size_t max_keys)
    : interval_ns_(interval_ns), max_keys_(max_keys) {}

bool WrongTypeLog::Report(std::string_view key, const WrongType& what, int64_t now_ns) {
  uint64_t summary = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    // Forget the keys whose interval is over, at most once per interval:
    // the map never holds more than max_keys, so a purge is bounded too.
    if (now_ns - last_purge_ns_ >= interval_ns_) {
      last_purge_ns_ = now_ns;
      absl::erase_if(logged_,
                     [&](const auto& entry) { return now_ns - entry.second >= interval_ns_; });
    }
    auto it = logged_.find(absl::string_view(key.data(), key.size()));
    if (it != logged_.end() && now_ns - it->second < interval_ns_) return false;
    if (it != logged_.end()) {
      it->second = now_ns;
    } else if (logged_.size() < max_keys_) {
      logged_.emplace(std::string(key), now_ns);
    } else {
      // Too many distinct keys to remember: one line per interval says so.
      ++untold_;
      if (summary_logged_ && now_ns - summary_at_ns_ < interval_ns_) return false;
      summary_logged_ = true;
      summary_at_ns_ = now_ns;
      summary = untold_;
      untold_ = 0;
    }
  }
  if (summary > 0) {
    Log(LogLevel::kWarn, "redis keys of the wrong type, too many to log one by one",
        {{"unlogged", std::to_string(summary)}, {"last_key", std::string(key)}});
    return false;
  }
  Log(LogLevel::kWarn, "redis key of the wrong type",
      {{"key", std::string(key)},
       {"found", what.found.empty() ? "unknown" : what.found},
       {"expected", what.expected.empty() ? std::string(ExpectedType(key)) : what.expected}});
  return true;
}

uint64_t WrongTypeLog::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

size_t WrongTypeLog::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return logged_.size();
}

}  // namespace floodgate::redis
