// The typed readers every part of the config shares: one YAML node to a
// string, integer, boolean, size, duration, environment variable name, URL,
// algorithm or fallback, each refusing a wrong value with
// "source:line:column: what is wrong (near 'text')", and the words those
// messages use. Config sections (the *_section.h files) and
// envoyproxy/ratelimit's files (envoy_ratelimit.h) read through them, so
// their errors read alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "floodgate/rule.h"
#include "floodgate/status.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

inline constexpr int64_t kDayMs = 86'400'000;

// A value quoted for an error's "(near '...')", cut at 64 bytes.
std::string Near(std::string_view text);

// What a node is, for "must be a map, not a list": "empty", "a string",
// "a list", "a map".
const char* TypeName(const YAML::Node& node);

// A decimal integer with an optional sign; nullopt when malformed or out of
// int64 range.
std::optional<int64_t> ParseInt(std::string_view s);

// A duration as a config writes it, in its largest whole unit: 366d, 90s,
// 1500ms.
std::string DurationText(int64_t ms);

// A name a config gives a rule, a tier or a priority class: 1 to 64
// characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'.
bool IsValidName(std::string_view name);

// Reads the values of one source's YAML (a config file, an Envoy file). It
// holds the source's name, which every message starts with, and nothing
// else: const, and safe to share between threads.
//
// A reader takes the entry's key and value nodes and the field's dotted name
// as messages print it ("server.threads"). It points at the value, or at
// the key when the value is empty (an empty value's mark points past it,
// often to the next line).
class Fields {
 public:
  explicit Fields(std::string_view source) : source_(source) {}

  std::string_view source() const { return source_; }

  // "source:line:column" of `mark`, 1-based (1:1 for a null mark).
  std::string Position(const YAML::Mark& mark) const;

  // "source:line:column: what (near 'near')" as an InvalidArgument error.
  Status Fail(const YAML::Mark& mark, std::string_view what, std::string_view near) const;
  // At `value`, or at `key` when the value is empty.
  Status FailAt(const YAML::Node& key, const YAML::Node& value, std::string_view what,
                std::string_view near) const;
  // "'field' must be <expected>, not <what value is>", near the key.
  Status WrongType(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                   std::string_view expected) const;

  // Calls f(name, key, value) for each entry of `map` in file order, after
  // checking that keys are non-empty strings and unique (yaml-cpp keeps a
  // duplicate key silently, and a lookup would hide the second one). `noun`
  // names the entries in the duplicate message ("key", "rule", "tier").
  // Returns the first error.
  using EntryFn = absl::FunctionRef<Status(const std::string& name, const YAML::Node& key,
                                           const YAML::Node& value)>;
  Status ForEachEntry(const YAML::Node& map, std::string_view noun, EntryFn f) const;
  // An optional section (or block) of known keys: empty is every default
  // and calls nothing, a map has each entry handed to f as ForEachEntry
  // does, and anything else is "'field' must be a map, not ...".
  Status ForEachInSection(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                          EntryFn f) const;

  // Any scalar.
  Result<std::string> String(const YAML::Node& key, const YAML::Node& value,
                             std::string_view field) const;
  // A decimal integer in [min, max].
  Result<int64_t> Int(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                      int64_t min, int64_t max) const;
  // true/false, and YAML 1.1's yes/no/on/off, in three cases each.
  Result<bool> Bool(const YAML::Node& key, const YAML::Node& value, std::string_view field) const;
  // Bytes, as Redis reads maxmemory: an integer, or one with a unit in any
  // case: k, m, g (10^3, 10^6, 10^9), kb, mb, gb and kib, mib, gib (2^10,
  // 2^20, 2^30). In [min, max]; with a `min` of 0, "off" is 0 too.
  Result<int64_t> Size(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                       int64_t min, int64_t max) const;
  // A number and a unit, as in a limit's period ("500ms", "30s", "5m",
  // "1h", "7d"), in [min_ms, max_ms]. A plain number is refused: its unit
  // would be a guess.
  Result<int64_t> Duration(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                           int64_t min_ms, int64_t max_ms) const;
  // A timeout: a duration up to max_ms, or 0 / off for none (0).
  Result<int64_t> DurationOrOff(const YAML::Node& key, const YAML::Node& value,
                                std::string_view field, int64_t max_ms) const;
  // The name of an environment variable ([A-Za-z_][A-Za-z0-9_]*): where a
  // secret is, since the file never holds one.
  Result<std::string> EnvironmentVariable(const YAML::Node& key, const YAML::Node& value,
                                          std::string_view field) const;
  // An http:// URL (common/http_url.h), kept as written.
  Result<std::string> HttpUrl(const YAML::Node& key, const YAML::Node& value,
                              std::string_view field) const;
  // A rule's (or envoy_ratelimit's) `algorithm`, `on_backend_error` and
  // `on_store_full`.
  Result<Algorithm> AlgorithmValue(const YAML::Node& key, const YAML::Node& value,
                                   std::string_view field) const;
  Result<OnBackendError> OnBackendErrorValue(const YAML::Node& key, const YAML::Node& value,
                                             std::string_view field) const;
  Result<OnStoreFull> OnStoreFullValue(const YAML::Node& key, const YAML::Node& value,
                                       std::string_view field) const;

 private:
  // "allow" (true) or "deny" (false).
  Result<bool> AllowOrDeny(const YAML::Node& key, const YAML::Node& value,
                           std::string_view field) const;

  std::string_view source_;
};

}  // namespace floodgate::config
