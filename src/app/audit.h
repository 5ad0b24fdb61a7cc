// `floodgate audit`: finds Redis keys of the store that have no expiry
// (seed 004: counters that lived forever after INCR without EXPIRE) and,
// with --fix, gives them one; and keys named like floodgate's own that hold
// another type than floodgate keeps there (redis/wrong_type.h), which it
// reports and leaves alone. The control records (fg:{control}:*) have no
// expiry by design and are not reported for it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace floodgate::app {

struct AuditOptions {
  std::string redis_url;       // any store URL but a proxy's (a proxy cannot SCAN)
  std::string prefix = "fg:";  // keys scanned: those starting with it
  bool fix = false;            // EXPIRE the keys found without a TTL
  int64_t fix_ttl_s = 86'400;  // the expiry --fix gives (at least your longest window)
  int64_t timeout_ms = 2'000;  // per Redis request
};

// Scans every master with SCAN (never KEYS), reports each key without a TTL
// ("no-ttl <node> <key>") and each of the wrong type ("wrong-type <node>
// found=<type> expected=<type> <key>") on `out`, and a summary on `err`.
// Exit code: 0 when every key has a TTL (or was fixed) and the type
// floodgate keeps at its name, 1 when keys without a TTL or of the wrong
// type remain, 2 on errors.
int RunAudit(const AuditOptions& options, std::ostream& out, std::ostream& err);

}  // namespace floodgate::app
