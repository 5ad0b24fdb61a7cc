// RedactKey: how a subject's key is shown when `redact_keys` is set (in the
// top-subjects route, the dashboard and the msg=denied log lines).
#pragma once

#include <string>
#include <string_view>

namespace floodgate::server {

// "sha256:" and the first 16 hex digits of the key's SHA-256: the same key
// always shows the same, on every server, so a redacted subject can still
// be followed across lines and servers. It keeps keys off screens and out
// of log shipping; it is no anonymisation of a small key space (phone
// numbers can be hashed in bulk), which is documented (docs/visibility.md).
std::string RedactKey(std::string_view key);

// The key as shown: itself, or RedactKey(key) when `redact`.
inline std::string ShownKey(std::string_view key, bool redact) {
  return redact ? RedactKey(key) : std::string(key);
}

}  // namespace floodgate::server
