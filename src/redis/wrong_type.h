// Keys of the wrong type: a key under one of floodgate's names that holds
// another Redis type than the one floodgate keeps there (someone ran SET,
// LPUSH or HSET on fg:{api:alice}). Every decision or operation on such a key
// fails, and follows on_backend_error, until the key is deleted or expires;
// these make it visible. The scripts answer "WRONGTYPE floodgate: ... holds a
// <found>, not a <expected>" for such a key (one decision of a call, the
// rest are made); the callers recognise it, count it and log it once per key
// per interval; `floodgate audit` lists such keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

namespace floodgate::redis {

// What a WRONGTYPE error says.
struct WrongType {
  std::string found;     // the type the key holds ("list"); "" when the error does not say
  std::string expected;  // the type floodgate keeps there ("string"); "" likewise
  int key_index = 0;     // the script's KEYS[i] it names (1-based); 0: the one key
};

// Whether `message` (an error reply's text, or a Status message quoting one
// after a prefix such as "redis: ") is a WRONGTYPE error: the scripts' own
// ("WRONGTYPE floodgate: the key holds a list, not a string", "...: KEYS[2]
// holds a hash, not a zset") or Redis's ("WRONGTYPE Operation against a key
// holding the wrong kind of value"). Fills *out when not null.
bool ParseWrongType(std::string_view message, WrongType* out = nullptr);

// The type floodgate keeps at `key`, judged by its name: "string" for rule
// states (fg:{rule:subject}, fg:{rule:subject}:tier), CL.THROTTLE's
// (fg:cl:{key}) and reservations (fg:rsv:{rule:subject}:id); "zset" for
// expiring sets (fg:set:{key}), lease tables (fg:lease:{rule:subject}) and
// OTP states (fg:otp:{subject}:codes, :issues, :attempts); "stream" for the
// alert stream (fg:{alerts}); "hash" for the control tables
// (fg:{control}:overrides, :blocks, :rules), "string" for their version
// (fg:{control}:version) and "list" for their log (fg:{control}:log); ""
// for any other name (not floodgate's).
std::string_view ExpectedType(std::string_view key);

// Counts the failures wrong-type keys cause and logs each key at most once
// per interval:
//   level=warn msg="redis key of the wrong type" key=fg:{api:alice} found=list expected=string
// The keys logged within the interval are remembered, at most max_keys of
// them (bounded memory): past that, further keys are counted and summed up
// in one line per interval (msg="redis keys of the wrong type, too many to
// log one by one" unlogged=N last_key=...).
// Times are passed in (monotonic ns), so tests drive it. Thread-safe.
class WrongTypeLog {
 public:
  static constexpr int64_t kDefaultIntervalNs = 60'000'000'000;
  static constexpr size_t kDefaultMaxKeys = 1000;

  explicit WrongTypeLog(int64_t interval_ns = kDefaultIntervalNs,
                        size_t max_keys = kDefaultMaxKeys);

  // Counts one failed decision or operation on `key`; logs it unless `key`
  // was logged less than an interval ago. Returns whether it logged `key`.
  bool Report(std::string_view key, const WrongType& what, int64_t now_ns);

  uint64_t count() const;
  // Keys remembered as logged (at most max_keys).
  size_t tracked() const;

 private:
  const int64_t interval_ns_;
  const size_t max_keys_;
  mutable std::mutex mu_;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  // Key -> when it was last logged.
  absl::flat_hash_map<std::string, int64_t> logged_ ABSL_GUARDED_BY(mu_);
  int64_t last_purge_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // The summary line for keys past max_keys: when last written, and how many
  // reports it has not told of yet.
  int64_t summary_at_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t untold_ ABSL_GUARDED_BY(mu_) = 0;
  bool summary_logged_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace floodgate::redis
